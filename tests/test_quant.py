"""CPU tests of the quantizers, packers, references and the GEMV shape checks (no GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import reference as ref
from kernels.gemv import gemv
from kernels.quant import pack_w4, quant
from models.errors import InputError


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def test_w4_round_trip_error_bounded(rng):
    w = rng.standard_normal((16, 512))
    q = quant.quantize_w4(w, 128)
    assert q.codes.dtype == np.uint8 and q.codes.max() <= 15 and q.zeros.max() <= 15
    assert q.scales.shape == (16, 4) and q.scales.dtype == np.float16
    err = np.abs(quant.dequantize_w4(q) - w)
    step = np.repeat(q.scales.astype(np.float64), 128, axis=1)
    assert (err <= 0.5 * step + 1e-12).all()  # at most half a step per weight


def test_w4_exact_on_grid(rng):
    q0 = quant.random_w4(8, 256, 128, seed=3)
    w = quant.dequantize_w4(q0)
    q1 = quant.quantize_w4(w, 128)
    np.testing.assert_allclose(quant.dequantize_w4(q1), w, atol=1e-2 * np.abs(w).max())


def test_random_sets_are_not_zero():
    q = quant.random_w4(64, 256, 128, seed=0)
    assert q.codes.any() and (q.scales > 0).all() and q.zeros.any()
    assert quant.random_w8(32, 64, seed=0).codes.any()
    assert quant.random_fp8(32, 64, seed=0).codes.any()


def test_pack_reference_low_nibble_first():
    codes = np.arange(16, dtype=np.uint8).reshape(1, 16) % 16
    words = quant.pack_w4_reference(codes)
    assert words.dtype == np.uint32 and words.shape == (1, 2)
    assert int(words[0, 0]) == 0x76543210 and int(words[0, 1]) == 0xFEDCBA98
    np.testing.assert_array_equal(quant.unpack_w4_reference(words), codes)


def test_fast_w4_layout_pairs_in_order(rng):
    codes = rng.integers(0, 16, size=(3, 64)).astype(np.uint8)
    words = pack_w4.pack_w4_fast(codes)
    np.testing.assert_array_equal(pack_w4.unpack_w4_fast(words), codes)
    for j in range(words.shape[1]):
        w = int(words[0, j])
        for i in range(4):  # what the kernel's (w >> 4i) & 0x000F000F extracts
            v = (w >> (4 * i)) & 0x000F000F
            assert (v & 0xF, v >> 16) == (codes[0, 8 * j + 2 * i], codes[0, 8 * j + 2 * i + 1])


def test_scale_zero_word():
    s = np.array([[0.5, 0.125]], dtype=np.float16)
    z = np.array([[3, 15]], dtype=np.uint8)
    sz = pack_w4.pack_scale_zero(s, z)
    lo = (sz & 0xFFFF).astype(np.uint16).view(np.float16)
    hi = (sz >> 16).astype(np.uint16).view(np.float16)
    np.testing.assert_array_equal(lo, s)
    np.testing.assert_array_equal(hi.astype(np.float32), [[1027.0, 1039.0]])


def test_w8_and_act_int8(rng):
    w = rng.standard_normal((8, 64))
    q = quant.quantize_w8(w)
    assert q.codes.dtype == np.int8 and np.abs(q.codes.astype(int)).max() == 127
    assert np.abs(quant.dequantize_w8(q) - w).max() <= 0.5 * q.scales.astype(float).max() + 1e-12
    x = rng.standard_normal((3, 64))
    c, s = quant.quantize_act_int8(x)
    assert c.dtype == np.int8 and s.dtype == np.float32 and s.shape == (3,)
    assert np.abs(quant.dequantize_act_int8(c, s) - x).max() <= 0.5 * s.max() * 1.0001


def test_e4m3_table_matches_ml_dtypes(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    table = quant.e4m3_table()
    ours = np.nan_to_num(table, nan=1e9)
    theirs = np.nan_to_num(np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64), nan=1e9)
    np.testing.assert_array_equal(ours, theirs)
    v = np.concatenate([rng.standard_normal(20000) * 50, table[np.isfinite(table)], [447.9, 0.0009, -0.001953125]])
    np.testing.assert_array_equal(quant.encode_e4m3(v), v.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))


def test_fp8_quantize_per_tensor_and_channel(rng):
    w = rng.standard_normal((6, 40))
    for per, shape in (("tensor", (1,)), ("channel", (6,))):
        q = quant.quantize_fp8(w, per=per)
        assert q.scales.shape == shape and q.granularity == per
        assert np.abs(quant.dequantize_fp8(q)).max() <= np.abs(w).max() * 1.0001
        assert ref.rel_error(quant.dequantize_fp8(q), w) < 0.05
    with pytest.raises(InputError):
        quant.quantize_fp8(w, per="row")


def test_bf16_round_to_nearest_even():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -2.5, np.inf, np.nan], dtype=np.float32)
    bits = quant.to_bf16_bits(x)
    np.testing.assert_array_equal(bits[:5], [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F80])  # ties to even
    assert np.isnan(quant.from_bf16_bits(bits)[5])
    ml_dtypes = pytest.importorskip("ml_dtypes")
    y = np.random.default_rng(0).standard_normal(5000).astype(np.float32)
    np.testing.assert_array_equal(quant.to_bf16_bits(y), y.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_reference_hand_case():
    x = np.array([[1.0, 2.0], [0.0, -1.0]])
    w = np.array([[3.0, 4.0], [5.0, 6.0], [-1.0, 1.0]])
    np.testing.assert_array_equal(ref.reference_float(x, w), [[11.0, 17.0, 1.0], [-4.0, -6.0, -1.0]])
    q = quant.W4(np.array([[5, 7, 0, 15] * 2], dtype=np.uint8), np.array([[0.5]], dtype=np.float16),
                 np.array([[7]], dtype=np.uint8), 8)
    np.testing.assert_array_equal(quant.dequantize_w4(q), [[-1.0, 0.0, -3.5, 4.0] * 2])
    assert ref.rel_error(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.0
    assert ref.rel_error(np.array([np.nan, 2.0]), np.array([1.0, 2.0])) == float("inf")


def test_bad_inputs_refused():
    with pytest.raises(InputError):
        quant.quantize_w4(np.ones((4, 100)), 128)  # K % G
    with pytest.raises(InputError):
        quant.quantize_w4(np.ones(8), 128)  # not 2-D
    with pytest.raises(InputError):
        quant.quantize_w8(np.array([[np.nan, 1.0]]))
    with pytest.raises(InputError):
        ref.matmul_t(np.ones((2, 3)), np.ones((4, 5)))


@pytest.mark.parametrize(("name", "M", "N", "K"), [
    ("fp16_gemv", 1, 64, 100),  # K % 8
    ("fp16_gemv", 17, 64, 128),  # M beyond the kernel's range
    ("fp16_gemv", 0, 64, 128),
    ("w4a16_gemv", 1, 64, 4096 + 64),  # K % G
    ("gemv_w4_ref", 1, 64, 200),  # K % G
    ("w8a16_gemv", 1, 64, 4104),  # K % 16
    ("w8a8_gemv", 4, 0, 4096),  # N < 1
])
def test_gemv_shape_refusals(name, M, N, K):
    spec = next(s for s in gemv.SPECS if s.name == name)
    with pytest.raises(InputError):
        gemv.check_shape(spec, M, N, K)


def test_gemv_configs():
    for name in gemv.DEFS:
        for M in range(1, 17):
            for N, K in ((22016, 4096), (4096, 11008), (37, 256)):
                cfg = gemv.choose_config(name, M, N, K)
                assert cfg.mb >= M and cfg.mb in gemv.MB_BINS and 1 <= cfg.warps <= 32
                d = gemv.DEFS[name]
                if cfg.xreg:
                    assert cfg.warps * 32 * cfg.u >= K // d.elems  # one pass covers the row
    spec = next(s for s in gemv.SPECS if s.name == "w4a16_gemv")
    gemv.check_shape(spec, 16, 22016, 4096)
    with pytest.raises(InputError):
        gemv.check_shape(spec, 1, 64, 4096, group_size=96)
