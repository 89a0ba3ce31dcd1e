"""Quantizer and packer edge cases with hand-worked codes and an independent oracle (ml_dtypes) (issue 21).

Covers exact midpoints (ties to even), all-zero rows, all-positive / all-negative groups, codes reaching the ends of
their range, saturation, the NaN patterns of e4m3, and the error messages of the shape checks.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels.quant import pack_tc, pack_w4, quant
from models.errors import InputError

ml_dtypes = pytest.importorskip("ml_dtypes")
E4M3 = ml_dtypes.float8_e4m3fn


# ------------------------------------------------------------------------------------------------ W4
def test_w4_mixed_group_by_hand():
    # range [-2.5, 5.0] → span 7.5, scale 7.5/15 = 0.5 (exact in fp16), zero rint(2.5/0.5) = 5;
    # w/0.5 = -5, -2, 0, 0.5, 1.5, 4, 9.8, 10 → rint (ties to even) -5, -2, 0, 0, 2, 4, 10, 10 → +5
    w = np.array([[-2.5, -1.0, 0.0, 0.25, 0.75, 2.0, 4.9, 5.0]])
    q = quant.quantize_w4(w, 8)
    assert q.codes.tolist() == [[0, 3, 5, 5, 7, 9, 15, 15]]
    assert q.scales.tolist() == [[0.5]] and q.scales.dtype == np.float16
    assert q.zeros.tolist() == [[5]] and q.zeros.dtype == np.uint8 and q.group_size == 8 and q.shape == (1, 8)
    # dequantized: (code − 5)·0.5
    assert quant.dequantize_w4(q).tolist() == [[-2.5, -1.0, 0.0, 0.0, 1.0, 2.0, 5.0, 5.0]]


def test_w4_all_positive_and_all_negative_groups_keep_zero_exact():
    # positive group: range widened to include 0 → [0, 7.5], scale 0.5, zero 0; negative: [-7.5, 0], zero 15
    pos = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 7.5]
    neg = [-v for v in pos]
    q = quant.quantize_w4(np.array([pos + neg]), 8)
    assert q.scales.tolist() == [[0.5, 0.5]] and q.zeros.tolist() == [[0, 15]]
    assert q.codes.tolist() == [[1, 2, 3, 4, 5, 6, 7, 15, 14, 13, 12, 11, 10, 9, 8, 0]]
    assert quant.dequantize_w4(q).tolist() == [pos + neg]


def test_w4_all_zero_rows_give_zero_codes_and_no_nan():
    w = np.zeros((3, 16))
    w[1, :8] = np.linspace(-1, 1, 8)  # one live group beside zero groups
    q = quant.quantize_w4(w, 8)
    assert q.scales[0].tolist() == [1.0, 1.0] and q.zeros[0].tolist() == [0, 0] and not q.codes[0].any()
    assert q.scales[1, 1] == 1.0 and q.scales[1, 0] == np.float16(2 / 15)
    d = quant.dequantize_w4(q)
    assert np.isfinite(d).all() and (d[0] == 0).all() and (d[2] == 0).all() and (d[1, 8:] == 0).all()


def test_w4_random_set_shape_range_and_seed():
    a = quant.random_w4(64, 256, 64, seed=5)
    b = quant.random_w4(64, 256, 64, seed=5)
    assert a.codes.shape == (64, 256) and a.scales.shape == (64, 4) and a.zeros.shape == (64, 4)
    assert a.codes.dtype == np.uint8 and a.zeros.dtype == np.uint8 and a.scales.dtype == np.float16
    assert a.codes.min() == 0 and a.codes.max() == 15 and a.zeros.max() <= 15
    s = a.scales.astype(np.float64)
    assert s.min() >= 0.01 - 1e-5 and s.max() <= 0.03 + 1e-5  # uniform(0.5, 1.5) × 0.02
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.scales, b.scales)
    assert not np.array_equal(a.codes, quant.random_w4(64, 256, 64, seed=6).codes)


@pytest.mark.parametrize("N,K,G,msg", [
    (4, 128, 0, "w4 group size must be a positive multiple of 8, got 0"),
    (4, 120, 12, "w4 group size must be a positive multiple of 8, got 12"),
    (4, 100, 8, "w4 needs K divisible by the group size: K=100, G=8"),
    (0, 128, 128, "w4 needs N, K > 0, got N=0, K=128"),
])
def test_w4_shape_messages(N, K, G, msg):
    with pytest.raises(InputError, match=f"^{msg}$"):
        quant.check_w4_shape(N, K, G)


def test_non_finite_and_non_2d_messages():
    with pytest.raises(InputError, match=r"^w4 weight must be a 2-D array, got shape \(8,\)$"):
        quant.quantize_w4(np.ones(8), 8)
    with pytest.raises(InputError, match="^activation holds NaN or infinite values; only finite"):
        quant.quantize_act_int8(np.array([[1.0, np.inf]]))
    with pytest.raises(InputError, match="^fp8 weight holds NaN"):
        quant.quantize_fp8(np.array([[np.nan, 1.0]]))
    with pytest.raises(InputError,
                       match=r"^fp8 scale granularity 'row' not supported; use 'tensor', 'channel' or 'block'$"):
        quant.quantize_fp8(np.ones((2, 2)), per="row")
    with pytest.raises(InputError, match="^w4 packing needs K divisible by 8, got K=12$"):
        quant.pack_w4_reference(np.zeros((1, 12), dtype=np.uint8))


def test_pack_reference_every_nibble_position():
    codes = np.zeros((2, 16), dtype=np.uint8)
    codes[0, 3] = 0xF  # word 0, nibble 3 → 0xF000
    codes[1, 15] = 0x9  # word 1, nibble 7 → 0x90000000
    words = quant.pack_w4_reference(codes)
    assert words.tolist() == [[0xF000, 0], [0, 0x90000000]]
    assert np.array_equal(quant.unpack_w4_reference(words), codes)


# ------------------------------------------------------------------------------------------------ W8, int8 activations
def test_w8_by_hand_ties_ends_and_zero_rows():
    # row 0: amax 127 → scale 1.0; 127, −63.5 → −64 (even), 0.5 → 0, 1.5 → 2
    # row 1: amax 254 → scale 2.0; ±254 → ±127 (both ends reached), 3 → 1.5 → 2
    # row 2: all zeros → scale 1, codes 0
    w = np.array([[127.0, -63.5, 0.5, 1.5], [254.0, -254.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    q = quant.quantize_w8(w)
    assert q.scales.tolist() == [1.0, 2.0, 1.0] and q.scales.dtype == np.float16
    assert q.codes.tolist() == [[127, -64, 0, 2], [127, -127, 2, 0], [0, 0, 0, 0]] and q.codes.dtype == np.int8
    assert quant.dequantize_w8(q).tolist() == [[127.0, -64.0, 0.0, 2.0], [254.0, -254.0, 4.0, 0.0], [0.0] * 4]


def test_w8_random_codes_span_the_symmetric_range():
    q = quant.random_w8(64, 256, seed=1)
    assert q.codes.min() == -127 and q.codes.max() == 127  # never −128
    s = q.scales.astype(np.float64)
    assert q.scales.shape == (64,) and s.min() >= 0.5e-3 - 1e-6 and s.max() <= 1.5e-3 + 1e-6


def test_act_int8_by_hand():
    # row 0: amax 127 → scale 1; 63.5 → 64 (even), −0.5 → 0; row 1: amax 254 → scale 2: 3 → 2, −5 → −2 (even)
    x = np.array([[127.0, -0.5, 63.5], [254.0, 3.0, -5.0], [0.0, 0.0, 0.0]])
    codes, scales = quant.quantize_act_int8(x)
    assert scales.dtype == np.float32 and scales.tolist() == [1.0, 2.0, 1.0]
    assert codes.tolist() == [[127, 0, 64], [127, 2, -2], [0, 0, 0]] and codes.dtype == np.int8
    back = quant.dequantize_act_int8(codes, scales)
    assert back.tolist() == [[127.0, 0.0, 64.0], [254.0, 4.0, -4.0], [0.0, 0.0, 0.0]]


def test_act_int8_scale_is_amax_over_127_in_float32():
    x = np.array([[1.0, -0.3], [-1e-3, 5e-4]])
    codes, scales = quant.quantize_act_int8(x)
    assert scales.tolist() == [np.float32(1 / 127), np.float32(1e-3 / 127)]
    assert codes[:, 0].tolist() == [127, -127]


# ------------------------------------------------------------------------------------------------ FP8 e4m3
def _finite_table():
    t = quant.e4m3_table()
    return np.sort(t[np.isfinite(t) & (t >= 0)])


def test_e4m3_table_landmarks():
    t = quant.e4m3_table()
    assert t[0x7E] == 448.0 and t[0x38] == 1.0 and t[0x01] == 2.0**-9 and t[0x08] == 2.0**-6
    assert np.isnan(t[0x7F]) and np.isnan(t[0xFF]) and np.isfinite(t).sum() == 254
    assert t[0x80] == 0.0 and np.signbit(t[0x80]) and t[0xFE] == -448.0


def test_e4m3_encode_exact_midpoints_match_ml_dtypes():
    pos = _finite_table()
    mids = (pos[:-1] + pos[1:]) / 2  # every tie between neighbours, subnormals included: 2⁻¹⁰ ... 432
    v = np.concatenate([mids, -mids, pos, -pos])
    ours = quant.encode_e4m3(v)
    oracle = v.astype(E4M3).view(np.uint8)
    assert np.array_equal(ours, oracle)
    # spot checks by hand: 1 + 1/16 lies between 1.0 (0x38, even) and 1.125 (0x39): to 0x38;
    # 1 + 3/16 between 1.125 (0x39) and 1.25 (0x3A, even): to 0x3A; 2⁻¹⁰ between 0 and 2⁻⁹: to 0 (even)
    assert quant.encode_e4m3(np.array([1.0625, 1.1875, 2.0**-10, -(2.0**-10)])).tolist() == [0x38, 0x3A, 0x00, 0x80]


def test_e4m3_encode_just_off_midpoints_and_saturation():
    pos = _finite_table()
    mids = (pos[:-1] + pos[1:]) / 2
    eps = (pos[1:] - pos[:-1]) * 1e-3
    v = np.concatenate([mids + eps, mids - eps])
    assert np.array_equal(quant.encode_e4m3(v), v.astype(E4M3).view(np.uint8))
    # beyond ±448 saturates to the largest finite code, never a NaN pattern
    assert quant.encode_e4m3(np.array([448.0, 460.0, 1e6, -1e6, -449.0])).tolist() == [0x7E, 0x7E, 0x7E, 0xFE, 0xFE]
    assert quant.decode_e4m3(np.array([0x7F, 0xFF, 0x7E])).tolist()[2] == 448.0


def test_fp8_quantize_by_hand_and_zero_rows():
    # per channel: row 0 amax 448 → scale 1: 448 → 0x7E, −224 = −1.75·2⁷ → 0xF6, 1 → 0x38; row 1 all zero → scale 1
    w = np.array([[448.0, -224.0, 1.0], [0.0, 0.0, 0.0]])
    q = quant.quantize_fp8(w, per="channel")
    assert q.scales.tolist() == [1.0, 1.0] and q.scales.dtype == np.float32 and q.granularity == "channel"
    assert q.codes.tolist() == [[0x7E, 0xF6, 0x38], [0, 0, 0]]
    assert quant.dequantize_fp8(q).tolist() == [[448.0, -224.0, 1.0], [0.0, 0.0, 0.0]]
    # per tensor: amax 896 → scale 2; 448/2 = 224 → 0x76, −224/2 = −112 = −1.75·2⁶ → 0xEE
    t = quant.quantize_fp8(np.array([[896.0, -224.0], [0.0, 448.0]]), per="tensor")
    assert t.scales.tolist() == [2.0] and t.codes.tolist() == [[0x7E, 0xEE], [0x00, 0x76]]
    assert quant.dequantize_fp8(t).tolist() == [[896.0, -224.0], [0.0, 448.0]]
    z = quant.quantize_fp8(np.zeros((2, 4)), per="tensor")
    assert z.scales.tolist() == [1.0] and not z.codes.any() and (quant.dequantize_fp8(z) == 0).all()


@pytest.mark.parametrize("per,n_scales", [("channel", 48), ("tensor", 1)])
def test_random_fp8_never_emits_nan_patterns(per, n_scales):
    q = quant.random_fp8(48, 512, per=per, seed=2)
    assert q.codes.dtype == np.uint8 and q.granularity == per and q.scales.shape == (n_scales,)
    assert not ((q.codes & 0x7F) == 0x7F).any()
    assert np.isfinite(quant.dequantize_fp8(q)).all()
    assert (q.codes & 0x80).any() and not (q.codes & 0x80).all()  # both signs
    assert (q.codes & 0x7F).max() == 0x7E  # the largest finite magnitude is drawn
    s = q.scales.astype(np.float64)
    assert s.min() >= 0.5e-3 - 1e-9 and s.max() <= 1.5e-3 + 1e-9


# ------------------------------------------------------------------------------------------------ bf16 bits
def test_bf16_nan_stays_nan_and_ties_by_hand():
    snan = np.array([0x7F800001, 0xFF800001], dtype=np.uint32).view(np.float32)  # signalling NaNs
    bits = quant.to_bf16_bits(snan)
    assert bits.tolist() == [0x7FC0, 0xFFC0]  # quiet bit set: truncation alone would give ±inf (0x7F80)
    # −(1 + 2⁻⁸) is a tie between 0xBF80 (even) and 0xBF81: to 0xBF80; 1 + 2⁻⁷ is exact: 0x3F81
    assert quant.to_bf16_bits(np.array([-(1 + 2.0**-8), 1 + 2.0**-7])).tolist() == [0xBF80, 0x3F81]
    assert quant.round_bf16(np.array([1 + 2.0**-9, 3.0])).tolist() == [1.0, 3.0]
    assert quant.round_bf16(np.array([1.0])).dtype == np.float64
    assert quant.from_bf16_bits(np.array([0x4049], dtype=np.uint16)).tolist() == [3.140625]


# ------------------------------------------------------------------------------------------------ packers
def test_fast_w4_word_by_hand():
    # element e of a word goes to nibble slot (0, 4, 1, 5, 2, 6, 3, 7)[e]: codes 1..8 → slots hold 1,3,5,7,2,4,6,8
    codes = np.tile(np.arange(1, 9, dtype=np.uint8), 4).reshape(1, 32)
    words = pack_w4.pack_w4_fast(codes)
    assert words.tolist() == [[0x86427531] * 4]
    assert np.array_equal(pack_w4.unpack_w4_fast(words), codes)
    with pytest.raises(InputError, match="^the fast w4a16 layout needs K divisible by 32, got K=16$"):
        pack_w4.pack_w4_fast(np.zeros((1, 16), dtype=np.uint8))


def test_fast_scale_zero_word_by_hand():
    # scale 0.5 = fp16 0x3800 in the low half; zero 3 → fp16(1027) = 0x6403 in the high half
    assert pack_w4.pack_scale_zero(np.array([[0.5]]), np.array([[3]])).tolist() == [[0x64033800]]


def test_pack_w4a16_outputs_and_group_refusals():
    q = quant.random_w4(4, 256, 64, seed=1)
    words, sz = pack_w4.pack_w4a16(q)
    assert words.shape == (4, 32) and words.dtype == np.uint32 and sz.shape == (4, 4) and sz.dtype == np.uint32
    assert np.array_equal(pack_w4.unpack_w4_fast(words), q.codes) and pack_w4.unpack_w4_fast(words).dtype == np.uint8
    assert np.array_equal(sz, pack_w4.pack_scale_zero(q.scales, q.zeros))
    assert np.array_equal((sz & 0xFFFF).astype(np.uint16).view(np.float16), q.scales)
    assert np.array_equal((sz >> 16).astype(np.uint16).view(np.float16), q.zeros.astype(np.float16) + 1024)
    for G, K in ((96, 192), (16, 256), (8, 256)):
        q = quant.random_w4(4, K, G, seed=0)
        with pytest.raises(InputError, match=f"^the fast w4a16 kernel needs a power-of-two group size >= 32, got "
                                              f"G={G}$"):
            pack_w4.pack_w4a16(q)


def test_tc_pack_first_word_by_hand():
    # word 0 of block 0 is warp 0, lane 0, load 0, e = 0: nibble i = 4·hsel + 2·pp + reg holds n = pp·8,
    # k = reg·8 + hsel. With codes[n, k] = (n + 3k) % 16: (n, k) for i = 0..7 = (0,0) (0,8) (8,0) (8,8)
    # (0,1) (0,9) (8,1) (8,9) → codes 0, 8, 8, 0, 3, 11, 11, 3
    n, k = np.meshgrid(np.arange(128), np.arange(128), indexing="ij")
    codes = ((n + 3 * k) % 16).astype(np.uint8)
    words = pack_tc.pack_codes(codes)
    assert int(words[0]) == 0x3BB30880
    assert np.array_equal(pack_tc.unpack_codes(words, 128, 128), codes)
    assert pack_tc.unpack_codes(words, 128, 128).dtype == np.uint8


def test_tc_scale_zero_first_pairs_by_hand():
    # pair (w·8 + lane//4)·4 + nf is column w·32 + nf·8 + lane//4: pairs 0..3 are columns 0, 8, 16, 24
    scales = (np.arange(128, dtype=np.float64) / 64).reshape(128, 1).astype(np.float16)
    zeros = (np.arange(128) % 16).reshape(128, 1).astype(np.uint8)
    packed = pack_tc.pack_scale_zero(scales, zeros)
    assert packed.dtype == np.float16 and packed.shape == (256,)
    assert packed[:8].tolist() == [0.0, 0.0, 0.125, 8.0, 0.25, 0.0, 0.375, 8.0]
    s, z = pack_tc.unpack_scale_zero(packed, 128, 128)
    assert np.array_equal(s, scales) and np.array_equal(z, zeros) and z.dtype == np.uint8
    wide = pack_tc.pack_scale_zero(scales.astype(np.float64), zeros)  # float64 scales are stored as fp16 too
    assert wide.dtype == np.float16 and np.array_equal(wide, packed)


def test_tc_pack_messages():
    with pytest.raises(InputError, match="^the tensor-core w4a16 kernel supports group size 128 only, got 64$"):
        pack_tc.check_tc_w4_shape(128, 128, 64)
    with pytest.raises(InputError, match="^the tensor-core w4a16 kernel needs N and K multiples of 128, got N=128, "
                                         "K=192$"):
        pack_tc.pack_codes(np.zeros((128, 192), dtype=np.uint8))
    with pytest.raises(InputError, match=r"^packed w4 words hold 8 words, expected N\*K/8 = 2048$"):
        pack_tc.unpack_codes(np.zeros(8, dtype=np.uint32), 128, 128)
    with pytest.raises(InputError, match=r"^w4 zeros \(128, 2\) and scales \(128, 1\) differ in shape$"):
        pack_tc.pack_scale_zero(np.ones((128, 1)), np.ones((128, 2)))
    for N, K in ((0, 128), (128, 0), (-128, 128)):
        with pytest.raises(InputError):
            pack_tc.check_tc_w4_shape(N, K)
    with pytest.raises(InputError, match="^the tensor-core w4a16 kernel supports group size 128 only, got 64$"):
        pack_tc.pack_w4(quant.random_w4(128, 256, 64, seed=4))
    q = quant.random_w4(128, 256, 128, seed=4)
    p = pack_tc.pack_w4(q)
    assert (p.N, p.K) == (128, 256) and p.words.size == 128 * 256 // 8 and p.scale_zero.size == 2 * 128 * 2


# ------------------------------------------------------------------------------------------------ subnormal scales
def test_w8_and_act_int8_codes_stay_within_127_when_the_scale_rounds_down():
    # amax = 127 · 100.49 · 2⁻²⁴: amax/127 is a subnormal fp16 that rounds down to 100·2⁻²⁴, so amax/s = 127.62
    # → rint 128, clipped to 127 (and −128 to −127); amax/2 → 63.81 → 64
    amax = 127 * 100.49 * 2.0**-24
    q = quant.quantize_w8(np.array([[amax, -amax, amax / 2]]))
    assert q.scales.tolist() == [100 * 2.0**-24] and q.codes.tolist() == [[127, -127, 64]]
    # the same in float32 for activations: 100.49·2⁻¹⁴⁹ rounds to the subnormal 100·2⁻¹⁴⁹
    x = 127 * 100.49 * 2.0**-149
    codes, scales = quant.quantize_act_int8(np.array([[x, -x]]))
    assert scales.tolist() == [np.float32(100 * 2.0**-149)] and codes.tolist() == [[127, -127]]


def test_w4_zero_and_codes_stay_within_0_15_when_the_scale_rounds_down():
    # span = 15 · 14.49 · 2⁻²⁴: span/15 rounds to the fp16 subnormal 14·2⁻²⁴, so span/s = 15.525 → rint 16
    span = 15 * 14.49 * 2.0**-24
    neg = [-span] + [0.0] * 7  # lo = −span: zero rint(15.525) = 16 → 15; −span → −16 + 15 = −1 → 0
    pos = [span] + [0.0] * 7  # hi = span: zero 0; span → 16 → 15
    q = quant.quantize_w4(np.array([neg + pos]), 8)
    assert q.scales.tolist() == [[14 * 2.0**-24] * 2] and q.zeros.tolist() == [[15, 0]]
    assert q.codes.tolist() == [[0] + [15] * 7 + [15] + [0] * 7]


def test_scales_below_one_are_amax_over_the_range():
    # amax 127·2⁻⁸ = 0.496: w8 scale 2⁻⁸ exactly; fp8 amax 0.4375 = 448·2⁻¹⁰: scale 2⁻¹⁰
    q = quant.quantize_w8(np.array([[127 * 2.0**-8, 2.0**-8]]))
    assert q.scales.tolist() == [2.0**-8] and q.codes.tolist() == [[127, 1]]
    f = quant.quantize_fp8(np.array([[0.4375, -2.0**-10]]), per="tensor")
    assert f.scales.tolist() == [2.0**-10] and f.codes.tolist() == [[0x7E, 0xB8]]  # 448 and −1.0
    c, s = quant.quantize_act_int8(np.array([[0.5, 0.25]]))
    assert s.tolist() == [np.float32(0.5 / 127)] and c.tolist() == [[127, 64]]  # 63.5 → 64


def test_result_dtypes():
    assert quant.encode_e4m3(np.array([1.0, -2.0])).dtype == np.uint8
    assert quant.to_bf16_bits(np.array([1.0])).dtype == np.uint16
    assert quant.random_w8(4, 8).codes.dtype == np.int8 and quant.random_w8(4, 8).scales.dtype == np.float16
    assert quant.random_fp8(4, 8).scales.dtype == np.float32
    with pytest.raises(InputError, match=r"^w8 weight must be a 2-D array, got shape \(3,\)$"):
        quant.quantize_w8(np.ones(3))
    with pytest.raises(InputError, match="^w4 needs N, K > 0, got N=4, K=0$"):
        quant.check_w4_shape(4, 0, 8)


# ------------------------------------------------------------------------------------------------ random sets
def test_random_defaults_and_reproducibility():
    assert quant.quantize_w4(np.ones((2, 256))).scales.shape == (2, 2)  # default G = 128
    w4 = quant.random_w4(4, 256)
    assert w4.group_size == 128 and w4.scales.shape == (4, 2)
    assert np.array_equal(w4.codes, quant.random_w4(4, 256, seed=0).codes)  # default seed 0
    f = quant.random_fp8(4, 8)
    assert f.granularity == "channel" and f.scales.shape == (4,)
    assert np.array_equal(f.codes, quant.random_fp8(4, 8, seed=0).codes)
    assert np.array_equal(quant.random_fp8(4, 8, seed=9).codes, quant.random_fp8(4, 8, seed=9).codes)
    assert np.array_equal(quant.random_w8(4, 8).codes, quant.random_w8(4, 8, seed=0).codes)
    assert np.array_equal(quant.random_w8(4, 8, seed=9).codes, quant.random_w8(4, 8, seed=9).codes)
    assert not np.array_equal(quant.random_w8(4, 8, seed=9).codes, quant.random_w8(4, 8, seed=10).codes)


def _spans_range(values, lo, hi):
    """Uniform draws on [lo, hi) (then rounded to fp16/fp32: 1e-3 slack): hundreds of them reach both outer
    quarters."""
    v = np.asarray(values, dtype=np.float64)
    q = (hi - lo) / 4
    return lo * (1 - 1e-3) <= v.min() < lo + q and hi - q < v.max() <= hi * (1 + 1e-3)


def test_random_distributions_cover_their_ranges():
    w4 = quant.random_w4(64, 1024, 32, seed=3)  # 2048 scales and zeros
    assert _spans_range(w4.scales.astype(np.float64), 0.01, 0.03) and w4.zeros.min() == 0 and w4.zeros.max() == 15
    w8 = quant.random_w8(256, 64, seed=3)
    assert _spans_range(w8.scales.astype(np.float64), 0.5e-3, 1.5e-3)
    f = quant.random_fp8(256, 256, seed=3)
    assert _spans_range(f.scales, 0.5e-3, 1.5e-3)
    assert (f.codes & 0x7F).min() == 0  # code 0 (and 0x80) drawn too
    negative = float((f.codes & 0x80).astype(bool).mean())
    assert 0.48 < negative < 0.52  # signs are fair coin flips


# ------------------------------------------------------------------------------------------------ fake_quantize
# Hand-worked cases of kernels.quant.quant.Choice / fake_quantize (Dec 3 re-measurement survivors).
C = quant.Choice


def test_fake_quantize_asymmetric_zero_point_fp16_versus_int4_by_hand():
    # range [-1.25, 6.25] → span 7.5, scale 7.5/15 = 0.5 (exact in fp16)
    w = np.array([[-1.25, 0.0, 6.25, 2.0]])
    # fp16 zero: -lo/s = 2.5 kept; w/0.5 + 2.5 = 0, 2.5, 15, 6.5 → rint (ties to even) 0, 2, 15, 6;
    # (code − 2.5)·0.5 = -1.25, -0.25, 6.25, 1.75
    fp16_zero = quant.fake_quantize(w, C("int4", "channel", symmetric=False, zero="fp16"))
    assert fp16_zero.tolist() == [[-1.25, -0.25, 6.25, 1.75]]
    # int4 zero: rint(2.5) = 2; w/0.5 + 2 = -0.5, 2, 14.5, 6 → 0 (-0.5 ties to -0), 2, 14, 6; (code − 2)·0.5
    int4_zero = quant.fake_quantize(w, C("int4", "channel", symmetric=False, zero="int4"))
    assert int4_zero.tolist() == [[-1.0, 0.0, 6.0, 2.0]]
    # the fp16 zero is rounded to fp16: span 7.5 again, s = 0.5, -lo/s = 2.5002 → fp16 2.5 (step 2^-9 there);
    # -1.2501/0.5 + 2.5 = -0.0002 → 0 → (0 − 2.5)·0.5 = -1.25; 12.4998 + 2.5 → 15 → 6.25
    w2 = np.array([[-1.2501, 6.2499]])
    assert quant.fake_quantize(w2, C("int4", "channel", symmetric=False, zero="fp16")).tolist() == [[-1.25, 6.25]]


def test_fake_quantize_all_positive_row_keeps_zero_in_range_and_the_zero_point_clips_to_its_storage():
    # all positive: lo is held at 0, so span 7.5, scale 0.5, zero 0; codes 1, 2, 4, 15 → exact
    pos = np.array([[0.5, 1.0, 2.0, 7.5]])
    assert quant.fake_quantize(pos, C("int4", "channel", symmetric=False, zero="int4")).tolist() == pos.tolist()
    # int8 codes with a 4-bit zero: span 127.5 / 255 = 0.5, -lo/s = 255 clips to 15;
    # -127.5/0.5 + 15 = -240 → code 0 → (0 − 15)·0.5 = -7.5; 0/0.5 + 15 = 15 → 0
    neg = np.array([[-127.5, 0.0, 0.0, 0.0]])
    out = quant.fake_quantize(neg, C("int8", "channel", symmetric=False, zero="int4"))
    assert out.tolist() == [[-7.5, 0.0, 0.0, 0.0]]


def test_fake_quantize_all_zero_rows_give_zeros_not_nan():
    z = np.zeros((2, 4))
    for choice in (C("int8", "channel"), C("int4", "group", 4), C("fp8", "channel", scale_dtype="fp32"),
                   C("int4", "channel", symmetric=False, zero="int4")):
        assert quant.fake_quantize(z, choice).tolist() == z.tolist()


def test_fake_quantize_bf16_scale_by_hand():
    # amax 1.1: 1.1/127 = 2^-7 · 1.108661; bf16 keeps 7 fraction bits: 1.108661·128 = 141.91 → 142 → s = 142/16384;
    # 1.1/s = 126.92 → code 127 → 127·142/16384 = 18034/16384 = 1.1007080078125 (fp16 would give 1.0997391)
    out = quant.fake_quantize(np.array([[1.1, 0.0, 0.0, 0.0]]), C("int8", "channel", scale_dtype="bf16"))
    assert out[0, 0] == 18034 / 16384 and out[0, 1:].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("choice, message", [
    (C("int3", "channel"), "unknown format 'int3'; valid: int4, int8, fp8"),
    (C("int8", "row"), "unknown granularity 'row'; valid: tensor, channel, group, block"),
    (C("int8", "block", 0), "block granularity needs a positive size, got 0"),
    (C("int8", "group", True), "group granularity needs a positive size, got True"),
    (C("int8", "channel", scale_dtype="fp64"), "unknown scale dtype 'fp64'; valid: fp16, bf16, fp32"),
    (C("int8", "channel", symmetric=False), "a symmetric choice stores no zero point and an asymmetric one stores it "
                                            "as one of int4, int8, fp16; got symmetric=False, zero='none'"),
    (C("fp8", "channel", symmetric=False, zero="int8"), "zero points apply to int4/int8 only, stored as int4, int8, "
                                                        "fp16; got fp8 with zero='int8'"),
    (C("int8", "channel", symmetric=False, zero="int2"), "zero points apply to int4/int8 only, stored as int4, int8, "
                                                         "fp16; got int8 with zero='int2'"),
])  # fmt: skip
def test_choice_check_messages_word_for_word(choice, message):
    with pytest.raises(InputError) as err:
        choice.check()
    assert str(err.value) == message


def test_block_and_group_of_one_are_accepted_and_a_weight_must_be_2d():
    w = np.array([[0.3, -2.0], [5.0, 0.0]])
    # one element per scale: every nonzero value is its own amax → code ±127 → exact up to the fp32 scale
    assert quant.fake_quantize(w, C("int8", "block", 1, scale_dtype="fp32")) == pytest.approx(w, rel=1e-7)
    assert quant.fake_quantize(w, C("int8", "group", 1, scale_dtype="fp32")) == pytest.approx(w, rel=1e-7)
    with pytest.raises(InputError) as err:
        quant.fake_quantize(np.ones(3), C("int8", "channel"))
    assert str(err.value) == "weight must be a 2-D array, got shape (3,)"


def test_fake_quantize_fp8_with_fp16_scales_and_a_scale_that_rounds_to_zero():
    # fp8 per channel, fp16 scale: 1/448 = 2^-9 · 1.142857; 10 fraction bits: 1170.29 → 1170 → s = 1170 / 2^19;
    # 0.5/s = 224.06 → e4m3 224 (step 16 in [128, 256)) → 224·1170/2^19 = 0.4998779296875 (fp32 scale: 0.50000002)
    out = quant.fake_quantize(np.array([[1.0, 0.5, 0.0, 0.0]]), C("fp8", "channel"))
    assert out[0, 1] == 224 * 1170 / 2**19
    # int8, fp16 scale: 1e-6/127 = 7.9e-9 is below half the smallest fp16 subnormal (2^-25 = 3.0e-8) → s = 0;
    # the codes clip to ±127 (u/s = ±inf) and 127·0 = 0: zeros, not NaN
    with np.errstate(divide="ignore"):  # ±1e-6 / 0
        tiny = quant.fake_quantize(np.array([[1e-6, -1e-6]]), C("int8", "channel"))
    assert tiny.tolist() == [[0.0, 0.0]]


def test_fp8_block_refusals_and_a_non_square_block_by_hand():
    for bad in ((0, 128), (128,), (128, 0)):
        with pytest.raises(InputError) as err:
            quant.quantize_fp8(np.ones((4, 4)), "block", block=bad)
        assert str(err.value) == f"fp8 block must be two positive sizes (rows, columns), got {bad!r}"
    # (1, 2) blocks of a 2x4 weight: amax 448, 224 / 112, 56 → scales amax/448 = 1, 0.5 / 0.25, 0.125 (exact)
    w = np.array([[448.0, -224.0, 224.0, 112.0], [112.0, 56.0, -56.0, 28.0]])
    q = quant.quantize_fp8(w, "block", block=(1, 2))
    assert q.scales.tolist() == [[1.0, 0.5], [0.25, 0.125]] and q.block == (1, 2)
    # w / scale = 448, -224, 448, 224 / 448, 224, -448, 224: every one an e4m3 value → exact round trip
    assert quant.decode_e4m3(q.codes).tolist() == [[448.0, -224.0, 448.0, 224.0], [448.0, 224.0, -448.0, 224.0]]
    assert quant.dequantize_fp8(q).tolist() == w.tolist()
    assert quant.quantize_fp8(w, "block", block=(1, 1)).scales.shape == (2, 4)
