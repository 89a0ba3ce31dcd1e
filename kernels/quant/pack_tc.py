"""Offline reorder of W4A16 weights for the tensor-core kernel (kernels/tensorcore/tc_gemm_w4a16.cu), array-module
agnostic.

The canonical codes (kernels.quant.quant.W4: uint8 [N, K] in 0..15, fp16 scales and uint8 zeros [N, K/128]) are cut into
128 x 128 blocks, one per (n-tile, k-tile), stored block after block (tile id nt * K/128 + kt). Inside a block,
32-bit word ((w*4 + j)*32 + lane)*4 + e is the word warp w, lane `lane` reads as the e-th word of its j-th 16-byte
load; its nibble i = 4*hsel + 2*pp + reg is the code at

    column n = w*32 + (2*np + pp)*8 + lane//4      (np = e % 2)
    k        = ks*16 + reg*8 + (lane%4)*2 + hsel    (ks = 2*j + e//2)

which is exactly where mma.sync m16n8k16 wants weight (k, n) in the B fragment after the 0x6400 dequantization
(see the .cu). Scales and zeros: 128 (scale, zero) fp16 pairs per block, pair (w*8 + lane//4)*4 + nf for column
w*32 + nf*8 + lane//4, the zero stored as an exact fp16 integer.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from models.errors import InputError

Array = Any
TILE_N = 128
TILE_K = 128
GROUP = TILE_K  # one (scale, zero) pair per column and k-tile: the layout holds this group size only

# codes[n, k] viewed as C[nt, w, np, pp, g, kt, j, jj, reg, t, hsel] (n = nt*128 + w*32 + (2np+pp)*8 + g,
# k = kt*128 + (2j+jj)*16 + reg*8 + t*2 + hsel); the packed word order is (nt, kt, w, j, g, t, jj, np) and the
# nibble order (hsel, pp, reg).
_SPLIT = (TILE_N // 32, 2, 2, 8, TILE_K // 32, 2, 2, 4, 2)  # w, np, pp, g | j, jj, reg, t, hsel
_TO_PACKED = (0, 5, 1, 6, 4, 9, 7, 2, 10, 3, 8)


@dataclass(frozen=True)
class PackedW4:
    """The tensor-core kernel's W4A16 operands (device or host arrays)."""

    words: Array  # uint32 [N*K/8], block after block
    scale_zero: Array  # float16 [N/128 * K/128 * 128 * 2]: (scale, zero) pairs per block
    N: int
    K: int


def check_tc_w4_shape(N: int, K: int, group_size: int = GROUP) -> None:
    if group_size != GROUP:
        raise InputError(f"the tensor-core w4a16 kernel supports group size {GROUP} only, got {group_size}")
    if N <= 0 or K <= 0 or N % TILE_N or K % TILE_K:
        raise InputError(f"the tensor-core w4a16 kernel needs N and K multiples of {TILE_N}, got N={N}, K={K}")


