"""Tensor-core GEMM kernels against the float64 reference of the dequantized weights, on the GPU.

Every variant the SELECT table can choose (tensorcore.VARIANTS) is checked, forced through the runner's `variant`.
Fresh random data per case (a new seed every run), outputs poisoned with NaN before each launch, every kernel launched
twice on the same input set (the split-K tile counters must be left clean by the first launch; the per-CTA slots of
split tiles are overwritten before they are read).
"""

from __future__ import annotations

import random

import pytest

from kernels.tensorcore.tensorcore import VARIANTS

pytestmark = pytest.mark.gpu

KERNELS = ("tc_bf16", "tc_fp16", "tc_w4a16", "tc_w8a8", "tc_fp8")
# every BM of every variant (16..256), M below one tile (1, 5) and partial tiles (17, 100, 200); shapes alternate
BATCHES = ((1, (4096, 11008)), (5, (22016, 4096)), (16, (22016, 4096)), (17, (4096, 11008)),
           (32, (4096, 11008)), (64, (22016, 4096)),
           (100, (4096, 11008)), (128, (12288, 4096)), (200, (4096, 4096)), (256, (22016, 4096)))
# ||y - ref|| / ||ref||: the output's own rounding (bf16 2^-9, fp16 2^-11 relative) dominates
TOLERANCE = {"tc_bf16": 6e-3, "tc_fp16": 2e-3, "tc_w4a16": 2e-3, "tc_w8a8": 2e-3, "tc_fp8": 2e-3}

CASES = [(k, v, M, N, K) for k in KERNELS for v in VARIANTS for M, (N, K) in BATCHES]


def _poison(cp, out) -> None:
    if out.dtype == cp.uint16:  # bf16 bits
        out.fill(0x7FC0)
    else:
        out.fill(float("nan"))


@pytest.mark.parametrize("name,variant,M,N,K", CASES)
def test_kernel_matches_float64_reference(cupy, name, variant, M, N, K):
    from kernels import reference, registry
    from kernels.tensorcore import tensorcore

    runner = tensorcore.make_runner(registry.get(name), variant=variant)
    seed = random.randrange(2**31)  # fresh data every run; the seed is in the failure message
    problem = runner.make(M, N, K, seed=seed, reference=True)
    assert problem.tc_config.variant == variant
    for attempt in range(2):
        _poison(cupy, problem.out)
        runner.launch(problem)
        cupy.cuda.runtime.deviceSynchronize()
        y = runner.output(problem)
        err = reference.rel_error(y, problem.ref)
        assert err < TOLERANCE[name], (f"{name} {variant} M={M} {N}x{K} seed {seed} launch {attempt}: "
                                       f"rel error {err:.3g}")
    assert int(cupy.count_nonzero(problem.arrays["counters"])) == 0  # the split-K slots need no cleaning


@pytest.mark.parametrize("name", KERNELS)
def test_refuses_bad_shapes(cupy, name):
    from kernels import registry
    from models.errors import InputError

    runner = registry.runner(name)
    for M, N, K in ((0, 4096, 4096), (300, 4096, 4096), (16, 4000, 4096), (16, 4096, 4000)):
        with pytest.raises(InputError):
            runner.make(M, N, K, seed=0, reference=False)
