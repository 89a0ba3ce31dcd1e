"""float64 references y = x @ W.T, array-module agnostic (NumPy on CPU, CuPy in float64 on the GPU).

Two references per quantized kernel, kept apart as the chapter insists:
- `reference_dequant`: from the *dequantized* weights (and the activations as the kernel sees them): the kernel error.
- `reference_float`: from the original float weights and activations: the quantization error.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from kernels.quant import quant
from models.errors import InputError

Array = Any


def matmul_t(x: Array, w: Array, xp: ModuleType = np) -> Array:
    """y = x @ w.T in float64 (x: M x K, w: N x K)."""
    x = xp.asarray(x, dtype=xp.float64)
    w = xp.asarray(w, dtype=xp.float64)
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        raise InputError(f"reference needs x (M x K) and w (N x K) with equal K, got {x.shape} and {w.shape}")
    return x @ w.T


def dequantize(scheme: str, weights: Any, xp: ModuleType = np) -> Array:
    """float64 N x K weights from a scheme's canonical quantized form (or a float array for fp32/fp16/bf16)."""
    if isinstance(weights, quant.W4):
        return quant.dequantize_w4(weights, xp)
    if isinstance(weights, quant.W8):
        return quant.dequantize_w8(weights, xp)
    if isinstance(weights, quant.FP8):
        return quant.dequantize_fp8(weights, xp)
    if scheme == "bf16" and xp.asarray(weights).dtype == xp.uint16:
        return quant.from_bf16_bits(weights, xp).astype(xp.float64)
    return xp.asarray(weights, dtype=xp.float64)


def reference_dequant(x: Array, scheme: str, weights: Any, xp: ModuleType = np) -> Array:
    """The kernel's target: x (as the kernel reads it, float64) times the dequantized weights."""
    return matmul_t(x, dequantize(scheme, weights, xp), xp)


def reference_float(x: Array, w: Array, xp: ModuleType = np) -> Array:
    """The unquantized target: float x times float w."""
    return matmul_t(x, w, xp)


def rel_error(y: Array, ref: Array, xp: ModuleType | None = None) -> float:
    """||y - ref|| / ||ref|| (Frobenius), inf if y holds a NaN or ref is all zeros."""
    if xp is None:
        xp = _module_of(y)
    if xp is np:  # a device array beside a host one (a reference kept on the device): both on the host
        y, ref = (a.get() if hasattr(a, "get") else a for a in (y, ref))
    y = xp.asarray(y, dtype=xp.float64)
    ref = xp.asarray(ref, dtype=xp.float64)
    if y.shape != ref.shape:
        raise InputError(f"rel_error needs equal shapes, got {tuple(y.shape)} and {tuple(ref.shape)}")
    denom = float(xp.linalg.norm(ref))
    if not bool(xp.isfinite(y).all()) or denom == 0.0:
        return float("inf")
    return float(xp.linalg.norm(y - ref)) / denom


def _module_of(a: Array) -> ModuleType:
    mod = type(a).__module__.split(".")[0]
    if mod == "cupy":
        import cupy

        return cupy
    return np
