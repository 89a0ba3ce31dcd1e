"""wg_fp8_block (FP8 with 128x128 weight-block and 1x128 activation-group scales, sm_90a) against the float64 product
of its dequantized operands, on an H100/H200 (skipped elsewhere).

Every batch tile is reached (M = 16, 32, 64, 128; 129..256 as two 128-row m-tiles) plus M below a tile (1, 5), odd
and partial tiles (17, 33, 100, 129, 255); outputs poisoned with NaN before each of two launches on one input set, the
split-K counters left clean. Scale patterns that differ per block (weights with a different magnitude per 128x128
block) make a kernel that applied the wrong block's scale fail.
"""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.gpu

CASES = ((1, (4096, 11008)), (5, (22016, 4096)), (16, (22016, 4096)), (17, (4096, 11008)), (32, (4096, 4096)),
         (33, (12288, 4096)), (64, (22016, 4096)), (100, (4096, 11008)), (128, (12288, 4096)),
         (129, (4096, 4096)), (255, (4096, 11008)), (256, (22016, 4096)))
TOLERANCE = 2e-3  # fp16 output rounding (2^-11) and fp32 accumulation


@pytest.fixture(scope="module")
def hopper(cupy):
    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma kernels need compute capability 9.0 (sm_90a)")
    return cupy


def _error(cp, runner, problem) -> float:
    from kernels import reference

    problem.out.fill(float("nan"))
    runner.launch(problem)
    cp.cuda.runtime.deviceSynchronize()
    return reference.rel_error(runner.output(problem), problem.ref)


@pytest.mark.parametrize("M,N,K", [(M, N, K) for M, (N, K) in CASES])
def test_block_scaled_matches_float64_reference(hopper, M, N, K):
    from kernels import registry

    runner = registry.runner("wg_fp8_block")
    seed = random.randrange(2**31)
    problem = runner.make(M, N, K, seed=seed, reference=True)
    for attempt in range(2):
        err = _error(hopper, runner, problem)
        assert err < TOLERANCE, f"wg_fp8_block M={M} {N}x{K} seed {seed} launch {attempt}: rel error {err:.3g}"
    assert int(hopper.count_nonzero(problem.arrays["counters"])) == 0


@pytest.mark.parametrize("M", [3, 64, 200])
def test_block_scales_are_applied_per_block(hopper, M):
    """Weights whose magnitude differs by up to 2^16 between 128x128 blocks and activations by up to 2^8 between 1x128
    groups (outputs stay inside fp16): a block's scale applied to another block's partial sum shows as a large
    error."""
    from kernels import registry
    from kernels.wgmma import wg_fp8_block

    cp = hopper
    N, K = 4096, 4096
    runner = registry.runner("wg_fp8_block")
    problem = runner.make(M, N, K, seed=1, reference=False)
    seed = random.randrange(2**31)
    rs = cp.random.RandomState(seed)
    wmag = cp.exp2(rs.randint(-16, 1, size=(N // 128, 1, K // 128, 1))).astype(cp.float32) * 0.02
    xmag = cp.exp2(rs.randint(-8, 1, size=(M, K // 128, 1))).astype(cp.float32)
    w = (rs.standard_normal((N // 128, 128, K // 128, 128), dtype=cp.float32) * wmag).reshape(N, K)
    x = (rs.standard_normal((M, K // 128, 128), dtype=cp.float32) * xmag).reshape(M, K)
    xc, wc, sx, sw, ref = wg_fp8_block.block_scaled_operands(x, w, cp)
    a = problem.arrays
    a["x"][...], a["w"][...], a["sb"][...] = xc, wc, sw
    a["sa"][:, :M] = sx.T
    problem.ref = cp.asnumpy(ref)
    err = _error(cp, runner, problem)
    assert err < TOLERANCE, f"M={M} seed {seed}: rel error {err:.3g}"
    a["sb"][...] = cp.roll(sw, 1, axis=1)  # each K block given its neighbour's weight scale: must fail
    assert _error(cp, runner, problem) > 0.1


def test_refuses_bad_shapes(hopper):
    from kernels import registry
    from models.errors import InputError

    runner = registry.runner("wg_fp8_block")
    for M, N, K in ((0, 4096, 4096), (257, 4096, 4096), (16, 4000, 4096), (16, 4096, 4000), (16, 4096, 4224)):
        with pytest.raises(InputError):
            runner.make(M, N, K, seed=0, reference=False)
