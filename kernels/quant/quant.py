"""Canonical quantizers and dequantizers for every runnable scheme, array-module agnostic.

Every function takes an `xp` (numpy or cupy) and returns arrays of that module. These are the *canonical* codes: each
kernel's own offline reorder/packing starts from them (see kernels/quant/pack_w4.py for the fast W4A16 layout).

Conventions (N x K weight, N outputs, K the reduction; M x K activations):
- W4: asymmetric, groups of G along K: w ~ (q - z) * s, q and z in 0..15, s fp16 per (row, group).
- W8: symmetric per output row: w ~ q * s, q in -127..127, s fp16 per row.
- activations int8: symmetric per token (row of x): x ~ q * s, s float32 per row.
- FP8: e4m3 "fn" (no infinities, 0x7F/0xFF are NaN, max 448), w ~ decode(code) * s, s float32 per tensor or per row.
- bf16: NumPy has no bfloat16, so bf16 values travel as uint16 bit patterns (round-to-nearest-even).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from models.errors import InputError

Array = Any  # numpy.ndarray or cupy.ndarray
E4M3_MAX = 448.0
INT8_MAX = 127


# ---------------------------------------------------------------- helpers


def _as2d(w: Array, xp: ModuleType, what: str) -> Array:
    w = xp.asarray(w, dtype=xp.float64)
    if w.ndim != 2:
        raise InputError(f"{what} must be a 2-D array, got shape {tuple(w.shape)}")
    if w.size and not bool(xp.isfinite(w).all()):
        raise InputError(f"{what} holds NaN or infinite values; only finite values can be quantized")
    return w


def _rng(seed: int | None, xp: ModuleType) -> Any:
    return xp.random.RandomState(seed)


# ---------------------------------------------------------------- W4 (int4, groups of G, scale + zero)


@dataclass(frozen=True)
class W4:
    codes: Array  # uint8 [N, K], 0..15
    scales: Array  # float16 [N, K/G]
    zeros: Array  # uint8 [N, K/G], 0..15
    group_size: int

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.codes.shape)  # type: ignore[return-value]


def check_w4_shape(N: int, K: int, group_size: int) -> None:
    if group_size <= 0 or group_size % 8:
        raise InputError(f"w4 group size must be a positive multiple of 8, got {group_size}")
    if K % group_size:
        raise InputError(f"w4 needs K divisible by the group size: K={K}, G={group_size}")
    if N <= 0 or K <= 0:
        raise InputError(f"w4 needs N, K > 0, got N={N}, K={K}")


def quantize_w4(w: Array, group_size: int = 128, xp: ModuleType = np) -> W4:
    """Asymmetric int4 per group of `group_size` along K; the range always includes 0 (so 0 is exact)."""
    w = _as2d(w, xp, "w4 weight")
    N, K = w.shape
    check_w4_shape(N, K, group_size)
    g = w.reshape(N, K // group_size, group_size)
    lo = xp.minimum(g.min(axis=2), 0.0)
    hi = xp.maximum(g.max(axis=2), 0.0)
    span = hi - lo
    scale = xp.where(span > 0, span / 15.0, 1.0).astype(xp.float16)
    s = scale.astype(xp.float64)
    zero = xp.clip(xp.rint(-lo / s), 0, 15)
    q = xp.clip(xp.rint(g / s[..., None]) + zero[..., None], 0, 15)
    return W4(q.reshape(N, K).astype(xp.uint8), scale, zero.astype(xp.uint8), group_size)


def dequantize_w4(q: W4, xp: ModuleType = np) -> Array:
    N, K = q.codes.shape
    G = q.group_size
    codes = xp.asarray(q.codes).astype(xp.float64).reshape(N, K // G, G)
    z = xp.asarray(q.zeros).astype(xp.float64)[..., None]
    s = xp.asarray(q.scales).astype(xp.float64)[..., None]
    return ((codes - z) * s).reshape(N, K)


def random_w4(N: int, K: int, group_size: int = 128, seed: int | None = 0, xp: ModuleType = np) -> W4:
    """Random codes, zeros and positive fp16 scales drawn directly (timing sets): never all zeros."""
    check_w4_shape(N, K, group_size)
    r = _rng(seed, xp)
    codes = r.randint(0, 16, size=(N, K)).astype(xp.uint8)
    zeros = r.randint(0, 16, size=(N, K // group_size)).astype(xp.uint8)
    scales = (r.uniform(0.5, 1.5, size=(N, K // group_size)) * 0.02).astype(xp.float16)
    return W4(codes, scales, zeros, group_size)


def pack_w4_reference(codes: Array, xp: ModuleType = np) -> Array:
    """Eight 4-bit codes per uint32, low nibble first (weight 8k + j in bits 4j..4j+3 of word k): the chapter's."""
    codes = xp.asarray(codes)
    N, K = codes.shape
    if K % 8:
        raise InputError(f"w4 packing needs K divisible by 8, got K={K}")
    c = codes.astype(xp.uint32).reshape(N, K // 8, 8)
    out = xp.zeros((N, K // 8), dtype=xp.uint32)
    for j in range(8):
        out |= c[:, :, j] << xp.uint32(4 * j)
    return out


def unpack_w4_reference(words: Array, xp: ModuleType = np) -> Array:
    words = xp.asarray(words, dtype=xp.uint32)
    N, K8 = words.shape
    parts = [((words >> xp.uint32(4 * j)) & xp.uint32(0xF)).astype(xp.uint8) for j in range(8)]
    return xp.stack(parts, axis=2).reshape(N, K8 * 8)


# ---------------------------------------------------------------- W8 (int8 per row, symmetric)


@dataclass(frozen=True)
class W8:
    codes: Array  # int8 [N, K]
    scales: Array  # float16 [N]


def quantize_w8(w: Array, xp: ModuleType = np) -> W8:
    w = _as2d(w, xp, "w8 weight")
    amax = xp.abs(w).max(axis=1)
    scale = xp.where(amax > 0, amax / INT8_MAX, 1.0).astype(xp.float16)
    s = scale.astype(xp.float64)
    q = xp.clip(xp.rint(w / s[:, None]), -INT8_MAX, INT8_MAX).astype(xp.int8)
    return W8(q, scale)


def dequantize_w8(q: W8, xp: ModuleType = np) -> Array:
    return xp.asarray(q.codes).astype(xp.float64) * xp.asarray(q.scales).astype(xp.float64)[:, None]


def random_w8(N: int, K: int, seed: int | None = 0, xp: ModuleType = np) -> W8:
    r = _rng(seed, xp)
    codes = r.randint(-INT8_MAX, INT8_MAX + 1, size=(N, K)).astype(xp.int8)
    scales = (r.uniform(0.5, 1.5, size=N) * 1e-3).astype(xp.float16)
    return W8(codes, scales)


# ---------------------------------------------------------------- int8 activations (per token)


def quantize_act_int8(x: Array, xp: ModuleType = np) -> tuple[Array, Array]:
    """Per-token symmetric int8: returns (codes int8 [M, K], scales float32 [M])."""
    x = _as2d(x, xp, "activation")
    amax = xp.abs(x).max(axis=1)
    scale = xp.where(amax > 0, amax / INT8_MAX, 1.0).astype(xp.float32)
    q = xp.clip(xp.rint(x / scale.astype(xp.float64)[:, None]), -INT8_MAX, INT8_MAX).astype(xp.int8)
    return q, scale


def dequantize_act_int8(codes: Array, scales: Array, xp: ModuleType = np) -> Array:
    return xp.asarray(codes).astype(xp.float64) * xp.asarray(scales).astype(xp.float64)[:, None]


# ---------------------------------------------------------------- FP8 e4m3


def e4m3_table(xp: ModuleType = np) -> Array:
    """float64 value of each of the 256 e4m3fn bit patterns (sign, 4 exponent bits with bias 7, 3 mantissa bits)."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = codes & 0x7
    normal = (1.0 + man / 8.0) * np.exp2(exp - 7.0)
    subnormal = (man / 8.0) * 2.0**-6
    val = sign * np.where(exp == 0, subnormal, normal)
    val[(codes & 0x7F) == 0x7F] = np.nan
    return xp.asarray(val)


def encode_e4m3(v: Array, xp: ModuleType = np) -> Array:
    """Round float values to e4m3fn codes (nearest, ties to even mantissa), saturating at +-448."""
    v = xp.asarray(v, dtype=xp.float64)
    pos = e4m3_table(xp)[:0x7F]  # codes 0..126, increasing
    a = xp.minimum(xp.abs(v), E4M3_MAX)
    hi = xp.clip(xp.searchsorted(pos, a, side="left"), 0, 0x7E)
    lo = xp.maximum(hi - 1, 0)
    d_lo = a - pos[lo]
    d_hi = pos[hi] - a
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = xp.where(take_hi, hi, lo).astype(xp.uint8)
    neg = xp.signbit(v)  # -0.0 and negatives that round to zero keep the sign, as IEEE-style casts do
    return xp.where(neg, code | xp.uint8(0x80), code).astype(xp.uint8)


def decode_e4m3(codes: Array, xp: ModuleType = np) -> Array:
    return e4m3_table(xp)[xp.asarray(codes).astype(xp.int64)]


@dataclass(frozen=True)
class FP8:
    codes: Array  # uint8 e4m3fn bit patterns [N, K]
    scales: Array  # float32 [1] (per tensor), [N] (per channel) or [ceil(N/br), ceil(K/bc)] (block)
    granularity: str  # "tensor", "channel" or "block"
    block: tuple[int, int] = (128, 128)  # (rows, columns) of one scale's block, for "block"


def _block_amax(w: Array, block: tuple[int, int], xp: ModuleType) -> Array:
    """max |w| over each (br x bc) block, the last blocks partial: [ceil(N/br), ceil(K/bc)]."""
    br, bc = block
    N, K = w.shape
    padded = xp.zeros((-(-N // br) * br, -(-K // bc) * bc), dtype=xp.float64)
    padded[:N, :K] = xp.abs(w)
    return padded.reshape(padded.shape[0] // br, br, padded.shape[1] // bc, bc).max(axis=(1, 3))


def _expand_blocks(s: Array, shape: tuple[int, int], block: tuple[int, int], xp: ModuleType) -> Array:
    return xp.repeat(xp.repeat(s, block[0], axis=0), block[1], axis=1)[: shape[0], : shape[1]]


def quantize_fp8(w: Array, per: str = "tensor", xp: ModuleType = np, block: tuple[int, int] = (128, 128)) -> FP8:
    """e4m3 codes with fp32 scales per tensor, per row ("channel"), or per (rows x columns) block: (128, 128) for
    weights and (1, 128) for activations in the DeepSeek-V3 scheme."""
    if per not in ("tensor", "channel", "block"):
        raise InputError(f"fp8 scale granularity {per!r} not supported; use 'tensor', 'channel' or 'block'")
    if per == "block" and (len(block) != 2 or min(block) < 1):
        raise InputError(f"fp8 block must be two positive sizes (rows, columns), got {block!r}")
    w = _as2d(w, xp, "fp8 weight")
    if per == "block":
        amax = _block_amax(w, block, xp)
    else:
        amax = xp.abs(w).max(axis=1) if per == "channel" else xp.abs(w).max().reshape(1)
    scale = xp.where(amax > 0, amax / E4M3_MAX, 1.0).astype(xp.float32)
    s = scale.astype(xp.float64)
    if per == "block":
        return FP8(encode_e4m3(w / _expand_blocks(s, w.shape, block, xp), xp), scale, per, tuple(block))
    return FP8(encode_e4m3(w / (s[:, None] if per == "channel" else s[0]), xp), scale, per)


def dequantize_fp8(q: FP8, xp: ModuleType = np) -> Array:
    s = xp.asarray(q.scales).astype(xp.float64)
    vals = decode_e4m3(q.codes, xp)
    if q.granularity == "block":
        return vals * _expand_blocks(s, vals.shape, q.block, xp)
    return vals * (s[:, None] if q.granularity == "channel" else s[0])


def random_fp8(N: int, K: int, per: str = "channel", seed: int | None = 0, xp: ModuleType = np) -> FP8:
    """Random finite e4m3 codes (never the NaN patterns) with positive scales."""
    r = _rng(seed, xp)
    codes = r.randint(0, 0x7F, size=(N, K)).astype(xp.uint8) | (r.randint(0, 2, size=(N, K)).astype(xp.uint8) << 7)
    n = N if per == "channel" else 1
    scales = (r.uniform(0.5, 1.5, size=n) * 1e-3).astype(xp.float32)
    return FP8(codes.astype(xp.uint8), scales, per)


# ---------------------------------------------------------------- bf16 as uint16 bits


def to_bf16_bits(x: Array, xp: ModuleType = np) -> Array:
    """float -> bf16 bit patterns (uint16), round-to-nearest-even; NaN stays a (quiet) NaN."""
    f = xp.asarray(x, dtype=xp.float32)
    bits = f.view(xp.uint32)
    rounded = (bits + xp.uint32(0x7FFF) + ((bits >> xp.uint32(16)) & xp.uint32(1))) >> xp.uint32(16)
    nan = xp.isnan(f)
    return xp.where(nan, (bits >> xp.uint32(16)) | xp.uint32(0x40), rounded).astype(xp.uint16)


def from_bf16_bits(bits: Array, xp: ModuleType = np) -> Array:
    """bf16 bit patterns (uint16) -> float32 (exact)."""
    b = xp.asarray(bits, dtype=xp.uint16).astype(xp.uint32) << xp.uint32(16)
    return b.view(xp.float32)


def round_bf16(x: Array, xp: ModuleType = np) -> Array:
    """x rounded to the nearest bf16, as float64."""
    return from_bf16_bits(to_bf16_bits(x, xp), xp).astype(xp.float64)


# ---------------------------------------------------------------- any format at any granularity (the error explorer)

FORMAT_BITS: dict[str, int] = {"int4": 4, "int8": 8, "fp8": 8}  # fp8 = e4m3fn
GRANULARITIES = ("tensor", "channel", "group", "block")  # block: size x size tiles of W (DeepSeek-V3: 128 x 128)
SCALE_DTYPES = ("fp16", "bf16", "fp32")
ZERO_STORAGE = ("int4", "int8", "fp16")  # how an asymmetric zero point is stored


@dataclass(frozen=True)
class Choice:
    """One way to quantize a weight: format, scale granularity (group/block size), symmetric or with a zero point."""

    fmt: str  # one of FORMAT_BITS
    granularity: str  # one of GRANULARITIES
    size: int = 0  # G along K for "group", the tile side for "block"
    symmetric: bool = True
    zero: str = "none"  # one of ZERO_STORAGE when asymmetric
    scale_dtype: str = "fp16"

    def check(self) -> Choice:
        if self.fmt not in FORMAT_BITS:
            raise InputError(f"unknown format {self.fmt!r}; valid: {', '.join(FORMAT_BITS)}")
        if self.granularity not in GRANULARITIES:
            raise InputError(f"unknown granularity {self.granularity!r}; valid: {', '.join(GRANULARITIES)}")
        if self.granularity in ("group", "block") and (isinstance(self.size, bool) or int(self.size) < 1):
            raise InputError(f"{self.granularity} granularity needs a positive size, got {self.size!r}")
        if self.scale_dtype not in SCALE_DTYPES:
            raise InputError(f"unknown scale dtype {self.scale_dtype!r}; valid: {', '.join(SCALE_DTYPES)}")
        if self.symmetric != (self.zero == "none"):
            raise InputError(f"a symmetric choice stores no zero point and an asymmetric one stores it as one of "
                             f"{', '.join(ZERO_STORAGE)}; got symmetric={self.symmetric}, zero={self.zero!r}")
        if not self.symmetric and (self.fmt == "fp8" or self.zero not in ZERO_STORAGE):
            raise InputError(f"zero points apply to int4/int8 only, stored as {', '.join(ZERO_STORAGE)}; got "
                             f"{self.fmt} with zero={self.zero!r}")
        return self


def _units(w: Array, c: Choice, xp: ModuleType) -> tuple[Array, Any]:
    """w as rows of one scale each ([units, elements]) and the function putting such rows back into w's shape."""
    N, K = w.shape
    if c.granularity == "tensor":
        return w.reshape(1, N * K), lambda u: u.reshape(N, K)
    if c.granularity == "channel":
        return w, lambda u: u
    b = int(c.size)
    if c.granularity == "group":
        if K % b:
            raise InputError(f"K={K} is not divisible by the group size {b}; use a group size that divides K")
        return w.reshape(N * (K // b), b), lambda u: u.reshape(N, K)
    Np, Kp = -(-N // b) * b, -(-K // b) * b  # block: partial edge tiles padded with zeros
    p = xp.zeros((Np, Kp), dtype=xp.float64)
    p[:N, :K] = w
    tiles = p.reshape(Np // b, b, Kp // b, b).transpose(0, 2, 1, 3).reshape(-1, b * b)
    return tiles, lambda u: u.reshape(Np // b, Kp // b, b, b).transpose(0, 2, 1, 3).reshape(Np, Kp)[:N, :K]


def _round_to(v: Array, dtype: str, xp: ModuleType) -> Array:
    if dtype == "fp16":
        return v.astype(xp.float16).astype(xp.float64)
    if dtype == "bf16":
        return round_bf16(v, xp)
    return v.astype(xp.float32).astype(xp.float64)


def fake_quantize(w: Array, choice: Choice, xp: ModuleType = np) -> Array:
    """w quantized by `choice` and dequantized again (float64, w's shape). The arithmetic is that of the canonical
    quantizers above: int4 groups asymmetric with a 4-bit zero and fp16 scales = quantize_w4, int8 per channel
    symmetric = quantize_w8, fp8 per tensor / channel / block with fp32 scales = quantize_fp8 (tests check it)."""
    c = choice.check()
    w = _as2d(w, xp, "weight")
    u, back = _units(w, c, xp)
    bits = FORMAT_BITS[c.fmt]
    if c.fmt == "fp8":
        amax = xp.abs(u).max(axis=1, keepdims=True)
        s = _round_to(xp.where(amax > 0, amax / E4M3_MAX, 1.0), c.scale_dtype, xp)
        return back(decode_e4m3(encode_e4m3(u / s, xp), xp) * s)
    if c.symmetric:
        qmax = 2 ** (bits - 1) - 1
        amax = xp.abs(u).max(axis=1, keepdims=True)
        s = _round_to(xp.where(amax > 0, amax / qmax, 1.0), c.scale_dtype, xp)
        return back(xp.clip(xp.rint(u / s), -qmax, qmax) * s)
    levels = 2**bits - 1
    lo = xp.minimum(u.min(axis=1, keepdims=True), 0.0)  # the range always holds 0, as in quantize_w4
    hi = xp.maximum(u.max(axis=1, keepdims=True), 0.0)
    s = _round_to(xp.where(hi - lo > 0, (hi - lo) / levels, 1.0), c.scale_dtype, xp)
    if c.zero == "fp16":
        z = (-lo / s).astype(xp.float16).astype(xp.float64)
    else:
        z = xp.clip(xp.rint(-lo / s), 0, 2 ** int(c.zero[3:]) - 1)
    return back((xp.clip(xp.rint(u / s + z), 0, levels) - z) * s)
