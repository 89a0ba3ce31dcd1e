"""Quantization error against bytes per weight: what accuracy each byte buys (issue 20, the chapter's first lesson).

For a weight matrix W (N outputs x K) drawn from a distribution (Gaussian, Student-t, Gaussian with outlier rows or
columns at a rate and magnitude, all seeded) or loaded from a .npy / .safetensors file, every
`kernels.quant.quant.Choice` (int4 / int8 / fp8; per tensor, per channel, per group of G along K, G x G blocks;
symmetric or with a zero point stored in 4/8 bits or fp16) is applied by `kernels.quant.quant.fake_quantize` (the
quantizers the kernels are checked against) and measured twice: the relative error of the dequantized weights ||W_q -
W|| / ||W||, and of the layer's output y = x W^T for Gaussian activations x (tokens x K). The bytes each choice costs
come from models.schemes' accounting (`traffic` of the scheme with that granularity): weights plus scales and zero
points, per weight.

Rows are tidy, SI-free numbers (errors as fractions, bytes per weight); the CLI formats them.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from kernels import reference
from kernels.quant import quant
from models.errors import InputError
from models.schemes import (
    FP8_BLOCK,
    GROUP_SIZES,
    SCALE_DTYPE_BITS,
    SCHEME_PARAMS,
    ZERO_STORAGE_BITS,
    get_scheme,
    traffic,
)

DISTRIBUTIONS = ("gaussian", "student-t", "outliers")
OUTLIER_KINDS = ("columns", "rows")  # input channels (columns of W: every row has them) or output channels (rows)
BASE_SCHEME = {"int4": "w4a16", "int8": "w8a16", "fp8": "fp8"}  # models.schemes scheme of each weight format
_GRANULARITY = {"tensor": "per_tensor", "channel": "per_channel", "group": "group", "block": "block"}
COLUMNS = ("label", "format", "granularity", "size", "symmetric", "zero", "scale_dtype", "bits_per_weight",
           "bytes_per_weight", "overhead", "weight_error_rel", "output_error_rel")

FORMATS: tuple[str, ...] = tuple(quant.FORMAT_BITS)  # every format the explorer quantizes to (kernels.quant.quant)


# ---------------------------------------------------------------------------------------------- weights


def make_weights(dist: str = "gaussian", N: int = 1024, K: int = 4096, seed: int = 0, std: float = 0.02,
                 df: float = 4.0, outliers: str = "columns", rate: float = 0.01, magnitude: float = 20.0) -> np.ndarray:
    """A seeded N x K float64 weight: Gaussian (std), Student-t with df degrees of freedom (scaled to std), or Gaussian
    with a fraction `rate` of its columns (input channels) or rows (output channels) multiplied by `magnitude`."""
    if dist not in DISTRIBUTIONS:
        raise InputError(f"unknown distribution {dist!r}; valid: {', '.join(DISTRIBUTIONS)}")
    for name, v in (("N", N), ("K", K)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(f"{name} must be a positive integer, got {v!r}")
    if not (math.isfinite(std) and std > 0):
        raise InputError(f"std must be a positive number, got {std}")
    if dist == "student-t" and not (math.isfinite(df) and df > 2):
        raise InputError(f"Student-t needs df > 2 (finite variance), got {df}")
    if dist == "outliers":
        if outliers not in OUTLIER_KINDS:
            raise InputError(f"unknown outlier kind {outliers!r}; valid: {', '.join(OUTLIER_KINDS)}")
        if not 0 < rate <= 1:
            raise InputError(f"outlier rate must be in (0, 1], got {rate}")
        if not (math.isfinite(magnitude) and magnitude > 0):
            raise InputError(f"outlier magnitude must be a positive number, got {magnitude}")
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):  # std (x magnitude) beyond float64's range: refused below
        if dist == "student-t":
            w = rng.standard_t(df, size=(N, K)) * std / math.sqrt(df / (df - 2))
        else:
            w = rng.standard_normal((N, K)) * std
        if dist == "outliers":
            axis_len = K if outliers == "columns" else N
            picked = rng.choice(axis_len, size=max(1, round(rate * axis_len)), replace=False)
            if outliers == "columns":
                w[:, picked] *= magnitude
            else:
                w[picked, :] *= magnitude
    if not np.isfinite(w).all():
        raise InputError("the synthetic weights overflow float64; give a smaller std (and outlier magnitude)")
    return w


_ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I8": "i1", "U8": "u1", "I16": "<i2",
              "I32": "<i4", "F8_E4M3": "u1"}
_MAX_HEADER = 100 * 2**20


def _read_safetensors(path: Path, tensor: str | None) -> np.ndarray:
    size = path.stat().st_size
    with path.open("rb") as f:
        raw = f.read(8)
        n = int.from_bytes(raw, "little") if len(raw) == 8 else -1
        if n <= 0 or n > min(_MAX_HEADER, size - 8):
            raise InputError(f"{path} is not a safetensors file (bad header length)")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise InputError(f"{path} is not a safetensors file (its header is not JSON)") from None
        if not isinstance(header, dict):
            raise InputError(f"{path} is not a safetensors file (its header is not a JSON object)")
        entries = {k: v for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)}
        matrices = [k for k, v in entries.items() if len(v.get("shape", ())) == 2]
        if tensor is None:
            if len(matrices) != 1:
                shown = ", ".join(matrices[:8]) + (" ..." if len(matrices) > 8 else "")
                raise InputError(f"{path} holds {len(matrices)} 2-D tensors; name one with --tensor ({shown})")
            tensor = matrices[0]
        if tensor not in entries:
            raise InputError(f"no tensor {tensor!r} in {path}; 2-D tensors: {', '.join(matrices[:8]) or 'none'}")
        e = entries[tensor]
        dtype, shape, offsets = e.get("dtype"), e.get("shape"), e.get("data_offsets")
        if dtype not in _ST_DTYPES:
            raise InputError(f"tensor {tensor!r} has dtype {dtype}; readable: {', '.join(_ST_DTYPES)}")
        if (not isinstance(shape, list) or len(shape) != 2 or not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(v, int) and v >= 0 for v in shape + offsets)):
            raise InputError(f"tensor {tensor!r} of {path} must be 2-D with valid data offsets")
        dt = np.dtype(_ST_DTYPES[dtype])
        begin, end = offsets
        if end - begin != shape[0] * shape[1] * dt.itemsize or 8 + n + end > size:
            raise InputError(f"tensor {tensor!r} of {path}: its data offsets do not match its shape and dtype")
        f.seek(8 + n + begin)
        data = np.frombuffer(f.read(end - begin), dtype=dt).reshape(shape)
    if dtype == "BF16":
        return quant.from_bf16_bits(data).astype(np.float64)
    if dtype == "F8_E4M3":
        return quant.decode_e4m3(data)
    return data.astype(np.float64)


def load_matrix(path: str | Path, tensor: str | None = None) -> np.ndarray:
    """A real weight matrix (float64, N x K) from a .npy file or a tensor of a .safetensors file (its header parsed
    here: 8-byte length, JSON, raw little-endian data)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"no such weight file: {p}")
    if p.suffix == ".npy":
        try:
            w = np.load(p, allow_pickle=False)
        except (ValueError, EOFError) as exc:  # EOFError: an empty or truncated file
            raise InputError(f"{p} is not a readable .npy array ({str(exc).splitlines()[0]})") from None
        if tensor is not None:
            raise InputError("--tensor applies to .safetensors files only")
        if w.ndim != 2 or not np.issubdtype(w.dtype, np.number) or np.iscomplexobj(w):
            raise InputError(f"{p} holds a {w.ndim}-D {w.dtype} array; a real 2-D (N x K) matrix is needed")
        w = w.astype(np.float64)
    elif p.suffix == ".safetensors":
        w = _read_safetensors(p, tensor)
    else:
        raise InputError(f"weight file {p} must end in .npy or .safetensors")
    if w.size == 0 or not np.isfinite(w).all():
        raise InputError(f"the weight matrix from {p} is empty or holds NaN/inf values")
    return w


