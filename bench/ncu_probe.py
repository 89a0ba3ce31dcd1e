"""Launch one kernel a few times so Nsight Compute can profile it (device machine only).

    ncu --clock-control none --set full -k regex:NAME -c 1 python3 bench/ncu_probe.py KERNEL M N K [VARIANT]

VARIANT: a tensorcore.VARIANTS name for tc_* kernels, a tile WGxSTAGESxKT[xt[MB]] for wg_* kernels.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import cupy

    from kernels import registry, tensorcore, wgmma

    name, M, N, K = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    variant = argv[4] if len(argv) > 4 else None
    spec = registry.get(name)
    if spec.runner.startswith("kernels.tensorcore"):
        runner = tensorcore.make_runner(spec, variant=variant)
    elif spec.runner.startswith("kernels.wgmma"):  # VARIANT = a tile WGxSTAGESxKT, with "xt" for the TMA kernel
        tile = None if variant is None else wgmma.parse_tile(variant)
        runner = wgmma.make_runner(spec, tile=tile)
    else:
        runner = registry.runner(name)
    problem = runner.make(M, N, K, seed=1, reference=False)
    for _ in range(3):
        runner.launch(problem)
    cupy.cuda.Device().synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
