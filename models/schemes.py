"""Quantization schemes and THE byte/FLOP accounting of a decode GEMM (M×K activations times an N×K weight).

bytes = weights (N·K·weight_bits/8) + metadata (weight scales and zero points at their granularity, activation
scales) + activations (M·K·act_bits/8) + outputs (M·N·out_bits/8); flops = 2·M·N·K. Every layer above (roofline,
profiler, compare) takes its bytes from `traffic`, so measured GB/s and predicted times share one accounting.

Metadata granularity, for the weight (N rows, K along the reduction) and for the activation (M tokens):
  per_tensor   one scale                      per_channel / per_token   one per row (N) / per token (M)
  group        one per G consecutive K        block                     one per G×G weight tile (per token and G
                                                                        along K for the activation), rounded up

`dequant_ops_per_weight` is an estimate of the integer/float ALU instructions spent turning one stored weight into a
tensor-core operand, amortized over a packed word, with the per-row scale folded into the epilogue:
  fp32, fp16, bf16, w8a8, fp8, nvfp4, mxfp4   0  (native operand types: int8 / e4m3 / e2m1 feed the MMA directly,
                                                  scales applied once per output; fp8/fp4 on GPUs without the
                                                  native unit need a conversion: see compute_unit_used in roofline)
  w8a16   2  byte extract (prmt) + int8→fp16 convert (magic-number add/sub); the row scale multiplies the dot product
  w4a16   4  nibble extract (shift/lop3) + int4→fp16 convert + subtract zero + scale FMA; the chapter's naive kernel
             spends ~6 (shift, mask, I2F, sub, mul, cvt) and is instruction-bound on the H200 (REFERENCE.md)
The roofline time does not include this work; it is reported as its own column so an instruction-bound kernel can be
recognized.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from models.errors import InputError, unknown

SCHEME_NAMES: tuple[str, ...] = ("fp32", "fp16", "bf16", "w8a16", "w4a16", "w8a8", "fp8", "nvfp4", "mxfp4")
COMPUTE_UNITS: tuple[str, ...] = ("fp32", "fp16", "bf16", "int8", "fp8", "fp4")
GRANULARITIES: tuple[str, ...] = ("none", "per_tensor", "per_channel", "group", "block")
ACT_GRANULARITIES: tuple[str, ...] = ("none", "per_tensor", "per_token", "group", "block")

SCALE_DTYPE_BITS: dict[str, int] = {"fp16": 16, "bf16": 16, "fp32": 32, "e4m3": 8, "e8m0": 8}
ZERO_STORAGE_BITS: dict[str, int] = {"int4": 4, "int8": 8, "fp16": 16, "none": 0}
FP8_GRANULARITIES: tuple[str, ...] = ("per_tensor", "per_channel", "block")
FP8_BLOCK = 128


@dataclass(frozen=True)
class Scheme:
    name: str
    weight_bits: int
    act_bits: int
    out_bits: int
    compute_unit: str  # one of COMPUTE_UNITS: the ceiling that applies where the GPU has it natively
    group_size: int = 0  # G for "group" (along K) and "block" (G×G) granularity; 0 = none
    scale_bits: int = 0  # per weight scale
    zero_bits: int = 0  # per weight zero point (0 = symmetric)
    granularity: str = "none"  # weight metadata granularity, one of GRANULARITIES
    runnable: bool = True  # False: modeled only (no kernel in this workbench)
    dequant_ops_per_weight: float = 0.0
    description: str = ""
    weight_dtype: str = ""
    act_dtype: str = ""
    act_scale_bits: int = 0
    act_granularity: str = "none"  # one of ACT_GRANULARITIES
    act_group_size: int = 0
    tensor_scale_bytes: int = 0  # extra global scales (nvfp4's fp32 per-tensor scale for weight and activation)

    @property
    def bits_per_weight(self) -> float:
        """Stored bits per weight including group scales/zeros (per-row/tensor metadata excluded: it depends on K)."""
        if self.granularity == "group" and self.group_size:
            return self.weight_bits + (self.scale_bits + self.zero_bits) / self.group_size
        if self.granularity == "block" and self.group_size:
            return self.weight_bits + self.scale_bits / self.group_size**2
        return float(self.weight_bits)


@dataclass(frozen=True)
class Traffic:
    """Bytes and FLOPs of one GEMM (floats for scalar input, float64 arrays for array input)."""

    weight_bytes: Any
    scale_bytes: Any  # weight scales + zero points + activation scales
    act_bytes: Any
    out_bytes: Any
    bytes: Any
    flops: Any

    @property
    def intensity(self) -> Any:
        """Arithmetic intensity, FLOP per byte moved."""
        return self.flops / self.bytes


_BASE: dict[str, Scheme] = {
    "fp32": Scheme("fp32", 32, 32, 32, "fp32", weight_dtype="fp32", act_dtype="fp32",
                   description="fp32 weights and activations, FP32 CUDA cores (TF32 off)"),
    "fp16": Scheme("fp16", 16, 16, 16, "fp16", weight_dtype="fp16", act_dtype="fp16",
                   description="fp16 weights and activations, FP16 tensor cores, fp32 accumulation"),
    "bf16": Scheme("bf16", 16, 16, 16, "bf16", weight_dtype="bf16", act_dtype="bf16",
                   description="bf16 weights and activations, BF16 tensor cores, fp32 accumulation"),
    "w8a16": Scheme("w8a16", 8, 16, 16, "fp16", scale_bits=16, granularity="per_channel", dequant_ops_per_weight=2.0,
                    weight_dtype="int8", act_dtype="fp16",
                    description="int8 weights, symmetric, one scale per output row; fp16 activations, FP16 tensor "
                    "cores after dequantization"),
    "w4a16": Scheme("w4a16", 4, 16, 16, "fp16", group_size=128, scale_bits=16, zero_bits=4, granularity="group",
                    dequant_ops_per_weight=4.0, weight_dtype="int4", act_dtype="fp16",
                    description="int4 weights in groups of G along K with a scale and a zero point per group (8 "
                    "weights per 32-bit word, low nibble first); fp16 activations, FP16 tensor cores after dequant"),
    "w8a8": Scheme("w8a8", 8, 8, 16, "int8", scale_bits=32, granularity="per_channel", weight_dtype="int8",
                   act_dtype="int8", act_scale_bits=32, act_granularity="per_token",
                   description="int8 weights per output channel, int8 activations per token, INT8 tensor cores with "
                   "int32 accumulation, 16-bit outputs"),
    "fp8": Scheme("fp8", 8, 8, 16, "fp8", scale_bits=32, granularity="per_tensor", weight_dtype="e4m3",
                  act_dtype="e4m3", act_scale_bits=32, act_granularity="per_tensor",
                  description="e4m3 weights and activations with fp32 scales (per tensor, per channel/token or "
                  "128×128 blocks / 1×128 per token); FP8 tensor cores where native, else the FP16 ceiling"),
    "nvfp4": Scheme("nvfp4", 4, 4, 16, "fp4", group_size=16, scale_bits=8, granularity="group", runnable=False,
                    weight_dtype="e2m1", act_dtype="e2m1", act_scale_bits=8, act_granularity="group",
                    act_group_size=16, tensor_scale_bytes=8,
                    description="NVFP4: e2m1 values, an e4m3 scale per 16 along K (weights and activations) plus an "
                    "fp32 per-tensor scale; native on Blackwell; modeled only"),
    "mxfp4": Scheme("mxfp4", 4, 4, 16, "fp4", group_size=32, scale_bits=8, granularity="group", runnable=False,
                    weight_dtype="e2m1", act_dtype="e2m1", act_scale_bits=8, act_granularity="group",
                    act_group_size=32,
                    description="MXFP4 (OCP microscaling): e2m1 values, an e8m0 scale per 32 along K (weights and "
                    "activations); native on Blackwell; modeled only"),
}

# Keyword parameters each scheme accepts in get_scheme, with their defaults (as documented by the chapter).
SCHEME_PARAMS: dict[str, dict[str, Any]] = {
    "fp32": {},
    "fp16": {},
    "bf16": {},
    "w8a16": {"group_size": 0, "scale_dtype": "fp16", "zero": "none"},
    "w4a16": {"group_size": 128, "scale_dtype": "fp16", "zero": "int4"},
    "w8a8": {"scale_dtype": "fp32"},
    "fp8": {"granularity": "per_tensor", "scale_dtype": "fp32"},
    "nvfp4": {},
    "mxfp4": {},
}
# The group sizes G offered for group-wise weight scales (w4a16 along K, and the error explorer's "group"
# granularity): the one definition, read by `workbench profile --group-size`, kernels.problems and kernels.quant.quant.
GROUP_SIZES: tuple[int, ...] = (32, 64, 128, 256)


def _check_choice(kind: str, value: Any, valid: tuple[str, ...] | list[str]) -> str:
    if not isinstance(value, str) or value not in valid:
        raise unknown(kind, value, list(valid))
    return value


def get_scheme(name: str, **params: Any) -> Scheme:
    """The scheme `name` with optional parameters (None means the default).

    w8a16/w4a16: group_size (0 = one scale per row), scale_dtype (fp16|bf16|fp32), zero (int4|int8|fp16|none).
    w8a8: scale_dtype of the per-channel weight scale. fp8: granularity (per_tensor|per_channel|block), scale_dtype.
    """
    if name not in _BASE:
        raise unknown("scheme", name, list(SCHEME_NAMES))
    accepted = SCHEME_PARAMS[name]
    given = {k: v for k, v in params.items() if v is not None}
    extra = sorted(set(given) - set(accepted))
    if extra:
        what = ", ".join(accepted) if accepted else "none"
        raise InputError(f"scheme {name} does not take parameter(s) {', '.join(extra)}; accepted: {what}")
    values = {**accepted, **given}
    scheme = _BASE[name]
    changes: dict[str, Any] = {}
    if "group_size" in values:
        g = values["group_size"]
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 0:
            raise InputError(f"group size must be an integer >= 0 (0 = one scale per row), got {g!r}")
        changes["group_size"] = int(g)
        changes["granularity"] = "group" if g else "per_channel"
    if "scale_dtype" in values:
        dtypes = ("fp16", "bf16", "fp32")
        changes["scale_bits"] = SCALE_DTYPE_BITS[_check_choice("scale dtype", values["scale_dtype"], dtypes)]
    if "zero" in values:
        changes["zero_bits"] = ZERO_STORAGE_BITS[_check_choice("zero-point storage", values["zero"],
                                                               tuple(ZERO_STORAGE_BITS))]
    if "granularity" in values:
        gran = _check_choice("fp8 granularity", values["granularity"], FP8_GRANULARITIES)
        changes["granularity"] = gran
        changes["act_granularity"] = {"per_tensor": "per_tensor", "per_channel": "per_token", "block": "block"}[gran]
        changes["group_size"] = FP8_BLOCK if gran == "block" else 0
        changes["act_group_size"] = FP8_BLOCK if gran == "block" else 0
    return replace(scheme, **changes) if changes else scheme


def all_schemes(runnable_only: bool = False) -> list[Scheme]:
    """Every scheme with its default parameters, in SCHEME_NAMES order."""
    return [get_scheme(n) for n in SCHEME_NAMES if not runnable_only or _BASE[n].runnable]


def _positive(label: str, x: Any) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.size and not np.all(np.isfinite(a) & (a > 0)):
        bad = a[~(np.isfinite(a) & (a > 0))].ravel()[0]
        raise InputError(f"{label} must be a positive number, got {label}={bad:g}")
    return a


def _weight_meta_units(s: Scheme, N: np.ndarray, K: np.ndarray) -> np.ndarray | float:
    if s.granularity == "none":
        return 0.0
    if s.granularity == "per_tensor":
        return 1.0
    if s.granularity == "per_channel":
        return N
    if s.granularity == "group":
        return N * (K / s.group_size)
    return np.ceil(N / s.group_size) * np.ceil(K / s.group_size)  # block


def _act_meta_units(s: Scheme, M: np.ndarray, K: np.ndarray) -> np.ndarray | float:
    if s.act_granularity == "none":
        return 0.0
    if s.act_granularity == "per_tensor":
        return 1.0
    if s.act_granularity == "per_token":
        return M
    if s.act_granularity == "group":
        return M * (K / s.act_group_size)
    return M * np.ceil(K / s.act_group_size)  # block: 1×G per token


def check_group(scheme: Scheme, K: Any) -> None:
    """InputError if K is not a multiple of the scheme's group size (weights or activations)."""
    Ka = np.asarray(K, dtype=np.float64)
    for g, gran in ((scheme.group_size, scheme.granularity), (scheme.act_group_size, scheme.act_granularity)):
        if gran == "group" and g and np.any(np.mod(Ka, g) != 0):
            bad = Ka[np.mod(Ka, g) != 0].ravel()[0] if Ka.ndim else Ka
            raise InputError(f"K={bad:.0f} is not divisible by the group size {g} of scheme {scheme.name}; "
                             f"use a K that is a multiple of {g} or another --group-size")