def _code_grid(codes: Array, xp: ModuleType) -> Array:
    N, K = codes.shape
    return codes.reshape(N // TILE_N, *_SPLIT[:4], K // TILE_K, *_SPLIT[4:]).astype(xp.uint32)


def pack_codes(codes: Array, xp: ModuleType = np) -> Array:
    """uint8 codes [N, K] (0..15) -> the kernel's uint32 words [N*K/8]."""
    codes = xp.asarray(codes)
    N, K = codes.shape
    check_tc_w4_shape(N, K)
    c = xp.transpose(_code_grid(codes, xp), _TO_PACKED)  # (..., hsel, pp, reg)
    nib = c.reshape(*c.shape[:8], 8)
    words = xp.zeros(nib.shape[:8], dtype=xp.uint32)
    for i in range(8):
        words |= nib[..., i] << xp.uint32(4 * i)
    return words.reshape(-1)


def unpack_codes(words: Array, N: int, K: int, xp: ModuleType = np) -> Array:
    """Inverse of pack_codes: the uint8 codes [N, K]."""
    check_tc_w4_shape(N, K)
    words = xp.asarray(words, dtype=xp.uint32)
    shape = (N // TILE_N, K // TILE_K, 4, 4, 8, 4, 2, 2)
    if words.size != N * K // 8:
        raise InputError(f"packed w4 words hold {words.size} words, expected N*K/8 = {N * K // 8}")
    w = words.reshape(shape)
    nib = xp.stack([(w >> xp.uint32(4 * i)) & xp.uint32(0xF) for i in range(8)], axis=-1)
    c = nib.reshape(*shape, 2, 2, 2)
    grid = xp.transpose(c, tuple(int(i) for i in np.argsort(_TO_PACKED)))
    return grid.reshape(N, K).astype(xp.uint8)


def pack_scale_zero(scales: Array, zeros: Array, xp: ModuleType = np) -> Array:
    """fp16 scales and uint8 zeros [N, K/128] -> fp16 (scale, zero) pairs in block order."""
    scales = xp.asarray(scales, dtype=xp.float16)
    zeros = xp.asarray(zeros)
    N, G = scales.shape
    check_tc_w4_shape(N, G * GROUP)
    if zeros.shape != scales.shape:
        raise InputError(f"w4 zeros {tuple(zeros.shape)} and scales {tuple(scales.shape)} differ in shape")
    pair = xp.stack([scales, zeros.astype(xp.float16)], axis=-1)  # [N, G, 2]
    grid = pair.reshape(N // TILE_N, 4, 4, 8, G, 2)  # nt, w, nf, g, kt, 2
    return xp.ascontiguousarray(xp.transpose(grid, (0, 4, 1, 3, 2, 5))).reshape(-1)


def unpack_scale_zero(packed: Array, N: int, K: int, xp: ModuleType = np) -> tuple[Array, Array]:
    """Inverse of pack_scale_zero: (fp16 scales, uint8 zeros) [N, K/128]."""
    check_tc_w4_shape(N, K)
    G = K // GROUP
    grid = xp.asarray(packed, dtype=xp.float16).reshape(N // TILE_N, G, 4, 8, 4, 2)  # nt, kt, w, g, nf, 2
    pair = xp.transpose(grid, (0, 2, 4, 3, 1, 5)).reshape(N, G, 2)
    return pair[..., 0], pair[..., 1].astype(xp.uint8)


def pack_w4(q: Any, xp: ModuleType = np) -> PackedW4:
    """A kernels.quant.quant.W4 -> the tensor-core kernel's operands."""
    N, K = q.codes.shape
    check_tc_w4_shape(N, K, q.group_size)
    return PackedW4(pack_codes(q.codes, xp), pack_scale_zero(q.scales, q.zeros, xp), N, K)


def fragment_code(words: Array, N: int, K: int, n: int, k: int) -> int:
    """The code the kernel decodes for weight (n, k), computed with the kernel's own index and bit arithmetic
    (a check of the layout that does not reuse pack_codes' transposes)."""
    nt, kt = n // TILE_N, k // TILE_K
    nn, kk = n % TILE_N, k % TILE_K
    w, nf, lane_g = nn // 32, (nn % 32) // 8, nn % 8
    ks, reg, t, hsel = kk // 16, (kk % 16) // 8, (kk % 8) // 2, kk % 2
    np_, pp = nf // 2, nf % 2
    j, jj = ks // 2, ks % 2
    lane = lane_g * 4 + t
    e = jj * 2 + np_
    word = int(words[(nt * (K // TILE_K) + kt) * 2048 + ((w * 4 + j) * 32 + lane) * 4 + e])
    # the kernel's extraction: p0 = w & 0x000F000F, p1 = (w & 0x00F000F0) >> 4, p2/p3 the same on w >> 8;
    # pair p = 2*pp + reg, low half -> hsel 0, high half -> hsel 1
    p = 2 * pp + reg
    src = word >> 8 if p >= 2 else word
    shift = (4 if p % 2 else 0) + (16 if hsel else 0)
    return (src >> shift) & 0xF
