"""Offline packing of canonical W4 codes into the layout the optimized W4A16 kernel (gemv_w4a16.cu) reads.

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

from kernels.quant import W4, check_w4_shape
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
