"""The W8A16 tensor-core GEMVs (kernels/tcgemv/tc_gemv_w8a16.py: w8a16_tc_gemv, w8a16_bf16_tc_gemv) on the GPU (run on
the device: pytest -m gpu).

Float64 checks: fresh random inputs, outputs poisoned with NaN, rel = ||y - ref|| / ||ref|| against the reference of
the dequantized weights (kernels.problems: int8 codes times their fp16 row scale) and the 16-bit activations, at every
M bin edge and odd M, on shapes with N not a multiple of the 16-channel tile and K with fewer chunks than warps or a
remainder of the warps' chunk loop, the table's columns (N = 4096, 8192, 12288, 22016 and 28672) and variants of every
field. The products of exact int8 and 16-bit values are summed in fp32; the output is rounded to fp16 (tolerance 2e-3)
or bf16 (2^-9 relative per element: 4e-3).
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels import reference as ref
from kernels import registry
from kernels.gemv import gemv
from kernels.tcgemv import tc_gemv_w8a16

pytestmark = pytest.mark.gpu

TOL = {"w8a16_tc_gemv": 2e-3, "w8a16_bf16_tc_gemv": 4e-3}
NAMES = tuple(tc_gemv_w8a16.KINDS)
SMALL = ((37, 128), (101, 640), (1029, 4096 + 64), (203, 11008))
LLM = ((22016, 4096), (4096, 11008), (12288, 1024), (8192, 1024), (28672, 1024))  # every column of the table
VARIANTS = ({"warps": 4}, {"u": 2}, {"u": 4, "tiles": 2}, {"warps": 16, "u": 2, "minb": 2}, {"tiles": 3},
            {"tiles": 4, "warps": 4, "u": 1}, {"minb": 4, "u": 1})


def _check(name: str, M: int, N: int, K: int, seed: int, config: dict | None = None) -> float:
    runner = tc_gemv_w8a16.TcGemvW8A16Runner(registry.get(name), config=config)
    prob = runner.make(M, N, K, seed=seed, reference=True)
    gemv.poison_output(prob.out)
    runner.launch(prob)
    y = runner.output(prob)
    assert np.isfinite(y).all(), f"{name} M={M} {N}x{K}: unwritten or NaN outputs"
    assert np.abs(prob.ref).max() > 0
    return ref.rel_error(y, prob.ref)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("M", [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64])
def test_small_shapes(cp, name, M):
    if M > tc_gemv_w8a16.M_MAX:
        pytest.skip(f"the table ends at M = {tc_gemv_w8a16.M_MAX}")
    for i, (N, K) in enumerate(SMALL):
        err = _check(name, M, N, K, seed=500 * M + i)
        assert err < TOL[name], f"{name} M={M} {N}x{K}: rel err {err:.2e}"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("M", [1, 5, 16, 32, 64])
def test_llm_shapes(cp, name, M):
    if M > tc_gemv_w8a16.M_MAX:
        pytest.skip(f"the table ends at M = {tc_gemv_w8a16.M_MAX}")
    for i, (N, K) in enumerate(LLM):
        err = _check(name, M, N, K, seed=17 + 100 * M + i)
        assert err < TOL[name], f"{name} M={M} {N}x{K}: rel err {err:.2e}"


@pytest.mark.parametrize("config", VARIANTS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_variants(cp, config):
    for name in NAMES:
        for M in (1, 9, 16):
            for N, K in ((1029, 11008), (22016, 4096)):  # N = 1029: not a whole row tile, nor a whole set of 3 or 4
                err = _check(name, M, N, K, seed=3 + M, config=config)
                assert err < TOL[name], f"{name} {config} M={M} {N}x{K}: rel err {err:.2e}"


def test_extreme_codes_convert_exactly(cp):
    """Codes -127 and 127 (and 0) everywhere in a row tile: the magic-number conversion at both ends of the byte."""
    import cupy

    from kernels.quant import pack_q8, quant

    N, K, M = 32, 256, 3
    codes = np.zeros((N, K), dtype=np.int8)
    codes[0::3], codes[1::3] = 127, -127
    scales = np.full(N, 0.5, dtype=np.float16)
    x = np.random.default_rng(0).standard_normal((M, K)).astype(np.float16)
    for name in NAMES:
        bf16 = tc_gemv_w8a16.KINDS[name].bf16
        xd = cupy.asarray(quant.to_bf16_bits(x.astype(np.float32)) if bf16 else x)
        xs = quant.from_bf16_bits(quant.to_bf16_bits(x.astype(np.float32))) if bf16 else x
        out = cupy.empty((M, N), dtype=cupy.uint16 if bf16 else cupy.float16)
        cfg = tc_gemv_w8a16.choose_config(M, N, name=name)
        ws = (pack_q8.pack_w8a16_tc(cupy.asarray(codes), cupy), cupy.asarray(scales))
        tc_gemv_w8a16.make_launch(name, cfg, M, N, K, xd, ws, out)()
        y = quant.from_bf16_bits(out, cupy) if bf16 else out
        expect = xs.astype(np.float64) @ (codes.astype(np.float64) * 0.5).T
        np.testing.assert_allclose(cupy.asnumpy(y.astype(cupy.float64)), expect, rtol=TOL[name], atol=1e-2)


def test_refuses_k_not_a_whole_chunk(cp):
    with pytest.raises(Exception, match="multiple of 64"):
        tc_gemv_w8a16.TcGemvW8A16Runner(registry.get(NAMES[0])).check(1, 64, 96)