# ---------------------------------------------------------------------------------------------- choices and bytes


def default_choices(formats: tuple[str, ...] = FORMATS,
                    groups: tuple[int, ...] = GROUP_SIZES, block: int = FP8_BLOCK) -> list[quant.Choice]:
    """Every granularity for each format; int formats symmetric and with a zero point (weight-width integer or fp16);
    each format's default scale dtype from models.schemes (fp16 for int4/int8, fp32 for fp8)."""
    out = []
    for fmt in formats:
        if fmt not in quant.FORMAT_BITS:
            raise InputError(f"unknown format {fmt!r}; valid: {', '.join(quant.FORMAT_BITS)}")
        scale = SCHEME_PARAMS[BASE_SCHEME[fmt]]["scale_dtype"]
        grans = [("tensor", 0), ("channel", 0)] + [("group", g) for g in groups] + [("block", block)]
        zeros = [(True, "none")] if fmt == "fp8" else [(True, "none"), (False, fmt), (False, "fp16")]
        out += [quant.Choice(fmt, g, s, sym, z, scale).check() for g, s in grans for sym, z in zeros]
    return out


def label(c: quant.Choice) -> str:
    gran = {"tensor": "tensor", "channel": "channel", "group": f"g{c.size}", "block": f"{c.size}x{c.size}"}
    zero = "sym" if c.symmetric else f"zero {c.zero}"
    return f"{c.fmt} {gran[c.granularity]} {zero}"


