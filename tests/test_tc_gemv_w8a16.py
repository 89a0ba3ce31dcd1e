"""The W8A16 tensor-core GEMVs' host side on CPU (kernels/tcgemv/tc_gemv_w8a16.py, layout kernels/quant/pack_q8.py
pack_w8a16_tc): gemv_w8a16_tc.cu's register conversion (prmt, then hsub2 with the 0x6400 magic number for fp16, or
FADD in fp32 and the upper halves for bf16) replayed on bit patterns, the lanes' A and B fragments placed where PTX's
m16n8k16 layout puts them (A: register r holds row g + 8 (r % 2), columns 2 t + 8 (r // 2) + 0..1; B: register r
holds column g, rows 2 t + 8 r + 0..1; C: c_i at row g + 8 (i // 2), column 2 t + i % 2); the table, refusals,
compile options, declared facts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernels import registry
from kernels.quant import pack_q8
from kernels.tcgemv import tc_gemv, tc_gemv_w8a16
from models.errors import InputError


def _prmt(a: int, b: int, sel: int) -> int:
    """PTX prmt.b32 (default mode): result byte i is byte (sel >> 4 i) & 7 of {b, a} (a: bytes 0-3)."""
    pool = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    return sum(pool[(sel >> (4 * i)) & 7] << (8 * i) for i in range(4))


def _halves(word: int, bf16: bool) -> tuple[float, float]:
    lo, hi = word & 0xFFFF, word >> 16
    if bf16:
        return tuple(float(np.array([h << 16], dtype=np.uint32).view(np.float32)[0]) for h in (lo, hi))
    return tuple(float(np.array([h], dtype=np.uint16).view(np.float16)[0]) for h in (lo, hi))


def _to_16(w: int, bf16: bool) -> tuple[int, int]:
    """The kernel's to_16 on one word of four biased bytes: the two 16-bit pair registers (lo, hi)."""
    if bf16:
        f = [np.float32(np.array([_prmt(w, 0x4B000000, sel)], dtype=np.uint32).view(np.float32)[0])
             - np.float32(8388736.0) for sel in (0x7650, 0x7651, 0x7652, 0x7653)]
        bits = [int(np.array([v], dtype=np.float32).view(np.uint32)[0]) for v in f]
        return _prmt(bits[0], bits[1], 0x7632), _prmt(bits[2], bits[3], 0x7632)
    out = []
    for sel in (0x4140, 0x4342):
        h = np.array([_prmt(w, 0x64646464, sel)], dtype=np.uint32).view(np.float16)  # (1024 + u0, 1024 + u1)
        d = h - np.array([0x64806480], dtype=np.uint32).view(np.float16)  # hsub2: exact integers below 2048
        out.append(int(d.view(np.uint32)[0]))
    return out[0], out[1]