def traffic(scheme: Scheme | str, M: Any, N: Any, K: Any) -> Traffic:
    """Bytes moved and FLOPs of an (M×K)·(N×K)ᵀ GEMM under `scheme`; numpy-vectorized over M, N, K.

    M may be fractional (an expected number of tokens, as for MoE experts in a roll-up). Raises InputError for
    M, N or K <= 0 and for K not divisible by the group size.
    """
    s = get_scheme(scheme) if isinstance(scheme, str) else scheme
    Ma, Na, Ka = _positive("M", M), _positive("N", N), _positive("K", K)
    check_group(s, Ka)
    weight = Na * Ka * (s.weight_bits / 8)
    scale = (_weight_meta_units(s, Na, Ka) * ((s.scale_bits + s.zero_bits) / 8)
             + _act_meta_units(s, Ma, Ka) * (s.act_scale_bits / 8) + float(s.tensor_scale_bytes))
    act = Ma * Ka * (s.act_bits / 8)
    out = Ma * Na * (s.out_bits / 8)
    total = weight + scale + act + out
    flops = 2.0 * Ma * Na * Ka
    fields = (weight, scale, act, out, total, flops)
    if all(np.ndim(x) == 0 for x in (M, N, K)):
        return Traffic(*(float(f) for f in fields))
    shape = np.broadcast(Ma, Na, Ka).shape
    return Traffic(*(np.array(np.broadcast_to(f, shape), dtype=np.float64) for f in fields))
