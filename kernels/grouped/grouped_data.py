"""Device data of the grouped MoE kernels (kernels/grouped/grouped.py): random expert weights as the kernels store them,
one expert dequantized to float64 (the reference's operand), and the gate+up row order of the fused SiLU·mul epilogue.
CuPy is imported inside functions; `interleave_gate_up` and `silu_mul` also run on NumPy."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from kernels import problems
from kernels.quant import pack_q8, pack_w4, quant
from models.errors import InputError

G = 128  # W4A16 group size of the grouped kernels


def random_weights(scheme: str, experts: int, N: int, K: int, seed: int) -> tuple[Any, ...]:
    """Weights of every expert, stacked [E * N, ...], as random valid bit patterns (see the module doc), drawn a few
    experts at a time (int32 draws: the only integer type CuPy's randint takes)."""
    import cupy as cp

    rs = cp.random.RandomState(seed)
    rows = experts * N
    if scheme == "fp8":
        return random_fp8(rs, rows, K), (rs.uniform(0.5, 1.5, size=experts) * 0.01).astype(cp.float32)
    if scheme == "bf16":
        out = cp.empty((rows, K), dtype=cp.uint16)
    else:
        out = cp.empty((rows, K // 8), dtype=cp.uint32)
        sz = cp.empty((rows, K // G), dtype=cp.uint32)
    step = max(1, (1 << 26) // max(K, 1))  # rows per draw: 64 M values
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        if scheme == "bf16":
            v = rs.randint(0, 1 << 30, size=(r1 - r0, K), dtype=cp.int32).view(cp.uint32)
            exp = (cp.uint32(0x76) + (v >> 16) % cp.uint32(3)) << 7  # 2^-9 .. 2^-7 times 1.m
            out[r0:r1] = ((v & cp.uint32(0x807F)) | exp).astype(cp.uint16)
        else:
            hi = rs.randint(0, 1 << 16, size=(r1 - r0, K // 8), dtype=cp.int32).view(cp.uint32)
            lo = rs.randint(0, 1 << 16, size=(r1 - r0, K // 8), dtype=cp.int32).view(cp.uint32)
            out[r0:r1] = (hi << 16) | lo
            scales = (rs.uniform(0.5, 1.5, size=(r1 - r0, K // G)) * 0.02).astype(cp.float16)
            zeros = rs.randint(0, 16, size=(r1 - r0, K // G), dtype=cp.int32)
            sz[r0:r1] = pack_w4.pack_scale_zero(scales, zeros, cp)
    return (out,) if scheme == "bf16" else (out, sz)


def random_fp8(rs: Any, rows: int, K: int) -> Any:
    """uint32 [rows, K / 4]: four e4m3 codes a word, random sign and mantissa, exponent field 5-8 (0.25 to 3.75; never
    NaN), drawn from two 16-bit draws a word, a few rows at a time."""
    import cupy as cp

    out = cp.empty((rows, K // 4), dtype=cp.uint32)
    step = max(1, (1 << 26) // max(K // 4, 1))
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        hi = rs.randint(0, 1 << 16, size=(r1 - r0, K // 4), dtype=cp.int32).view(cp.uint32)
        lo = rs.randint(0, 1 << 16, size=(r1 - r0, K // 4), dtype=cp.int32).view(cp.uint32)
        v = (hi << 16) | lo
        exp = ((v >> 3) & cp.uint32(0x03030303)) + cp.uint32(0x05050505)  # per byte 5..8: no carry between bytes
        out[r0:r1] = (v & cp.uint32(0x87878787)) | (exp << 3)
    return out


def dequantized(kernel: str, weights: tuple[Any, ...], expert: int, N: int, K: int) -> Any:
    """One expert's weights as float64 [N, K] on the device (the reference's operand)."""
    import cupy as cp

    sl = slice(expert * N, (expert + 1) * N)
    if kernel == "grouped_fp8_tc":  # pack_q8_tc words [N/16, K/64, 2, 32, 4] per expert, one fp32 scale
        codes = pack_q8.unpack_q8_tc(weights[0][sl].reshape(N // 16, K // 64, 2, 32, 4), N, cp)
        return problems.dequantize(quant.FP8(codes, weights[1][expert:expert + 1], "tensor"))
    if kernel in ("grouped_bf16_tc", "grouped_bf16_tc_silu"):  # each expert's pack_f16_tc layout: unpack it
        packed = weights[0][sl].reshape(N // 16, K // 64, 2, 2, 8, 4, 8)  # (T, c, h, e, g, t, elem)
        bits = cp.ascontiguousarray(packed.transpose(0, 3, 4, 1, 2, 5, 6)).reshape(N, K)
        return quant.from_bf16_bits(bits, cp).astype(cp.float64)
    if kernel in ("grouped_bf16", "grouped_bf16_wg"):
        return quant.from_bf16_bits(weights[0][sl], cp).astype(cp.float64)
    if kernel == "grouped_w4a16_tc":  # pack_w4a16_tc layouts: codes [N/16, K/64, 32, 4], scale+zero [N/16, K/G, 16]
        codes = pack_w4.unpack_w4_tc(weights[0][sl].reshape(N // 16, K // 64, 32, 4), N, cp).astype(cp.float64)
        sz = cp.ascontiguousarray(weights[1][sl].reshape(N // 16, K // G, 16).transpose(0, 2, 1)).reshape(N, K // G)
    else:
        codes = pack_w4.unpack_w4_fast(weights[0][sl], cp).astype(cp.float64)
        sz = weights[1][sl]
    scale = cp.ascontiguousarray((sz & 0xFFFF).astype(cp.uint16)).view(cp.float16).astype(cp.float64)
    zero = cp.ascontiguousarray((sz >> 16).astype(cp.uint16)).view(cp.float16).astype(cp.float64) - 1024.0
    g = codes.reshape(N, K // G, G)
    return ((g - zero[..., None]) * scale[..., None]).reshape(N, K)


def interleave_gate_up(w: Any, xp: ModuleType = np) -> Any:
    """A fused [gate; up] weight ([2 I, K], gate rows first) in the fused SiLU·mul kernel's row order: 16-row tile T
    holds gate rows 8 T .. 8 T + 7, then up rows 8 T .. 8 T + 7 (I % 8 == 0); pack it as bf16 then (pack_f16_tc)."""
    w = xp.asarray(w)
    if w.ndim != 2 or w.shape[0] % 16:
        raise InputError(f"gate+up weight must be [2 I, K] with I a multiple of 8, got shape {tuple(w.shape)}")
    half = w.shape[0] // 2
    return xp.ascontiguousarray(xp.stack([w[:half].reshape(half // 8, 8, -1), w[half:].reshape(half // 8, 8, -1)],
                                         axis=1).reshape(w.shape))


def silu_mul(y: Any, interleaved: bool, xp: ModuleType = np) -> Any:
    """silu(gate) * up of a gate+up output y [R, 2 I]: gate and up columns interleaved by 8 (the fused kernel's order,
    interleave_gate_up) or the halves [gate | up] (the unfused kernel's output)."""
    R, N = y.shape
    if interleaved:
        t = y.reshape(R, N // 16, 2, 8)
        g, u = t[:, :, 0, :].reshape(R, N // 2), t[:, :, 1, :].reshape(R, N // 2)
    else:
        g, u = y[:, : N // 2], y[:, N // 2:]
    return g / (1.0 + xp.exp(-g)) * u
