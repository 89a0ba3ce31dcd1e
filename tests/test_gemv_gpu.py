"""Every GEMV-class kernel against its float64 reference on the GPU (run on the device: pytest -m gpu).

Fresh random inputs for every case (never zeros), outputs poisoned with NaN before the launch (an unwritten element
fails the check), M in {1, 2, 3, 4, 8, 16}, shapes with N not a multiple of the rows per tile, K not a multiple of a
block's pass, and the LLM layers. Tolerances (rel = ||y - ref|| / ||ref||, ref from the *dequantized* weights):
  fp32 1e-5 (fp32 accumulation); fp16/bf16/w8a16/fp8/w8a8 outputs are rounded to 16 bits (fp16 ~2.4e-4, bf16 ~2e-3
  relative per element), so 1e-3 for fp16-output kernels and 5e-3 for bf16; w4a16 sums 16 half2 products per chunk
  in fp16 before the fp32 accumulation: 2e-3.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels import reference as ref
from kernels.gemv import gemv
from kernels.quant import quant

pytestmark = pytest.mark.gpu

TOL = {"gemv_fp32_ref": 1e-5, "fp32_gemv": 1e-5, "gemv_w4_ref": 1e-5, "fp16_gemv": 1e-3, "bf16_gemv": 5e-3,
       "w8a16_gemv": 1e-3, "w4a16_gemv": 2e-3, "w8a8_gemv": 1e-3, "fp8_gemv": 1e-3}
SMALL = ((37, 256), (101, 640), (1029, 4096 + 128))
LLM = ((22016, 4096), (4096, 11008))


def _check(name: str, M: int, N: int, K: int, seed: int, **cfg) -> float:
    spec = next(s for s in gemv.SPECS if s.name == name)
    runner = gemv.GemvRunner(spec, config=cfg)
    prob = runner.make(M, N, K, seed=seed, reference=True)
    gemv.poison_output(prob.out)
    runner.launch(prob)
    y = runner.output(prob)
    assert np.isfinite(y).all(), f"{name}: unwritten or NaN outputs"
    assert np.abs(prob.ref).max() > 0
    return ref.rel_error(y, prob.ref)


@pytest.mark.parametrize("name", list(gemv.DEFS))
@pytest.mark.parametrize("M", [1, 2, 3, 4, 8, 16])
def test_small_shapes(cp, name, M):
    for i, (N, K) in enumerate(SMALL):
        err = _check(name, M, N, K, seed=1000 * M + i)
        assert err < TOL[name], f"{name} M={M} {N}x{K}: rel err {err:.2e} > {TOL[name]:.0e}"


@pytest.mark.parametrize("name", list(gemv.DEFS))
@pytest.mark.parametrize("M", [1, 16])
def test_llm_shapes(cp, name, M):
    for i, (N, K) in enumerate(LLM):
        err = _check(name, M, N, K, seed=7 + 100 * M + i)
        assert err < TOL[name], f"{name} M={M} {N}x{K}: rel err {err:.2e}"


@pytest.mark.parametrize("name", [n for n, d in gemv.DEFS.items() if d.elems])
@pytest.mark.parametrize("cfg", [dict(xreg=False, u=2, rw=2, warps=4), dict(xreg=True, u=1, rw=4),
                                 dict(xreg=False, u=4, rw=1, warps=8)])
def test_config_variants(cp, name, cfg):
    for M in (1, 5):
        err = _check(name, M, 203, 2048 + 512, seed=M, **cfg)
        assert err < TOL[name], f"{name} {cfg} M={M}: rel err {err:.2e}"


def test_launch_quantized_float_weights(cp):
    """The launcher on float weights: kernel error vs the dequantized reference, quantization error separately."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 1024)).astype(np.float32)
    w = rng.standard_normal((300, 1024)) * 0.05
    cases = {"w4a16_gemv": quant.quantize_w4(w, 128), "gemv_w4_ref": quant.quantize_w4(w, 128),
             "w8a16_gemv": quant.quantize_w8(w), "fp8_gemv": quant.quantize_fp8(w, per="tensor"),
             "w8a8_gemv": quant.quantize_w8(w)}
    xf16 = x.astype(np.float16).astype(np.float64)
    for name, q in cases.items():
        y = gemv.launch(name, x, q)
        if name == "w8a8_gemv":
            codes, scales = quant.quantize_act_int8(x)
            xk = quant.dequantize_act_int8(codes, scales)
        else:
            xk = x.astype(np.float64) if name == "gemv_w4_ref" else xf16
        kernel_err = ref.rel_error(y, ref.reference_dequant(xk, "", q))
        quant_err = ref.rel_error(y, ref.reference_float(x, w))
        assert kernel_err < TOL[name], f"{name}: kernel error {kernel_err:.2e}"
        assert kernel_err < quant_err < 0.2, f"{name}: quantization error {quant_err:.2e}"