def _emulate(words: np.ndarray, x: np.ndarray, N: int, bf16: bool) -> np.ndarray:
    """y [M, N] = what the kernel sums (before the scale): per row tile, chunk, k-step, half and n-tile one m16n8k16
    from the lanes' registers, the weights converted as the kernel converts them."""
    T, C = words.shape[:2]
    rows = -(-x.shape[0] // 8) * 8
    xp = np.zeros((rows, x.shape[1]))
    xp[:x.shape[0]] = x
    y = np.zeros((rows, T * 16))
    for tile in range(T):
        for c in range(C):
            for s in range(2):
                a = {lane: [v for q in range(4) for v in _to_16(int(words[tile, c, s, lane, q]), bf16)]
                     for lane in range(32)}  # f[0..7] of the kernel: {g lo, g hi, g+8 lo, g+8 hi} x two halves
                for half in range(2):
                    A = np.zeros((16, 16))
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        f = a[lane][4 * half:4 * half + 4]
                        for r, reg in enumerate((f[0], f[2], f[1], f[3])):  # mma16(acc, f0, f2, f1, f3, ...)
                            A[g + 8 * (r % 2), 2 * t + 8 * (r // 2):2 * t + 8 * (r // 2) + 2] = _halves(reg, bf16)
                    for j in range(rows // 8):
                        B = np.zeros((16, 8))
                        for lane in range(32):
                            g, t = lane // 4, lane % 4
                            k0 = 64 * c + 16 * t + 8 * s + 4 * half  # xs[s] words (2 half, 2 half + 1)
                            B[2 * t:2 * t + 2, g] = xp[8 * j + g, k0:k0 + 2]
                            B[2 * t + 8:2 * t + 10, g] = xp[8 * j + g, k0 + 2:k0 + 4]
                        D = A @ B
                        for lane in range(32):
                            g, t = lane // 4, lane % 4
                            for i in range(4):
                                y[8 * j + 2 * t + i % 2, 16 * tile + g + 8 * (i // 2)] += D[g + 8 * (i // 2),
                                                                                            2 * t + i % 2]
    return y[:x.shape[0], :N]


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize(("M", "N", "K"), [(1, 16, 64), (9, 21, 128)])
def test_the_kernels_conversion_and_fragments_compute_x_times_codes(bf16: bool, M: int, N: int, K: int) -> None:
    rng = np.random.default_rng(M + N + bf16)
    w = rng.integers(-128, 128, size=(N, K), dtype=np.int8)
    w[0, :4] = (-128, 127, 0, -1)  # both ends of the byte
    x = rng.integers(-8, 8, size=(M, K)).astype(np.float64) / 4  # exact in fp16 and bf16
    words = pack_q8.pack_w8a16_tc(w)
    np.testing.assert_array_equal(_emulate(words, x, N, bf16), x @ w.astype(np.float64).T)


def test_every_byte_converts_exactly() -> None:
    for q in range(-128, 128):
        word = ((q ^ 0x80) & 0xFF) * 0x01010101
        for bf16 in (False, True):
            assert _halves(_to_16(word, bf16)[0], bf16) == (q, q)


def test_the_words_are_the_8_bit_layout_with_biased_bytes() -> None:
    w = np.random.default_rng(3).integers(-128, 128, size=(37, 192), dtype=np.int8)
    words = pack_q8.pack_w8a16_tc(w)
    np.testing.assert_array_equal(words, pack_q8.pack_q8_tc(w) ^ np.uint32(0x80808080))
    assert (pack_q8.unpack_q8_tc(words, 48)[37:] == 0x80).all()  # padded channels hold q = 0
    with pytest.raises(InputError, match="must be int8"):
        pack_q8.pack_w8a16_tc(w.view(np.uint8))


def test_a_swapped_half_is_caught() -> None:
    rng = np.random.default_rng(5)
    w = rng.integers(-128, 128, size=(16, 64), dtype=np.int8)
    x = rng.integers(-8, 8, size=(2, 64)).astype(np.float64)
    words = pack_q8.pack_w8a16_tc(w)[..., [2, 3, 0, 1]]
    assert not np.array_equal(_emulate(np.ascontiguousarray(words), x, 16, False), x @ w.astype(np.float64).T)


@pytest.mark.parametrize(("M", "nt"), [(1, 1), (8, 1), (9, 2), (16, 2), (17, 4), (32, 4)])
def test_the_table_pads_the_batch_to_whole_n_tiles(M: int, nt: int) -> None:
    for N in (0, 4096, 22016):
        for name in tc_gemv_w8a16.KINDS:
            cfg = tc_gemv_w8a16.choose_config(M, N, name=name)
            assert cfg.nt == nt and 8 * cfg.nt >= M


@pytest.mark.parametrize("M", [16, 32])
def test_each_column_takes_the_layers_up_to_its_row_tiles_per_sm(M: int) -> None:
    columns = next(cs for top, cs in tc_gemv_w8a16.TABLE if top == M)
    assert [top for top, _ in columns][-1] == math.inf and len({c for _, c in columns}) == len(columns)
    for top, cfg in columns[:-1]:
        last = int(top * 132) * 16  # the widest layer of `top` row tiles per SM on 132 SMs
        assert tc_gemv_w8a16.choose_config(M, last) == cfg
        assert tc_gemv_w8a16.choose_config(M, last + 16) != cfg
    assert tc_gemv_w8a16.choose_config(M, 0) == columns[-1][1] == tc_gemv_w8a16.choose_config(M, 40000)
    assert tc_gemv_w8a16.choose_config(M, 4096) == columns[0][1]


@pytest.mark.parametrize("M", [0, 33, -1])
def test_batch_outside_the_kernel_is_refused_with_its_name(M: int) -> None:
    with pytest.raises(InputError, match=r"w8a16_bf16_tc_gemv takes M in \[1, 32\]"):
        tc_gemv_w8a16.choose_config(M, name="w8a16_bf16_tc_gemv")


def test_overrides_that_cannot_run_are_refused_in_one_line() -> None:
    with pytest.raises(InputError, match="needs 8 \\* nt >= M"):
        tc_gemv_w8a16.choose_config(12, nt=1)
    with pytest.raises(InputError, match="u, tiles and minb >= 1"):
        tc_gemv_w8a16.choose_config(1, tiles=0)
    with pytest.raises(InputError, match="shared memory"):
        tc_gemv_w8a16.choose_config(16, warps=32, nt=4)
    with pytest.raises(InputError, match="no W8A16 tensor-core GEMV named 'w8a16_gemv'"):
        tc_gemv_w8a16.choose_config(1, name="w8a16_gemv")
    with pytest.raises(InputError, match="no W8A16 tensor-core GEMV"):
        tc_gemv_w8a16.TcGemvW8A16Runner(registry.get("w8a16_gemv"))


def test_options_name_the_activation_type_and_every_field() -> None:
    opts = tc_gemv_w8a16.Config(nt=4, warps=4, u=3, tiles=2, minb=2).options(True)
    assert opts == ("-DW8_BF16=1", "-DTCW_NT=4", "-DTCW_WARPS=4", "-DTCW_U=3", "-DTCW_TILES=2", "-DTCW_MINB=2")
    assert tc_gemv_w8a16.Config(nt=1).options(False)[0] == "-DW8_BF16=0"


@pytest.mark.parametrize(("N", "K", "needle"), [(64, 96, "multiple of 64"), (0, 128, "N >= 1"),
                                                (64, 0, "multiple of 64")])
def test_shapes_refused_before_anything_is_allocated(N: int, K: int, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        tc_gemv_w8a16.check_shape(registry.get("w8a16_tc_gemv"), 1, N, K)


def test_specs_declare_scheme_path_dequant_and_table() -> None:
    f16, bf16 = registry.get("w8a16_tc_gemv"), registry.get("w8a16_bf16_tc_gemv")
    assert (f16.scheme, f16.facts.path, f16.facts.dequant, f16.min_cc) == ("w8a16", "mma_sync_f16", "w8", 80)
    assert (bf16.scheme, bf16.facts.path, bf16.facts.dequant) == ("w8a16", "mma_sync_bf16", "w8")
    for spec in (f16, bf16):
        assert spec.facts.family == "gemv" and spec.facts.bn == 16
        assert spec.facts.m_tiles == tuple((m, cols[0][1].nt * 8) for m, cols in tc_gemv_w8a16.TABLE)
        assert spec.m_max == tc_gemv_w8a16.M_MAX == tc_gemv_w8a16.TABLE[-1][0]
    assert tc_gemv_w8a16.params("w8a16_tc_gemv").act == "f16"
    assert tc_gemv_w8a16.params("w8a16_bf16_tc_gemv").act == "bf16"
    assert tc_gemv.check_config("x", tc_gemv_w8a16.choose_config(32), 32)  # every column fits the shared memory
