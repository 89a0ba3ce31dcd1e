"""The W8A16 wgmma GEMMs (kernels/wgmma/wg_w8a16.py: wg_w8a16, wg_w8a16_bf16) against the float64 reference, on an
H100/H200 (pytest -m gpu; skipped on other GPUs).

Fresh random inputs (the seed in the failure message), outputs poisoned with NaN before each of two launches on the same
input set, rel = ||y - ref|| / ||ref|| against the product of the dequantized weights (int8 codes times their fp16 row
scale, kernels.problems) and the 16-bit activations; the split tiles' counters left at zero. Every batch tile of
W8_TILES and of the narrow layers' W8_BANDS, M below one tile and partial tiles (1, 17, 33, 100, 129, 255), the
smallest N and K the kernel accepts (one 128-channel tile, one k-tile) and K with an odd number of k-tiles, the LLM
layers, every other tile form
(forced), and the grids (clusters, slots, stream-K). Exact products summed in fp32; output rounded to fp16 (2e-3) or
bf16 (4e-3).
"""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.gpu

NAMES = ("wg_w8a16", "wg_w8a16_bf16")
TOL = {"wg_w8a16": 2e-3, "wg_w8a16_bf16": 4e-3}
EDGES = ((128, 64), (128, 128), (384, 192), (1152, 4096 + 64), (2944, 1472))
LLM = ((22016, 4096), (4096, 11008), (4096, 4096), (12288, 4096))
NARROW = ((64, 4096), (896, 4864), (1536, 8960), (2048, 2048))  # W8_BANDS: 64-channel tiles, 64-row m-tiles
BATCHES = (1, 16, 17, 32, 33, 64, 100, 128, 129, 255, 256)
# forced tile forms and the cases they run at (a tile whose shared memory cannot hold the batch tile is skipped there;
# tests/test_wg_w8a16.py checks on the CPU that each runs at two cases at least)
OTHER_TILES = ("1x8x256xt2", "1x4x128xt2", "2x6x256xt1", "2x8x128xt1", "1x5x256xt1@128", "2x5x128xt1@256",
               "1x4x256xt2@128")
TILE_CASES = ((5, (4096, 4096)), (77, (22016, 4096)), (256, (4096, 11008)))


@pytest.fixture(scope="module")
def hopper(cupy):
    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma kernels need compute capability 9.0 (sm_90a)")
    return cupy


def _error(cp, runner, M: int, N: int, K: int) -> float:
    from kernels import reference

    seed = random.randrange(2**31)
    problem = runner.make(M, N, K, seed=seed, reference=True)
    worst = 0.0
    for _ in range(2):
        problem.out.fill(0x7FC0 if problem.out.dtype == cp.uint16 else float("nan"))
        runner.launch(problem)
        cp.cuda.runtime.deviceSynchronize()
        err = reference.rel_error(runner.output(problem), problem.ref)
        assert err == err, f"{runner.spec.name} M={M} {N}x{K} seed {seed}: NaN (unwritten outputs)"
        worst = max(worst, err)
    assert int(cp.count_nonzero(problem.arrays["counters"])) == 0, "split-tile counters left dirty"
    assert worst < TOL[runner.spec.name], f"{runner.spec.name} M={M} {N}x{K} seed {seed}: rel error {worst:.3g}"
    return worst


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("M", BATCHES)
def test_edges(hopper, name, M):
    from kernels import registry

    runner = registry.runner(name)
    for N, K in EDGES:
        if K % (runner.config(M, N, K).kt // 2) == 0:
            _error(hopper, runner, M, N, K)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("M", (16, 32, 64, 128, 256))
def test_llm_layers(hopper, name, M):
    from kernels import registry

    runner = registry.runner(name)
    for N, K in LLM:
        _error(hopper, runner, M, N, K)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("M", (1, 16, 33, 64, 65, 129, 256))
def test_narrow_layers(hopper, name, M):
    from kernels import registry

    runner = registry.runner(name)
    for N, K in NARROW:
        assert runner.config(M, N, K).bn == 64
        _error(hopper, runner, M, N, K)


@pytest.mark.parametrize("tile", OTHER_TILES)
def test_other_tiles(hopper, tile):
    from kernels import registry
    from kernels.wgmma import wg_w8a16, wgmma
    from models.errors import InputError

    ran = 0
    for name in NAMES:
        runner = wg_w8a16.make_runner(registry.get(name), tile=wgmma.parse_tile(tile))
        for M, (N, K) in TILE_CASES:
            try:
                runner.check(M, N, K)  # a forced tile may not fit the batch tile M takes (shared memory)
            except InputError:
                continue
            _error(hopper, runner, M, N, K)
            ran += 1
    assert ran >= 2, f"tile {tile} ran at fewer than two cases"


@pytest.mark.parametrize("grid", ("rule", "rule-slots", "stream-k"))
def test_grids(hopper, grid):
    from kernels import registry
    from kernels.wgmma import wg_w8a16

    runner = wg_w8a16.make_runner(registry.get("wg_w8a16"), grid=grid)
    for M, N, K in ((16, 4096, 4096), (64, 2048, 8192), (200, 4096, 14336)):
        _error(hopper, runner, M, N, K)
