"""The 16-bit tensor-core GEMVs (kernels/tcgemv/tc_gemv_f16.py: bf16_tc_gemv, fp16_tc_gemv) on the GPU (run on the
device: pytest -m gpu).

Float64 checks: fresh random inputs, outputs poisoned with NaN, rel = ||y - ref|| / ||ref|| against the float64
product of the rounded operands, at every M bin edge and odd M, on shapes with N not a multiple of the 16-channel tile
(the last tile's channels past N are the packing's zeros), K with fewer chunks than warps or a
remainder of the warps' chunk loop, the LLM layers and variants of every field. The products are exact and the sums
fp32; the output is rounded to bf16 (2^-9 relative) or fp16: tolerance 4e-3 for bf16, 2e-3 for fp16.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels import reference as ref
from kernels import registry
from kernels.gemv import gemv
from kernels.tcgemv import tc_gemv_f16

pytestmark = pytest.mark.gpu

TOL = {"bf16_tc_gemv": 4e-3, "fp16_tc_gemv": 2e-3}
NAMES = tuple(tc_gemv_f16.KINDS)
SMALL = ((37, 128), (101, 640), (1029, 4096 + 64), (203, 11008), (7, 64))
LLM = ((22016, 4096), (4096, 11008))
VARIANTS = ({"warps": 4}, {"u": 2}, {"u": 3, "tiles": 2}, {"warps": 16, "minb": 2}, {"tiles": 3},
            {"tiles": 4, "warps": 4}, {"minb": 2, "u": 2}, {"nt": 2})


def _check(name: str, M: int, N: int, K: int, seed: int, config: dict | None = None) -> float:
    runner = tc_gemv_f16.TcGemvF16Runner(registry.get(name), config=config)
    prob = runner.make(M, N, K, seed=seed, reference=True)
    gemv.poison_output(prob.out)
    runner.launch(prob)
    y = runner.output(prob)
    assert np.isfinite(y).all(), f"{name} M={M} {N}x{K}: unwritten or NaN outputs"
    assert np.abs(prob.ref).max() > 0
    return ref.rel_error(y, prob.ref)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("M", [1, 2, 3, 7, 8, 9, 15, 16])
def test_small_shapes(cp, name, M):
    for i, (N, K) in enumerate(SMALL):
        err = _check(name, M, N, K, seed=700 * M + i)
        assert err < TOL[name], f"{name} M={M} {N}x{K}: rel err {err:.2e}"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("M", [1, 5, 16])
def test_llm_shapes(cp, name, M):
    for i, (N, K) in enumerate(LLM):
        err = _check(name, M, N, K, seed=29 + 100 * M + i)
        assert err < TOL[name], f"{name} M={M} {N}x{K}: rel err {err:.2e}"


@pytest.mark.parametrize("config", VARIANTS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_variants(cp, config):
    for name in NAMES:
        for M in (1, 9, 16) if config.get("nt", 2) == 2 else (1, 8):
            for N, K in ((1029, 11008), (22016, 4096)):  # N = 1029: not a whole row tile, nor a whole set of 3 or 4
                err = _check(name, M, N, K, seed=5 + M, config=config)
                assert err < TOL[name], f"{name} {config} M={M} {N}x{K}: rel err {err:.2e}"


def test_the_packed_weights_are_the_scheme_bytes_reordered(cp):
    """The kernel reads the scheme's bytes (plus the zero channels of the last row tile), nothing converted."""
    runner = tc_gemv_f16.TcGemvF16Runner(registry.get("bf16_tc_gemv"))
    prob = runner.make(3, 101, 640, seed=1, reference=True)
    w = prob.arrays["w0"]
    assert w.dtype == cp.uint16 and w.size == 112 * 640
