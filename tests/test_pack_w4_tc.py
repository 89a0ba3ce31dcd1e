"""The tensor-core W4A16 GEMV's layout (kernels/quant/pack_w4.py pack_w4a16_tc) against the kernel's arithmetic, on CPU.

`emulate` replays gemv_w4a16_tc.cu lane by lane in NumPy: each lane's 32-bit word goes through the kernel's
lop3 / hsub2 / hfma2 conversion (fp16 bit patterns), the four registers are placed where PTX's m16n8k16 fragment
layout puts them (A: row g / g + 8, columns 2t, 2t + 1 / 2t + 8, 2t + 9; B: rows 2t, 2t + 1 / 2t + 8, 2t + 9, column
g), the mma's sum runs, and each group's sums take the scale. A layout or fragment mistake changes the result.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels.quant import pack_w4, quant
from models.errors import InputError


def _halves(u: np.ndarray) -> np.ndarray:
    """uint32 words -> (..., 2) float16 (low half first)."""
    return np.ascontiguousarray(u.astype(np.uint32)).view(np.uint16).reshape(*u.shape, 2).view(np.float16)


def _dequant(word: np.ndarray, sz0: np.ndarray, sz8: np.ndarray) -> list[np.ndarray]:
    """The kernel's `dequant`: four (..., 2) fp16 registers of q - z from one word per lane."""
    def zero(sz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo = _halves(sz)[..., 1:2].repeat(2, axis=-1)  # prmt 0x3232: (1024 + z) twice
        return lo, np.float16(960.0) - lo

    (z0, z0h), (z8, z8h) = zero(sz0), zero(sz8)
    v = word >> np.uint32(8)
    magic = np.uint32(0x64006400)
    lo0, lo8 = _halves((word & np.uint32(0x000F000F)) | magic), _halves((v & np.uint32(0x000F000F)) | magic)
    hi0, hi8 = _halves((word & np.uint32(0x00F000F0)) | magic), _halves((v & np.uint32(0x00F000F0)) | magic)
    sixteenth = np.float16(0.0625)
    return [lo0 - z0, lo8 - z8, (hi0 * sixteenth + z0h).astype(np.float16), (hi8 * sixteenth + z8h).astype(np.float16)]


def emulate(wt: np.ndarray, szt: np.ndarray, x: np.ndarray, N: int, G: int, wscale: bool = False) -> np.ndarray:
    """y (M x N) as the kernel computes it; `wscale`: each converted register times the fp16 scale (one fp16 rounding,
    TCG_WSCALE=1) and the mma accumulating the output, instead of the scale on the fp32 sums per group."""
    M, K = x.shape
    T, C = wt.shape[:2]
    xp = np.zeros((8 * -(-M // 8), K), dtype=np.float16)
    xp[:M] = x
    lanes = np.arange(32)
    g, t = lanes // 4, lanes % 4
    y = np.zeros((T * 16, xp.shape[0]))
    for T_ in range(T):
        for grp in range(K // G):
            sz0, sz8 = szt[T_, grp, g], szt[T_, grp, g + 8]
            s0, s8 = (_halves(v)[:, :1] for v in (sz0, sz8))  # each lane's fp16 scales of channels g and g + 8
            part = np.zeros((16, xp.shape[0]))
            for c in range(grp * G // 64, (grp + 1) * G // 64):
                for s in range(4):
                    a = _dequant(wt[T_, c, :, s], sz0, sz8)
                    if wscale:  # hmul2 by (s, s): fp16 products
                        a = [(r * sc).astype(np.float16) for r, sc in zip(a, (s0, s8, s0, s8), strict=True)]
                    A = np.zeros((16, 16))
                    A[g[:, None], 2 * t[:, None] + [0, 1]] = a[0]
                    A[g[:, None] + 8, 2 * t[:, None] + [0, 1]] = a[1]
                    A[g[:, None], 2 * t[:, None] + [8, 9]] = a[2]
                    A[g[:, None] + 8, 2 * t[:, None] + [8, 9]] = a[3]
                    k = 64 * c + 16 * t + 4 * s  # lane t's four k of this step
                    for j in range(xp.shape[0] // 8):
                        B = np.zeros((16, 8))
                        B[2 * t[:, None] + [0, 1], g[:, None]] = xp[8 * j + g[:, None], k[:, None] + [0, 1]]
                        B[2 * t[:, None] + [8, 9], g[:, None]] = xp[8 * j + g[:, None], k[:, None] + [2, 3]]
                        part[:, 8 * j:8 * j + 8] += A @ B
            scale = np.ones(16) if wscale else _halves(szt[T_, grp])[:, 0].astype(np.float64)
            y[16 * T_:16 * T_ + 16] += scale[:, None] * part
    return y[:N, :M].T


def _problem(N: int, K: int, M: int, G: int, seed: int = 0) -> tuple[quant.W4, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = quant.quantize_w4(rng.standard_normal((N, K)).astype(np.float32) / np.sqrt(K), G)
    return w, rng.standard_normal((M, K)).astype(np.float16)


@pytest.mark.parametrize(("N", "K", "M", "G"), [(32, 256, 1, 128), (20, 128, 3, 64), (16, 512, 11, 256),
                                                (9, 128, 8, 128)])
def test_emulated_kernel_matches_the_dequantized_product(N: int, K: int, M: int, G: int) -> None:
    w, x = _problem(N, K, M, G)
    wt, szt = pack_w4.pack_w4a16_tc(w)
    assert wt.shape == (-(-N // 16), K // 64, 32, 4) and szt.shape == (-(-N // 16), K // G, 16)
    ref = x.astype(np.float64) @ quant.dequantize_w4(w).astype(np.float64).T
    got = emulate(wt, szt, x, N, G)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9 * np.abs(ref).max())


def test_emulated_scale_in_the_weights_rounds_each_weight_once() -> None:
    """TCG_WSCALE=1: the weights (q - z) s rounded to fp16; the result is the product of those rounded weights exactly,
    and within fp16's half-ulp per weight of the dequantized product (the GPU tolerance, 2e-3, is far above)."""
    w, x = _problem(40, 384, 16, 128, seed=7)
    wt, szt = pack_w4.pack_w4a16_tc(w)
    exact = x.astype(np.float64) @ quant.dequantize_w4(w).astype(np.float64).T
    rounded = quant.dequantize_w4(w).astype(np.float16).astype(np.float64)  # (q - z) * s in fp16, rounded once
    got = emulate(wt, szt, x, 40, 128, wscale=True)
    np.testing.assert_allclose(got, x.astype(np.float64) @ rounded.T, rtol=0, atol=1e-9 * np.abs(exact).max())
    rel = np.linalg.norm(got - exact) / np.linalg.norm(exact)
    assert 0 < rel < 2e-4  # not the exact product, but close: one fp16 rounding per weight


def test_a_swapped_nibble_slot_is_caught() -> None:
    w, x = _problem(16, 128, 2, 128, seed=3)
    wt, szt = pack_w4.pack_w4a16_tc(w)
    ref = x.astype(np.float64) @ quant.dequantize_w4(w).astype(np.float64).T
    lo, hi = wt & np.uint32(0xF), (wt >> np.uint32(4)) & np.uint32(0xF)
    swapped = (wt & ~np.uint32(0xFF)) | (lo << np.uint32(4)) | hi  # nibble slots 0 and 1 exchanged
    assert np.abs(emulate(swapped, szt, x, 16, 128) - ref).max() > 1e-3


def test_unpack_inverts_pack_with_padding() -> None:
    codes = np.random.default_rng(1).integers(0, 16, (23, 192), dtype=np.uint8)
    words = pack_w4.pack_w4_tc(codes)
    assert words.shape == (2, 3, 32, 4)
    np.testing.assert_array_equal(pack_w4.unpack_w4_tc(words, 23), codes)
    assert not pack_w4.unpack_w4_tc(words, 32)[23:].any()  # padded channels are code 0


@pytest.mark.parametrize(("K", "G", "needle"), [(96, 32, "K divisible by 64"), (128, 32, "multiple of 64")])
def test_refusals(K: int, G: int, needle: str) -> None:
    codes = np.zeros((16, K), dtype=np.uint8)
    with pytest.raises(InputError, match=needle):
        if K % 64:
            pack_w4.pack_w4_tc(codes)
        else:
            pack_w4.pack_w4a16_tc(quant.W4(codes, np.ones((16, K // G), np.float16), np.zeros((16, K // G), np.uint8),
                                           G))
