"""The 8-bit tensor-core GEMVs (kernels/tcgemv/tc_gemv_q8.py: fp8_tc_gemv, w8a8_tc_gemv) on the GPU (run on the device:
pytest -m gpu).

Float64 checks: fresh random inputs, outputs poisoned with NaN, rel = ||y - ref|| / ||ref|| against the reference of
the dequantized activations and weights, at every M bin edge and odd M, on shapes with N not a multiple of the
16-channel tile and K with fewer chunks than warps or a remainder of the warps' chunk loop, both columns of the table
(N = 4096 and 22016) and variants of every field. The sums are exact products accumulated in fp32 (e4m3) or int32
(int8); the output is rounded to fp16: tolerance 2e-3.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels import reference as ref
from kernels import registry
from kernels.gemv import gemv
from kernels.tcgemv import tc_gemv_q8

pytestmark = pytest.mark.gpu

TOL = 2e-3
NAMES = tuple(tc_gemv_q8.KINDS)
SMALL = ((37, 128), (101, 640), (1029, 4096 + 64), (203, 11008))
LLM = ((22016, 4096), (4096, 11008))
VARIANTS = ({"warps": 4}, {"u": 1}, {"u": 4, "tiles": 2}, {"warps": 16, "u": 2, "minb": 2}, {"tiles": 3},
            {"tiles": 4, "warps": 4, "u": 1}, {"minb": 4, "u": 1})
E4M3_MMA = ({"f16": False}, {"f16": False, "tiles": 3, "u": 1}, {"f16": False, "warps": 16, "minb": 2})


def _check(name: str, M: int, N: int, K: int, seed: int, config: dict | None = None) -> float:
    runner = tc_gemv_q8.TcGemvQ8Runner(registry.get(name), config=config)
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
        err = _check(name, M, N, K, seed=500 * M + i)
        assert err < TOL, f"{name} M={M} {N}x{K}: rel err {err:.2e}"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("M", [1, 5, 16])
def test_llm_shapes(cp, name, M):
    for i, (N, K) in enumerate(LLM):
        err = _check(name, M, N, K, seed=17 + 100 * M + i)
        assert err < TOL, f"{name} M={M} {N}x{K}: rel err {err:.2e}"


@pytest.mark.parametrize("config", VARIANTS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_variants(cp, config):
    for name in NAMES:
        for M in (1, 9, 16):
            for N, K in ((1029, 11008), (22016, 4096)):  # N = 1029: not a whole row tile, nor a whole set of 3 or 4
                err = _check(name, M, N, K, seed=3 + M, config=config)
                assert err < TOL, f"{name} {config} M={M} {N}x{K}: rel err {err:.2e}"


@pytest.mark.parametrize("config", E4M3_MMA, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_fp8_on_the_e4m3_mma(cp, config):
    """fp8 without the conversion to f16 (the e4m3 mma.sync; the benchmark's alternative): the same sums."""
    for M in (1, 3, 9, 16):
        for N, K in ((1029, 11008), (203, 640), (22016, 4096)):
            err = _check("fp8_tc_gemv", M, N, K, seed=11 + M, config=config)
            assert err < TOL, f"{config} M={M} {N}x{K}: rel err {err:.2e}"


def test_refuses_k_not_a_whole_chunk(cp):
    with pytest.raises(Exception, match="multiple of 64"):
        tc_gemv_q8.TcGemvQ8Runner(registry.get(NAMES[0])).check(1, 64, 96)
