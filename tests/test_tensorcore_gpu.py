"""Tensor-core GEMM kernels against the float64 reference of the dequantized weights, on the GPU.

Fresh random data per case (a new seed every run), outputs poisoned with NaN before each launch, every kernel launched
twice on the same input set (the split-K workspace and tile counters must be left clean by the first launch).
"""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.gpu

KERNELS = ("tc_bf16", "tc_fp16", "tc_w4a16", "tc_w8a8", "tc_fp8")
BATCHES = (16, 17, 32, 64, 100, 128, 256)
BIG_SHAPES = ((22016, 4096), (4096, 11008))
OTHER_SHAPES = ((12288, 4096), (4096, 4096))
# ||y - ref|| / ||ref||: the output's own rounding (bf16 2^-9, fp16 2^-11 relative) dominates
TOLERANCE = {"tc_bf16": 6e-3, "tc_fp16": 2e-3, "tc_w4a16": 2e-3, "tc_w8a8": 2e-3, "tc_fp8": 2e-3}

CASES = [(k, M, N, K) for k in KERNELS for (N, K) in BIG_SHAPES for M in BATCHES]
CASES += [(k, M, N, K) for k in KERNELS for (N, K) in OTHER_SHAPES for M in (17, 128)]


@pytest.fixture(scope="module")
def cupy():
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cp.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device")
    return cp


def _poison(cp, out) -> None:
    if out.dtype == cp.uint16:  # bf16 bits
        out.fill(0x7FC0)
    else:
        out.fill(float("nan"))


@pytest.mark.parametrize("name,M,N,K", CASES)
def test_kernel_matches_float64_reference(cupy, name, M, N, K):
    from kernels import reference, registry

    runner = registry.runner(name)
    seed = random.randrange(2**31)  # fresh data every run; the seed is in the failure message
    problem = runner.make(M, N, K, seed=seed, reference=True)
    for attempt in range(2):
        _poison(cupy, problem.out)
        runner.launch(problem)
        cupy.cuda.runtime.deviceSynchronize()
        y = runner.output(problem)
        err = reference.rel_error(y, problem.ref)
        assert err < TOLERANCE[name], f"{name} M={M} {N}x{K} seed {seed} launch {attempt}: rel error {err:.3g}"
    assert int(cupy.count_nonzero(problem.arrays["counters"])) == 0
    assert float(cupy.abs(problem.arrays["ws"]).max()) == 0.0


@pytest.mark.parametrize("name", KERNELS)
def test_refuses_bad_shapes(cupy, name):
    from kernels import registry
    from models.errors import InputError

    runner = registry.runner(name)
    for M, N, K in ((8, 4096, 4096), (300, 4096, 4096), (16, 4000, 4096), (16, 4096, 4000)):
        with pytest.raises(InputError):
            runner.make(M, N, K, seed=0, reference=False)
