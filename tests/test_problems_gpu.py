"""kernels.problems on the GPU: the device quantizers equal kernels/quant/quant.py's bit for bit, the references are
those of kernels/reference.py, and each kernel family's stored bytes are the bytes its device arrays hold."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import problems, registry
from kernels import reference as ref
from kernels.quant import quant
from models.schemes import GROUP_SIZES

pytestmark = pytest.mark.gpu


def _awkward(cp, rows, K, seed):
    """Normal values with exact ties, zeros, a zero group and large outliers (what rounding rules disagree on)."""
    w = problems.random_normal((rows, K), seed, 0.3)
    host = cp.asnumpy(w)
    host[0, :64] = 0.0
    host[1, 5] = 40.0
    host[2, ::7] = np.float32(0.5)
    host[-1, 3] = -1e-6
    return cp.asarray(host), host


@pytest.mark.parametrize("G", GROUP_SIZES)
def test_w4_matches_host_quantizer(cp, G):
    w, host = _awkward(cp, 96, 1024, 1)
    dev, ref_q = problems.quantize_w4(w, G), quant.quantize_w4(host, G)
    for a in ("codes", "scales", "zeros"):
        np.testing.assert_array_equal(cp.asnumpy(getattr(dev, a)), getattr(ref_q, a))
    np.testing.assert_array_equal(cp.asnumpy(problems.dequantize(dev)), quant.dequantize_w4(ref_q))


def test_int8_matches_host_quantizers(cp):
    w, host = _awkward(cp, 77, 1000, 2)
    dev, ref_q = problems.quantize_w8(w), quant.quantize_w8(host)
    np.testing.assert_array_equal(cp.asnumpy(dev.codes), ref_q.codes)
    np.testing.assert_array_equal(cp.asnumpy(dev.scales), ref_q.scales)
    np.testing.assert_array_equal(cp.asnumpy(problems.dequantize(dev)), quant.dequantize_w8(ref_q))
    codes, scales = problems.quantize_act_int8(w)
    hc, hs = quant.quantize_act_int8(host)
    np.testing.assert_array_equal(cp.asnumpy(codes), hc)
    np.testing.assert_array_equal(cp.asnumpy(scales), hs)


@pytest.mark.parametrize("per", ["tensor", "channel"])
def test_fp8_matches_host_quantizer(cp, per):
    w, host = _awkward(cp, 64, 512, 3)
    host[4, :256] = np.linspace(-500, 500, 256, dtype=np.float32)  # saturation, subnormals, every binade
    w = cp.asarray(host)
    dev, ref_q = problems.quantize_fp8(w, per), quant.quantize_fp8(host, per)
    np.testing.assert_array_equal(cp.asnumpy(dev.codes), ref_q.codes)
    np.testing.assert_array_equal(cp.asnumpy(dev.scales), ref_q.scales)
    np.testing.assert_array_equal(cp.asnumpy(problems.dequantize(dev)), quant.dequantize_fp8(ref_q))


@pytest.mark.parametrize("block", [(128, 128), (1, 128), (64, 96)])
def test_fp8_blocks_match_host_quantizer(cp, block):
    host = _awkward(cp, 200, 320, 5)[1]  # partial last blocks in both directions for every block size
    host[7, :256] = np.linspace(-500, 500, 256, dtype=np.float32)
    host[128:, 256:] = 0.0  # an all-zero block: scale 1
    dev, ref_q = problems.quantize_fp8(cp.asarray(host), "block", block), quant.quantize_fp8(host, "block", block=block)
    np.testing.assert_array_equal(cp.asnumpy(dev.codes), ref_q.codes)
    np.testing.assert_array_equal(cp.asnumpy(dev.scales), ref_q.scales)
    np.testing.assert_array_equal(cp.asnumpy(problems.dequantize(dev)), quant.dequantize_fp8(ref_q))
    assert problems.copy_weights(dev).block == block


def test_conversions_match_host(cp):
    x = problems.random_normal((33, 130), 4, 3.0)
    host = cp.asnumpy(x)
    np.testing.assert_array_equal(cp.asnumpy(problems.convert(x, "bf16")), quant.to_bf16_bits(host))
    np.testing.assert_array_equal(cp.asnumpy(problems.convert(x, "f16")), host.astype(np.float16))
    assert float(np.abs(host).min()) > 0 and abs(float(host.std()) - 3.0) < 0.1


@pytest.mark.parametrize("weight,act", [("w4", "f16"), ("w8", "i8"), ("e4m3", "e4m3"), ("bf16", "bf16")])
def test_reference_is_the_host_reference(cp, weight, act):
    params = problems.Params("x", weight, act, group_size=64 if weight == "w4" else 0)
    inp = problems.make_inputs(params, 5, 256, 512, seed=7, reference=True)
    x = tuple(cp.asnumpy(a) for a in inp.x)
    xk = quant.dequantize_act_int8(*x) if act == "i8" else (
        quant.dequantize_fp8(quant.FP8(x[0], x[1], "channel")) if act == "e4m3" else
        quant.from_bf16_bits(x[0]).astype(np.float64) if act == "bf16" else x[0].astype(np.float64))
    w = inp.w
    wh = (quant.W4(cp.asnumpy(w.codes), cp.asnumpy(w.scales), cp.asnumpy(w.zeros), w.group_size) if weight == "w4"
          else quant.W8(cp.asnumpy(w.codes), cp.asnumpy(w.scales)) if weight == "w8"
          else quant.FP8(cp.asnumpy(w.codes), cp.asnumpy(w.scales), w.granularity) if weight == "e4m3"
          else cp.asnumpy(w))
    scheme = "bf16" if weight == "bf16" else weight
    assert isinstance(inp.ref, cp.ndarray)  # the reference stays on the device (the check reads it there)
    np.testing.assert_allclose(cp.asnumpy(inp.ref), ref.reference_dequant(xk, scheme, wh), rtol=1e-12, atol=1e-12)
    if weight != "bf16":
        assert 0 < inp.quant_error_rel < 0.2


# ---------------------------------------------------------------- stored bytes = the bytes the kernel's arrays hold
def _expected_bytes(name: str, M: int, N: int, K: int, G: int) -> int:
    """What each kernel reads and writes, written out per family from its layout (not from the arrays)."""
    out16 = M * N * 2
    table = {
        "gemv_fp32_ref": 4 * N * K + 4 * M * K + 4 * M * N,
        "gemv_w4_ref": N * K // 2 + 8 * N * K // G + 4 * M * K + 4 * M * N,  # fp32 scale and zero per group
        "fp32_gemv": 4 * N * K + 4 * M * K + 4 * M * N,
        "fp16_gemv": 2 * N * K + 2 * M * K + out16, "bf16_gemv": 2 * N * K + 2 * M * K + out16,
        "w8a16_gemv": N * K + 2 * N + 2 * M * K + out16,
        "w4a16_gemv": N * K // 2 + 4 * N * K // G + 2 * M * K + out16,  # fp16 scale + fp16 (1024 + zero) per group
        "w8a8_gemv": N * K + 2 * N + M * K + 4 * M + out16,
        "fp8_gemv": N * K + 4 * N + 2 * M * K + out16,
        "tc_bf16": 2 * N * K + 2 * M * K + out16, "tc_fp16": 2 * N * K + 2 * M * K + out16,
        "tc_w4a16": N * K // 2 + 4 * N * K // G + 2 * M * K + out16,  # fp16 scale + fp16 zero per group
        "tc_w8a8": N * K + 4 * N + M * K + 4 * M + out16, "tc_fp8": N * K + 4 * N + M * K + 4 * M + out16,
    }
    table |= {f"wg_{k[3:]}": v for k, v in table.items() if k.startswith("tc_")}
    return table[name]


_FAMILIES = ("kernels.gemv.gemv", "kernels.tensorcore.tensorcore", "kernels.wgmma.wgmma")


@pytest.mark.parametrize("name", [s.name for s in registry.specs() if s.runner.split(":")[0] in _FAMILIES])
def test_stored_bytes_are_the_arrays(cp, name):
    spec = registry.get(name)
    if not spec.supports(16, int(cp.cuda.Device().compute_capability)):
        pytest.skip(f"{name} does not run on this GPU")
    runner = registry.runner(name)
    M, N, K = 16, 512, 1024
    prob = runner.make(M, N, K, seed=0, reference=False)
    G = getattr(runner, "group_size", 0) or 128
    assert prob.bytes == _expected_bytes(name, M, N, K, G)
    assert prob.nbytes + int(prob.out.nbytes) == prob.bytes


@pytest.mark.parametrize("G", [32, 64, 256])
def test_gemv_w4_group_sizes_run_and_tc_refuses(cp, G):
    from models.errors import InputError

    for name in ("w4a16_gemv", "gemv_w4_ref"):
        runner = registry.runner(name, group_size=G)
        prob = runner.make(4, 256, 1024, seed=1, reference=True)
        runner.launch(prob)
        cp.cuda.Device().synchronize()
        err = ref.rel_error(runner.output(prob), prob.ref)
        assert err < 2e-3, (name, G, err)
        assert prob.bytes == _expected_bytes(name, 4, 256, 1024, G)
    with pytest.raises(InputError, match="group size"):
        registry.runner("tc_w4a16", group_size=G).check(16, 256, 1024)
