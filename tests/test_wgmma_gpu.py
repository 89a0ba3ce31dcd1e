"""wgmma (sm_90a) GEMM kernels against the float64 reference, on an H100/H200 (skipped on other GPUs).

Same protocol as the mma.sync kernels: fresh random data per case (the seed in the failure message), outputs poisoned
with NaN before each of two launches on the same input set, the split-K tile counters left clean (the per-CTA slots
of the split tiles are overwritten before they are read, so they are not checked). Every
batch tile of WG_TILES, WG_BANDS' 4096-channel band and W4_TILES is reached (M = 16..256; w4a16 runs M > 128 as two
m-tiles), plus M below one tile (1, 5) and partial tiles (17, 100, 200); the 2048-channel band in the cluster cases.
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
                                       ("wg_w8a8", (4, 4, 128, True)), ("wg_fp8", (4, 4, 256, True)),
                                       ("wg_fp8", (1, 12, 128, True, 1, 64)), ("wg_bf16", (1, 8, 128, True, 1, 128)),
                                       ("wg_w8a8", (1, 5, 128, True, 1, 256))])
def test_other_tiles(hopper, name, tile):
    """The tiles benchmarks may force (1 warpgroup, the shallowest pipelines, the TMA kernel) are correct too, on
    single-tile, split-K and partial-batch cases."""
    from kernels import registry
    from kernels.wgmma import wgmma
    from models.errors import InputError

    runner = wgmma.make_runner(registry.get(name), tile=wgmma.WgTile(*tile))
    for M, (N, K) in ((1, (4096, 4096)), (16, (4096, 4096)), (64, (4096, 11008)), (100, (12288, 4096)),
                      (256, (22016, 4096))):
        try:
            runner.config(M, N, K)
        except InputError:  # that tile does not fit this batch tile's shared memory
            continue
        seed = random.randrange(2**31)
        problem = runner.make(M, N, K, seed=seed, reference=True)
        err = _launch_error(hopper, runner, problem)
        assert err < TOLERANCE[name], f"{name} tile {tile} M={M} {N}x{K} seed {seed}: rel error {err:.3g}"
        assert int(hopper.count_nonzero(problem.arrays["counters"])) == 0


# (M, N, K, pieces per tile on an H200: 8/16-bit kernels, wg_w4a16): every batch tile, wide (8192 channels) and narrow
# (64-channel tiles up to 4096 channels, 64-row m-tiles at 2048: WG_BANDS); 2, 3 and 4 pieces; K = 2816 cuts 11 or 22
# k-tiles into uneven pieces. wg_w4a16 takes a cluster only where it keeps 90 % of the SMs busy, and at BM = 16 and 32
# it runs 2 CTAs per SM.
CLUSTER_CASES = ((1, 1024, 2816, 4, 0), (17, 2048, 4096, 3, 0), (33, 4096, 2816, 2, 0), (64, 8192, 4096, 2, 2),
                 (100, 8192, 2816, 2, 2), (128, 2048, 2816, 2, 0), (200, 4096, 2816, 2, 2))


def _is_h200(cupy) -> bool:
    return "H200" in str(cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"])


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("M,N,K,pieces,w4_pieces", CLUSTER_CASES)
def test_split_tiles_summed_in_a_cluster(hopper, name, M, N, K, pieces, w4_pieces):
    """Where the rule cuts every tile into pieces that run as one cluster (finish_cluster: a reduce-scatter through
    distributed shared memory), its sums and those of the same shape through slots ("rule-slots") both match the
    float64 reference; on an H200 the piece counts are the ones the rule's measurements chose."""
    from kernels import registry
    from kernels.wgmma import wgmma

    seed = random.randrange(2**31)
    for grid in ("rule", "rule-slots"):
        runner = wgmma.make_runner(registry.get(name), grid=grid)
        problem = runner.make(M, N, K, seed=seed, reference=True)
        cluster = problem.tc_config.cluster
        want = (w4_pieces if name == "wg_w4a16" else pieces) if grid == "rule" else 0
        if _is_h200(hopper):
            assert cluster == max(want, 1), f"{name} M={M} {N}x{K} {grid}: cluster {cluster}, expected {want}"
            assert cluster == 1 or problem.tc_launch[0][0] == cluster * (N // problem.tc_config.bn)
        err = _launch_error(hopper, runner, problem)
        assert err < TOLERANCE[name], f"{name} M={M} {N}x{K} {grid} seed {seed}: rel error {err:.3g}"
        assert int(hopper.count_nonzero(problem.arrays["counters"])) == 0


@pytest.mark.parametrize("name", ("wg_fp8", "wg_bf16", "wg_w4a16"))
@pytest.mark.parametrize("M,N,K,pieces", [(17, 1024, 2816, 8), (64, 1024, 4096, 5), (128, 2048, 2816, 7),
                                          (256, 1024, 4096, 6), (5, 1024, 4096, 8)])
def test_forced_cluster_sizes(hopper, name, M, N, K, pieces, monkeypatch):
    """The cluster kernels hold for every size the device code accepts (2..8), not only those the rule takes: parts
    left empty (M = 17 and 5 in 8 pieces: fewer 8-row groups per thread than pieces), uneven pieces, two m-tiles."""
    from kernels import registry
    from kernels.wgmma import wgmma

    runner = wgmma.make_runner(registry.get(name))
    monkeypatch.setattr(runner, "_pieces", lambda fn, cfg, tiles_n, ktiles: pieces)
    seed = random.randrange(2**31)
    problem = runner.make(M, N, K, seed=seed, reference=True)
    assert problem.tc_config.cluster == pieces
    err = _launch_error(hopper, runner, problem)
    assert err < TOLERANCE[name], f"{name} M={M} {N}x{K} {pieces} pieces seed {seed}: rel error {err:.3g}"


def test_fp8_sums_promoted_over_a_long_k(hopper):
    """wg_fp8 adds QGMMA's sums into fp32 registers every 512 of K (OpFP8::promote_bytes): a whole K of 14336 in one
    CTA (64-channel whole tiles, 128-row m-tiles) stays near the short chains' error. H200: 4.0e-4 with the
    promotion, 2.9e-3 without (one chain of 14336)."""
    from kernels import registry
    from kernels.wgmma import wgmma

    runner = wgmma.make_runner(registry.get("wg_fp8"), tile=wgmma.parse_tile("1x8x128xt@128"))
    seed = random.randrange(2**31)
    problem = runner.make(200, 4096, 14336, seed=seed, reference=True)
    assert problem.tc_config.cluster == 1 and problem.tc_launch[0] == (64, 2)  # whole tiles: K in one chain
    err = _launch_error(hopper, runner, problem)
    assert err < 8e-4, f"wg_fp8 M=200 4096x14336 seed {seed}: rel error {err:.3g}"


@pytest.mark.parametrize("name", KERNELS)
def test_refuses_bad_shapes(hopper, name):
    from kernels import registry
    from models.errors import InputError

    runner = registry.runner(name)
    for M, N, K in ((0, 4096, 4096), (300, 4096, 4096), (16, 4000, 4096), (16, 4096, 4000)):
        with pytest.raises(InputError):
            runner.make(M, N, K, seed=0, reference=False)
