"""wgmma (sm_90a) GEMM kernels against the float64 reference, on an H100/H200 (skipped on other GPUs).

Same protocol as the mma.sync kernels: fresh random data per case (the seed in the failure message), outputs poisoned
with NaN before each of two launches on the same input set, the split-K tile counters left clean (the per-CTA slots
of the split tiles are overwritten before they are read, so they are not checked). Every
batch tile of WG_TILES and W4_TILES is reached (M = 16..256; w4a16 runs M > 128 as two m-tiles), plus M below one
tile (1, 5) and partial tiles (17, 100, 200).
"""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.gpu

KERNELS = ("wg_bf16", "wg_fp16", "wg_w8a8", "wg_fp8", "wg_w4a16")
BATCHES = ((1, (4096, 11008)), (5, (22016, 4096)), (16, (22016, 4096)), (17, (4096, 11008)),
           (32, (4096, 11008)), (64, (22016, 4096)),
           (100, (4096, 11008)), (128, (12288, 4096)), (200, (4096, 4096)), (256, (22016, 4096)))
TOLERANCE = {"wg_bf16": 6e-3, "wg_fp16": 2e-3, "wg_w8a8": 2e-3, "wg_fp8": 2e-3, "wg_w4a16": 2e-3}


@pytest.fixture(scope="module")
def hopper(cupy):
    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma kernels need compute capability 9.0 (sm_90a)")
    return cupy


def _poison(cp, out) -> None:
    if out.dtype == cp.uint16:  # bf16 bits
        out.fill(0x7FC0)
    else:
        out.fill(float("nan"))


def _launch_error(cp, runner, problem) -> float:
    """Poison the output, launch once, and return the relative error against the float64 reference."""
    from kernels import reference

    _poison(cp, problem.out)
    runner.launch(problem)
    cp.cuda.runtime.deviceSynchronize()
    return reference.rel_error(runner.output(problem), problem.ref)


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("M,N,K", [(M, N, K) for M, (N, K) in BATCHES])
def test_kernel_matches_float64_reference(hopper, name, M, N, K):
    from kernels import registry

    runner = registry.runner(name)
    seed = random.randrange(2**31)
    problem = runner.make(M, N, K, seed=seed, reference=True)
    for attempt in range(2):
        err = _launch_error(hopper, runner, problem)
        assert err < TOLERANCE[name], f"{name} M={M} {N}x{K} seed {seed} launch {attempt}: rel error {err:.3g}"
    assert int(hopper.count_nonzero(problem.arrays["counters"])) == 0  # the slots need no cleaning


@pytest.mark.parametrize("name,tile", [("wg_bf16", (1, 8, 128)), ("wg_bf16", (2, 3, 128)), ("wg_bf16", (1, 4, 256)),
                                       ("wg_bf16", (2, 4, 128, True)), ("wg_bf16", (2, 2, 256, True)),
                                       ("wg_bf16", (1, 6, 128, True)), ("wg_fp16", (2, 4, 256, True)),
                                       ("wg_w8a8", (2, 4, 256, True)), ("wg_fp8", (2, 4, 128, True)),
                                       ("wg_bf16", (2, 4, 128, True, 2)), ("wg_bf16", (2, 6, 128, True, 2)),
                                       ("wg_w8a8", (2, 5, 128, True, 2)), ("wg_fp8", (2, 4, 128, True, 2)),
                                       ("wg_w4a16", (2, 8, 256, True, 2)), ("wg_w4a16", (1, 3, 256, True, 2)),
                                       ("wg_w4a16", (2, 6, 256, True, 1)), ("wg_w4a16", (2, 4, 256, True, 1)),
                                       ("wg_w4a16", (4, 4, 256, True, 1)), ("wg_bf16", (4, 4, 128, True)),
                                       ("wg_bf16", (4, 6, 256, True)), ("wg_bf16", (4, 4, 128)),
                                       ("wg_w8a8", (4, 4, 128, True)), ("wg_fp8", (4, 4, 256, True))])
def test_other_tiles(hopper, name, tile):
    """The tiles benchmarks may force (1 warpgroup, the shallowest pipelines, the TMA kernel) are correct too, on
    single-tile, split-K and partial-batch cases."""
    from kernels import registry, wgmma
    from models.errors import InputError

    runner = wgmma.make_runner(registry.get(name), tile=wgmma.WgTile(*tile))
    for M, (N, K) in ((1, (4096, 4096)), (16, (4096, 4096)), (64, (4096, 11008)), (100, (12288, 4096)),
                      (256, (22016, 4096))):
        try:
            runner.config(M, K)
        except InputError:  # that tile does not fit this batch tile's shared memory
            continue
        seed = random.randrange(2**31)
        problem = runner.make(M, N, K, seed=seed, reference=True)
        err = _launch_error(hopper, runner, problem)
        assert err < TOLERANCE[name], f"{name} tile {tile} M={M} {N}x{K} seed {seed}: rel error {err:.3g}"
        assert int(hopper.count_nonzero(problem.arrays["counters"])) == 0


@pytest.mark.parametrize("name", KERNELS)
def test_refuses_bad_shapes(hopper, name):
    from kernels import registry
    from models.errors import InputError

    runner = registry.runner(name)
    for M, N, K in ((0, 4096, 4096), (300, 4096, 4096), (16, 4000, 4096), (16, 4096, 4000)):
        with pytest.raises(InputError):
            runner.make(M, N, K, seed=0, reference=False)
