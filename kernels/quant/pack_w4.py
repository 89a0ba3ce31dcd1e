"""Offline packing of canonical W4 codes into the layouts of the optimized W4A16 kernels: the CUDA-core GEMV
(gemv_w4a16.cu, `pack_w4a16`) and the tensor-core GEMV (gemv_w4a16_tc.cu, `pack_w4a16_tc`).

Weights: uint32 [N, K/8]; word j of a row holds k = 8j..8j+7 with element e in nibble slot e/2 (e even) or 4 + e/2
(e odd), so `(w >> 4i) & 0x000F000F` extracts the in-order pair (8j + 2i, 8j + 2i + 1) into the two halves of a half2
(the 0x6400 magic-number conversion). Four consecutive words are one 16-byte chunk of 32 weights.
Scales and zeros: uint32 [N, K/G], low half = fp16 scale s, high half = fp16 (1024 + z): one 4-byte load per chunk
gives both the scale and the constant that removes the magic number's 1024 and the zero point in one hsub2.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from kernels.quant.quant import W4, check_w4_shape
from models.errors import InputError

NIBBLE_SLOT = (0, 4, 1, 5, 2, 6, 3, 7)  # element e of a word -> nibble slot


def pack_w4_fast(codes: Any, xp: ModuleType = np) -> Any:
    codes = xp.asarray(codes)
    N, K = codes.shape
    if K % 32:
        raise InputError(f"the fast w4a16 layout needs K divisible by 32, got K={K}")
    c = codes.astype(xp.uint32).reshape(N, K // 8, 8)
    out = xp.zeros((N, K // 8), dtype=xp.uint32)
    for e, slot in enumerate(NIBBLE_SLOT):
        out |= c[:, :, e] << xp.uint32(4 * slot)
    return out


def unpack_w4_fast(words: Any, xp: ModuleType = np) -> Any:
    words = xp.asarray(words, dtype=xp.uint32)
    N, K8 = words.shape
    parts = [((words >> xp.uint32(4 * slot)) & xp.uint32(0xF)).astype(xp.uint8) for slot in NIBBLE_SLOT]
    return xp.stack(parts, axis=2).reshape(N, K8 * 8)


def pack_scale_zero(scales: Any, zeros: Any, xp: ModuleType = np) -> Any:
    s = xp.ascontiguousarray(xp.asarray(scales, dtype=xp.float16)).view(xp.uint16).astype(xp.uint32)
    z = (xp.asarray(zeros).astype(xp.float32) + 1024.0).astype(xp.float16)
    zb = xp.ascontiguousarray(z).view(xp.uint16).astype(xp.uint32)
    return s | (zb << xp.uint32(16))


def pack_w4a16(q: W4, xp: ModuleType = np) -> tuple[Any, Any]:
    """(weights uint32 [N, K/8], scale+zero uint32 [N, K/G]) for gemv_w4a16.cu."""
    N, K = q.codes.shape
    check_w4_shape(N, K, q.group_size)
    G = q.group_size
    if G % 32 or G & (G - 1):
        raise InputError(f"the fast w4a16 kernel needs a power-of-two group size >= 32, got G={G}")
    return pack_w4_fast(q.codes, xp), pack_scale_zero(q.scales, q.zeros, xp)


# The tensor-core GEMV's nibble slot of (channel half h: channel g or g + 8, k offset j in 0..3) within a word.
TC_SLOT = ((0, 4, 1, 5), (2, 6, 3, 7))
TC_ROWS, TC_CHUNK = 16, 64  # channels per row tile, k per 16-byte load of a lane


def pack_w4_tc(codes: Any, xp: ModuleType = np) -> Any:
    """uint32 [ceil(N/16), K/64, 32, 4]: tile T, chunk c, lane (g, t), word s holds channels 16T + g (+ 8) at
    k = 64c + 16t + 4s + (0..3), nibble slot TC_SLOT[h][j] (gemv_w4a16_tc.cu). Channels past N are code 0."""
    codes = xp.asarray(codes)
    N, K = codes.shape
    if K % TC_CHUNK:
        raise InputError(f"the tensor-core w4a16 layout needs K divisible by {TC_CHUNK}, got K={K}")
    T = -(-N // TC_ROWS)
    c = xp.zeros((T * TC_ROWS, K), dtype=xp.uint32)
    c[:N] = codes.astype(xp.uint32)
    # [T, h, g, chunk, t, s, j] -> [T, chunk, g, t, s, h, j]
    c = c.reshape(T, 2, 8, K // TC_CHUNK, 4, 4, 4).transpose(0, 3, 2, 4, 5, 1, 6)
    out = xp.zeros((T, K // TC_CHUNK, 8, 4, 4), dtype=xp.uint32)
    for h in range(2):
        for j in range(4):
            out |= c[..., h, j] << xp.uint32(4 * TC_SLOT[h][j])
    return xp.ascontiguousarray(out.reshape(T, K // TC_CHUNK, 32, 4))


def unpack_w4_tc(words: Any, N: int, xp: ModuleType = np) -> Any:
    """Canonical codes [N, K] back from pack_w4_tc's words (the tests' inverse)."""
    words = xp.asarray(words, dtype=xp.uint32)
    T, C = words.shape[:2]
    w = words.reshape(T, C, 8, 4, 4)
    parts = xp.zeros((T, C, 8, 4, 4, 2, 4), dtype=xp.uint8)
    for h in range(2):
        for j in range(4):
            parts[..., h, j] = ((w >> xp.uint32(4 * TC_SLOT[h][j])) & xp.uint32(0xF)).astype(xp.uint8)
    return parts.transpose(0, 5, 2, 1, 3, 4, 6).reshape(T * TC_ROWS, C * TC_CHUNK)[:N]


def pack_w4a16_tc(q: W4, xp: ModuleType = np) -> tuple[Any, Any]:
    """(weights uint32 [ceil(N/16), K/64, 32, 4], scale+zero uint32 [ceil(N/16), K/G, 16]) for gemv_w4a16_tc.cu;
    channels past N have scale 0 and code 0."""
    N, K = q.codes.shape
    check_w4_shape(N, K, q.group_size)
    G = q.group_size
    if G % TC_CHUNK:
        raise InputError(f"the tensor-core w4a16 GEMV needs a group size that is a multiple of {TC_CHUNK}, got G={G}")
    T = -(-N // TC_ROWS)
    sz = xp.zeros((T * TC_ROWS, K // G), dtype=xp.uint32)
    sz[:N] = pack_scale_zero(q.scales, q.zeros, xp)
    sz = xp.ascontiguousarray(sz.reshape(T, TC_ROWS, K // G).transpose(0, 2, 1))
    return pack_w4_tc(q.codes, xp), sz