def scheme_of(c: quant.Choice):
    """The models.schemes Scheme that stores W as `c` does (weight metadata only: activation scales left out)."""
    base = get_scheme(BASE_SCHEME[c.fmt])
    return replace(base, granularity=_GRANULARITY[c.granularity], group_size=int(c.size),
                   scale_bits=SCALE_DTYPE_BITS[c.scale_dtype], zero_bits=ZERO_STORAGE_BITS[c.zero],
                   act_scale_bits=0, act_granularity="none", act_group_size=0, tensor_scale_bytes=0)


def bytes_per_weight(c: quant.Choice, N: int, K: int) -> float:
    """Stored bytes per weight of an N x K matrix under `c`: codes + scales + zero points (models.schemes.traffic)."""
    t = traffic(scheme_of(c), 1, N, K)
    return float((t.weight_bytes + t.scale_bytes) / (N * K))


# ---------------------------------------------------------------------------------------------- the table


def explore(w: np.ndarray, choices: list[quant.Choice] | None = None, tokens: int = 16, seed: int = 0) -> pd.DataFrame:
    """One row per choice (COLUMNS): bytes per weight, the metadata overhead over the codes, and the relative errors
    of W and of y = x W^T (x: `tokens` Gaussian rows); choices a shape cannot take (G not dividing K) are skipped."""
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 2 or w.size == 0:
        raise InputError(f"the weight must be a non-empty 2-D matrix, got shape {w.shape}")
    if isinstance(tokens, bool) or not isinstance(tokens, (int, np.integer)) or tokens < 1:
        raise InputError(f"tokens must be a positive integer, got {tokens!r}")
    N, K = w.shape
    x = np.random.default_rng(seed + 1).standard_normal((tokens, K))
    y = reference.matmul_t(x, w)
    rows = []
    for c in choices if choices is not None else default_choices():
        if c.granularity == "group" and K % c.size:
            continue
        wq = quant.fake_quantize(w, c)
        bpw = bytes_per_weight(c, N, K)
        codes = quant.FORMAT_BITS[c.fmt] / 8
        rows.append(dict(label=label(c), format=c.fmt, granularity=c.granularity, size=int(c.size),
                         symmetric=c.symmetric, zero=c.zero, scale_dtype=c.scale_dtype, bits_per_weight=8 * bpw,
                         bytes_per_weight=bpw, overhead=bpw / codes - 1.0,
                         weight_error_rel=reference.rel_error(wq, w), output_error_rel=reference.rel_error(
                             reference.matmul_t(x, wq), y)))
    if not rows:
        raise InputError(f"no quantization choice applies to a {N}x{K} matrix (group sizes must divide K={K})")
    return pd.DataFrame(rows, columns=list(COLUMNS))


def error_of(w: np.ndarray, c: quant.Choice, tokens: int = 16, seed: int = 0) -> float:
    """The output error rel ||x W_q^T - x W^T|| / ||x W^T|| of one choice (for accuracy constraints)."""
    return float(explore(w, [c], tokens, seed)["output_error_rel"].iloc[0])
