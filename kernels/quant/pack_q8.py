"""8-bit weights (e4m3 or int8 codes, [N, K]) in the fragment order of the 8-bit tensor-core GEMV
(kernels/tcgemv/gemv_q8_tc.cu): one 16-byte load of a lane is one mma.sync m16n8k32 A fragment.

Row tile T holds channels 16 T .. 16 T + 15; chunk c of K holds k = 64 c .. 64 c + 63 in two k-steps s; lane
(g, t) of k-step s reads channels g and g + 8 at k0 = 64 c + 16 t + 8 s .. + 7 as four words (ch g, k0..3),
(ch g + 8, k0..3), (ch g, k0 + 4..7), (ch g + 8, k0 + 4..7), lowest k in the lowest byte. Works on NumPy or CuPy.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from models.errors import InputError

ROWS, CHUNK = 16, 64  # channels per row tile (the mma's m), k per chunk (two m16n8k32 k-steps)
# codes [T, h, g, chunk, t, s, half, i] (channel 16 T + 8 h + g, k = 64 chunk + 16 t + 8 s + 4 half + i) ->
# [T, chunk, s, g, t, half, h, i]: a lane's 16 bytes are (half, h) words of four k bytes each.
_ORDER = (0, 3, 5, 2, 4, 6, 1, 7)


def pack_q8_tc(codes: Any, xp: ModuleType = np) -> Any:
    """uint32 [ceil(N/16), K/64, 2, 32, 4] from 8-bit codes [N, K] (any 1-byte dtype); channels past N are 0."""
    codes = xp.asarray(codes)
    if codes.ndim != 2 or codes.dtype.itemsize != 1:
        raise InputError(f"8-bit codes must be a 2-D array of 1-byte values, got shape {codes.shape} "
                         f"dtype {codes.dtype}")
    N, K = codes.shape
    if K % CHUNK:
        raise InputError(f"the 8-bit tensor-core GEMV needs K divisible by {CHUNK}, got K={K}")
    T = -(-N // ROWS)
    c = xp.zeros((T * ROWS, K), dtype=xp.uint8)
    c[:N] = codes.view(xp.uint8)
    c = c.reshape(T, 2, 8, K // CHUNK, 4, 2, 2, 4).transpose(_ORDER)
    return xp.ascontiguousarray(c).reshape(T, K // CHUNK, 2, 32, 16).view(xp.uint32)


def unpack_q8_tc(words: Any, N: int, xp: ModuleType = np) -> Any:
    """uint8 codes [N, K] back from pack_q8_tc's words (the tests' inverse)."""
    words = xp.ascontiguousarray(xp.asarray(words, dtype=xp.uint32))
    T, C = words.shape[:2]
    b = words.view(xp.uint8).reshape(T, C, 2, 8, 4, 2, 2, 4)
    inverse = tuple(int(i) for i in np.argsort(_ORDER))
    return xp.ascontiguousarray(b.transpose(inverse)).reshape(T * ROWS, C * CHUNK)[:N]


def pack_w8a16_tc(codes: Any, xp: ModuleType = np) -> Any:
    """The W8A16 tensor-core GEMV's words (kernels/tcgemv/gemv_w8a16_tc.cu) from int8 codes [N, K]: pack_q8_tc's
    fragment order with every byte stored as q ^ 0x80 (= q + 128 as an unsigned byte, what the kernel's magic-number
    conversion reads); the channels past N hold q = 0."""
    codes = xp.asarray(codes)
    if codes.dtype != xp.int8:
        raise InputError(f"W8A16 codes must be int8, got dtype {codes.dtype}")
    return pack_q8_tc(codes, xp) ^ xp.uint32(0x80808080)


WG_ROWS, WG_CHUNK = 64, 64  # the W8A16 wgmma kernel's block: channels (one warpgroup's m64) x k
# codes [B, w, ih, g, C, j, h, half, t, il] (channel 64 B + 16 w + 8 ih + g, k = 64 C + 32 j + 16 h + 8 half + 2 t + il)
# -> [B, C, w, j, g, t, h, half, ih, il]: lane (g, t)'s 16 bytes of word j are four words (h, half) of the A registers
# {ch g, ch g + 8} x {k, k + 1}.
_WG_ORDER = (0, 4, 1, 5, 3, 8, 6, 7, 2, 9)


def pack_w8a16_wg(codes: Any, xp: ModuleType = np) -> Any:
    """The W8A16 wgmma GEMM's bytes (kernels/wgmma/wg_gemm_w8a16.cu) from int8 codes [N, K], N and K multiples of 64:
    uint8 [N/64, K/64, 4096], each 64 x 64 block in the m64k16 A-fragment order of its warpgroup's four warps, every
    byte stored as q ^ 0x80 (= q + 128)."""
    codes = xp.asarray(codes)
    if codes.ndim != 2 or codes.dtype != xp.int8:
        raise InputError(f"W8A16 codes must be a 2-D int8 array, got shape {codes.shape} dtype {codes.dtype}")
    N, K = codes.shape
    if N % WG_ROWS or K % WG_CHUNK:
        raise InputError(f"the W8A16 wgmma layout needs N and K multiples of {WG_ROWS}, got N={N}, K={K}")
    c = codes.view(xp.uint8).reshape(N // 64, 4, 2, 8, K // 64, 2, 2, 2, 4, 2).transpose(_WG_ORDER)
    return xp.ascontiguousarray(c).reshape(N // 64, K // 64, 4096) ^ xp.uint8(0x80)


def unpack_w8a16_wg(packed: Any, xp: ModuleType = np) -> Any:
    """int8 codes [N, K] back from pack_w8a16_wg's bytes (the tests' inverse)."""
    b = xp.ascontiguousarray(xp.asarray(packed, dtype=xp.uint8)) ^ xp.uint8(0x80)
    nb, kc = b.shape[:2]
    b = b.reshape(nb, kc, 4, 2, 8, 4, 2, 2, 2, 2).transpose(tuple(int(i) for i in np.argsort(_WG_ORDER)))
    return xp.ascontiguousarray(b).reshape(nb * 64, kc * 64).view(xp.int8)
