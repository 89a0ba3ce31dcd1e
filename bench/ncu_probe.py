"""Launch one kernel a few times so Nsight Compute can profile it (device machine only).

    ncu --clock-control none --set full -k regex:NAME -c 1 python3 bench/ncu_probe.py KERNEL M N K [VARIANT]
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import cupy

    from kernels import registry, tensorcore

    name, M, N, K = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    variant = argv[4] if len(argv) > 4 else None
    spec = registry.get(name)
    runner = (tensorcore.make_runner(spec, variant=variant) if spec.runner.startswith("kernels.tensorcore")
              else registry.runner(name))
    problem = runner.make(M, N, K, seed=1, reference=False)
    for _ in range(3):
        runner.launch(problem)
    cupy.cuda.Device().synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
