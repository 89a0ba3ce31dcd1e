"""The one place that makes a kernel's problem: inputs, quantized weights, float64 reference, quantization error.

A problem is a scheme with its real parameters (`Params`: the weight and activation types as the kernel reads them,
the group size, the scale granularity) at a shape (M, N, K). `make_inputs` draws it on the device: normal random
activations and weights (a counter-based hash, kernels/problems.cu), the weights and activations quantized there by
the same arithmetic as kernels/quant/quant.py (bit for bit: tests/test_problems_gpu.py), and, when asked, the float64
reference y = x_q . W_q^T from what the kernel multiplies (the kernel error), kept on the device for the check, and
the quantization error against the unquantized product (computed once per weight and activation fields, shape, batch
and seed: every kernel that reads the same problem shares it). Kernel families (kernels/gemv/gemv.py, tensorcore.py,
wgmma.py, peers.py) only pack these canonical arrays into their layout and launch; `bytes_read` is what the kernel's
device arrays hold, the `bytes` the profiler stores. Inside kernels.input_cache.scratch() the caches here are the
calling thread's own (the profiler's warm-up). CuPy is imported inside functions only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kernels.input_cache import CANONICAL, InputCache, InputKey, scoped
from kernels.quant import quant
from models.errors import InputError

WEIGHTS = ("f32", "f16", "bf16", "w4", "w8", "e4m3")
ACTS = ("f32", "f16", "bf16", "i8", "e4m3")
SCALES = ("channel", "tensor")
_SOURCE = "problems.cu"
_ENTRIES = ("fill_normal", "f32_to_f16", "f32_to_bf16_bits", "f32_to_f64", "f16_to_f64", "bf16_bits_to_f64",
            "quantize_w4", "dequantize_w4", "quantize_int8_rows", "dequantize_int8_rows", "fp8_row_absmax",
            "quantize_fp8_rows", "dequantize_fp8_rows")


@dataclass(frozen=True)
class Params:
    """A scheme's parameters as one kernel reads them."""

    scheme: str
    weight: str  # one of WEIGHTS: the canonical weight form (w4: quant.W4, w8: quant.W8, e4m3: quant.FP8)
    act: str  # one of ACTS: the activations as the kernel reads them (i8 / e4m3: codes + fp32 scales)
    group_size: int = 0  # w4: weights per (scale, zero) group along K
    weight_scales: str = "channel"  # e4m3 weights: one fp32 scale per channel or per tensor
    act_scales: str = "channel"  # i8 / e4m3 activations: per token ("channel", one per row of x) or per tensor
    weight_std: float = 0.0  # standard deviation of the float weights; 0: 1/sqrt(K)

    def __post_init__(self) -> None:
        if self.weight not in WEIGHTS or self.act not in ACTS:
            raise InputError(f"problem weight {self.weight!r} / activation {self.act!r}: accepted {WEIGHTS} / {ACTS}")
        if self.weight_scales not in SCALES or self.act_scales not in SCALES:
            raise InputError(f"scale granularity must be one of {SCALES}")
        if self.act == "i8" and self.act_scales != "channel":
            raise InputError("int8 activations are quantized per token (act_scales='channel') only")
        if self.weight == "w4" and (self.group_size <= 0 or self.group_size % 8):
            raise InputError(f"w4 weights need a group size that is a positive multiple of 8, got {self.group_size}")

    def check(self, M: int, N: int, K: int) -> None:
        if min(M, N, K) < 1:
            raise InputError(f"M, N, K must be >= 1, got M={M}, N={N}, K={K}")
        if self.weight == "w4":
            quant.check_w4_shape(N, K, self.group_size)


@dataclass
class Inputs:
    """One problem on the device in canonical form (see the module docstring)."""

    params: Params
    M: int
    N: int
    K: int
    x: tuple[Any, ...]  # activations as the kernel reads them: (values,) or (codes, fp32 scales)
    w: Any  # weights: a device array in the weight type (bf16 as uint16 bits), or quant.W4 / W8 / FP8 on the device
    ref: Any = None  # float64 device y (M x N) from x and the dequantized w, when asked for
    quant_error_rel: float = float("nan")  # ||ref - x.W^T|| / ||x.W^T|| with the unquantized x and W


def _cp() -> Any:
    import cupy

    return cupy


def _fn(entry: str) -> Any:
    from kernels.toolchain import build

    return build.function(_SOURCE, entry)


def compile_jobs(arch: str) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """kernels.toolchain.build jobs of this module (one cubin holds every entry)."""
    return [(_SOURCE, _ENTRIES[0], arch, ())]


def _launch(entry: str, n: int, args: tuple[Any, ...], warp_per_item: bool = False) -> None:
    threads = 256
    items = n * 32 if warp_per_item else n
    blocks = max(1, min(-(-items // threads), 65535))
    _fn(entry)((blocks,), (threads,), args)


def random_normal(shape: tuple[int, int], seed: int, std: float) -> Any:
    """float32 normal values with standard deviation `std` on the device (deterministic in `seed`)."""
    cp = _cp()
    out = cp.empty(shape, dtype=cp.float32)
    _launch("fill_normal", out.size, (out, np.int64(out.size), np.uint64(seed & (2**64 - 1)), np.float32(std)))
    return out


def convert(x: Any, to: str) -> Any:
    """A float32 device array in `to` ("f32", "f16", or "bf16" as uint16 bit patterns), rounded to nearest even."""
    cp = _cp()
    if to == "f32":
        return x
    out = cp.empty(x.shape, dtype=cp.float16 if to == "f16" else cp.uint16)
    _launch("f32_to_f16" if to == "f16" else "f32_to_bf16_bits", x.size, (x, out, np.int64(x.size)))
    return out


def to_float64(a: Any) -> Any:
    """A float32 / float16 / bf16-bits device array in float64."""
    cp = _cp()
    entry = {"float32": "f32_to_f64", "float16": "f16_to_f64", "uint16": "bf16_bits_to_f64"}[str(a.dtype)]
    out = cp.empty(a.shape, dtype=cp.float64)
    _launch(entry, a.size, (cp.ascontiguousarray(a), out, np.int64(a.size)))
    return out


# ------------------------------------------------------------ the quantizers of kernels/quant/quant.py, on the device
def quantize_w4(w: Any, group_size: int) -> quant.W4:
    cp = _cp()
    N, K = w.shape
    quant.check_w4_shape(N, K, group_size)
    codes = cp.empty((N, K), dtype=cp.uint8)
    scales = cp.empty((N, K // group_size), dtype=cp.float16)
    zeros = cp.empty((N, K // group_size), dtype=cp.uint8)
    _launch("quantize_w4", scales.size, (w, np.int32(N), np.int32(K), np.int32(group_size), codes, scales, zeros))
    return quant.W4(codes, scales, zeros, group_size)


def _int8_rows(w: Any, f32_scale: bool) -> tuple[Any, Any]:
    cp = _cp()
    rows, K = w.shape
    codes = cp.empty((rows, K), dtype=cp.int8)
    scales = cp.empty(rows, dtype=cp.float32 if f32_scale else cp.float16)
    _launch("quantize_int8_rows", rows, (w, np.int32(rows), np.int32(K), np.int32(f32_scale), codes, scales), True)
    return codes, scales


def quantize_w8(w: Any) -> quant.W8:
    return quant.W8(*_int8_rows(w, False))


def quantize_act_int8(x: Any) -> tuple[Any, Any]:
    return _int8_rows(x, True)


def quantize_fp8(w: Any, per: str = "tensor", block: tuple[int, int] = (128, 128)) -> quant.FP8:
    """e4m3 codes with fp32 scales per row ("channel"), for the whole array ("tensor"), or per (rows x columns)
    block ("block": [ceil(rows/br), ceil(K/bc)] scales)."""
    cp = _cp()
    rows, K = w.shape
    if per == "block":
        br, bc = block
        scales = cp.empty((-(-rows // br), -(-K // bc)), dtype=cp.float32)
        codes = cp.empty((rows, K), dtype=cp.uint8)
        _fn("quantize_fp8_blocks")((min(scales.size, 65535),), (256,), (w, np.int32(rows), np.int32(K), np.int32(br),
                                                                      np.int32(bc), codes, scales))
        return quant.FP8(codes, scales, per, (br, bc))
    amax = 0.0
    if per == "tensor":
        row_max = cp.empty(rows, dtype=cp.float32)
        _launch("fp8_row_absmax", rows, (w, np.int32(rows), np.int32(K), row_max), True)
        amax = float(cp.asnumpy(row_max).max())  # float32 maxima: the host's float64 amax exactly
    codes = cp.empty((rows, K), dtype=cp.uint8)
    scales = cp.empty(rows if per == "channel" else 1, dtype=cp.float32)
    _launch("quantize_fp8_rows", rows, (w, np.int32(rows), np.int32(K), np.int32(per == "channel"),
                                        np.float32(amax), codes, scales), True)
    return quant.FP8(codes, scales, per)


def dequantize(w: Any) -> Any:
    """float64 device weights from a canonical form (what the kernel multiplies)."""
    cp = _cp()
    if isinstance(w, quant.W4):
        N, K = w.codes.shape
        out = cp.empty((N, K), dtype=cp.float64)
        _launch("dequantize_w4", out.size, (w.codes, w.scales, w.zeros, np.int32(N), np.int32(K),
                                            np.int32(w.group_size), out))
        return out
    if isinstance(w, quant.W8):
        return _dequantize_rows(w.codes, w.scales)
    if isinstance(w, quant.FP8):
        rows, K = w.codes.shape
        out = cp.empty((rows, K), dtype=cp.float64)
        if w.granularity == "block":
            br, bc = w.block
            _launch("dequantize_fp8_blocks", out.size, (w.codes, w.scales, np.int32(rows), np.int32(K), np.int32(br),
                                                        np.int32(bc), out))
            return out
        _launch("dequantize_fp8_rows", out.size, (w.codes, w.scales, np.int32(w.granularity == "channel"),
                                                  np.int32(rows), np.int32(K), out))
        return out
    return to_float64(w)


def _dequantize_rows(codes: Any, scales: Any) -> Any:
    cp = _cp()
    rows, K = codes.shape
    out = cp.empty((rows, K), dtype=cp.float64)
    _launch("dequantize_int8_rows", out.size, (codes, scales, np.int32(scales.dtype == cp.float32), np.int32(rows),
                                               np.int32(K), out))
    return out


def dequantize_act(x: tuple[Any, ...]) -> Any:
    """float64 device activations from what the kernel reads."""
    if len(x) == 1:
        return to_float64(x[0])
    codes, scales = x
    if codes.dtype.kind == "i":
        return _dequantize_rows(codes, scales)
    return dequantize(quant.FP8(codes, scales, "channel" if scales.size > 1 else "tensor"))


# ---------------------------------------------------------------- the problem
_TEMPLATE: dict[tuple[Params, int, int, int], Inputs] = {}  # the last problem drawn with a reference
INPUTS = InputCache()  # canonical weights and kernels' packed copies, by InputKey (kernels.input_cache)
_QUANT_ERRORS: dict[tuple[Any, ...], float] = {}  # quantization error by (weight and activation fields, M, N, K, seed)
_QUANT_ERRORS_MAX = 4096


def input_cache() -> InputCache:
    """INPUTS, or inside kernels.input_cache.scratch() this thread's private cache (the profiler's warm-up)."""
    return scoped("inputs", INPUTS, InputCache)


def _templates() -> dict[tuple[Params, int, int, int], Inputs]:
    return scoped("templates", _TEMPLATE, dict)


def _quant_errors() -> dict[tuple[Any, ...], float]:
    return scoped("quant_errors", _QUANT_ERRORS, dict)


def input_key(layout: str, params: Params, N: int, K: int, seed: int, copy: int = 0) -> InputKey:
    """The cache key of weights drawn from `seed` at N x K in `layout`, on the current device. The canonical layout
    is keyed by the weight fields only (kernels that read the same weights share them, whatever their activations)."""
    if layout == CANONICAL:
        params = replace(params, scheme="", act="f32", act_scales="channel")
    return InputKey(layout, params, N, K, seed, copy, int(_cp().cuda.Device().id))


def canonical_weights(params: Params, N: int, K: int, seed: int) -> Any:
    """The weights of a problem drawn from `seed` in canonical form (see Inputs.w): drawn and quantized once per
    (weight fields, N, K, seed), then the same device arrays for every kernel and batch (kernels.input_cache)."""
    return input_cache().get(input_key(CANONICAL, params, N, K, seed), lambda: _quantize_weights(
        params, _float_weights(params, N, K, seed)))


def _float_weights(params: Params, N: int, K: int, seed: int) -> Any:
    return random_normal((N, K), 2 * seed + 1, params.weight_std or K**-0.5)


def _quantize_weights(params: Params, w: Any) -> Any:
    if params.weight == "w4":
        return quantize_w4(w, params.group_size)
    if params.weight == "w8":
        return quantize_w8(w)
    if params.weight == "e4m3":
        return quantize_fp8(w, params.weight_scales)
    return convert(w, params.weight)


def make_inputs(params: Params, M: int, N: int, K: int, *, seed: int, reference: bool) -> Inputs:
    """Draw one problem on the device; with `reference`, also the float64 reference and the quantization error.

    The weights are `canonical_weights` (drawn once per weight fields, shape and seed); the activations are drawn
    here. Without `reference` (the L2-cold rotation sets), the problem is a device copy of the last one drawn with a
    reference at the same parameters and shape: the same random values at other addresses, at the cost of a memcpy
    (`seed` then only matters when there is none to copy)."""
    params.check(M, N, K)
    key = (params, M, N, K)
    templates = _templates()
    if not reference and key in templates:
        return copy_inputs(templates[key])
    x = random_normal((M, K), 2 * seed, 1.0)
    if params.act in ("f32", "f16", "bf16"):
        xk: tuple[Any, ...] = (convert(x, params.act),)
    elif params.act == "i8":
        xk = quantize_act_int8(x)
    else:
        q = quantize_fp8(x, params.act_scales)
        xk = (q.codes, q.scales)
    wk = canonical_weights(params, N, K, seed)
    inputs = Inputs(params, M, N, K, xk, wk)
    if reference:
        templates.clear()  # one template at a time: its arrays are the checked set's own
        templates[key] = Inputs(params, M, N, K, xk, wk)
        inputs.ref = dequantize_act(xk) @ dequantize(wk).T  # stays on the device: the check reads it there
        if params.weight in ("w4", "w8", "e4m3") or params.act in ("i8", "e4m3"):
            inputs.quant_error_rel = _quant_error(params, x, inputs.ref, seed)
    return inputs


def _quant_error(params: Params, x: Any, y: Any, seed: int) -> float:
    """||y - x.W^T|| / ||x.W^T|| with the unquantized x (float32, drawn) and W (drawn again from `seed`): the norms on
    the device, two scalars come back. Every kernel reading the same weight and activation fields at this shape,
    batch and seed gets the same draws, so the first one's figure is kept for the others."""
    errors = _quant_errors()
    (M, K), N = x.shape, y.shape[1]
    key = (replace(params, scheme=""), M, N, K, seed)
    if key not in errors:
        cp = _cp()
        exact = to_float64(x) @ to_float64(_float_weights(params, N, K, seed)).T
        if len(errors) >= _QUANT_ERRORS_MAX:
            errors.clear()
        norm = float(cp.linalg.norm(exact))  # 0 only for inputs never drawn (a warm-up's stand-in kernels)
        errors[key] = float(cp.linalg.norm(y - exact)) / norm if norm else float("nan")
    return errors[key]


def copy_inputs(inputs: Inputs) -> Inputs:
    """The same problem in new device arrays (no reference)."""
    return Inputs(inputs.params, inputs.M, inputs.N, inputs.K, tuple(a.copy() for a in inputs.x),
                  copy_weights(inputs.w))


def copy_weights(w: Any) -> Any:
    """Canonical weights (an array, or quant.W4 / W8 / FP8) in new device arrays."""
    if isinstance(w, quant.W4):
        return quant.W4(w.codes.copy(), w.scales.copy(), w.zeros.copy(), w.group_size)
    if isinstance(w, quant.W8):
        return quant.W8(w.codes.copy(), w.scales.copy())
    if isinstance(w, quant.FP8):
        return quant.FP8(w.codes.copy(), w.scales.copy(), w.granularity, w.block)
    return w.copy()


class PackedCache:
    """A kernel's inputs in its layout (`layout`: the kernel's name). The weights are packed once per (parameters,
    shape) and shared by every batch: the checked set's and each L2-cold rotation copy's, kept in INPUTS; the
    activations of a rotation set are device copies of the last checked set's (no redraw, no repacking)."""

    def __init__(self, layout: str) -> None:
        self.layout = layout
        self._last: tuple[Any, ...] = ()  # (params, shape, seed, x arrays, weight arrays) of the last checked set

    def make(self, params: Params, M: int, N: int, K: int, *, seed: int, reference: bool,
             pack: Callable[[Any], tuple[Any, ...]]) -> tuple[Inputs, tuple[Any, ...], tuple[Any, ...]]:
        """(inputs, x arrays, weight arrays in the kernel's layout); `pack` turns canonical weights into that layout.
        A rotation set (no reference) after a checked one at the same parameters and shape is copy `seed - checked
        seed` of the checked set's weights, distinct device arrays."""
        if not reference and self._last and self._last[:2] == (params, (M, N, K)):
            base, xs0, ws0 = self._last[2:]
            xs = tuple(a.copy() for a in xs0)
            if seed <= base:  # not a rotation copy of the checked set: new arrays, not kept
                return Inputs(params, M, N, K, xs, None), xs, tuple(a.copy() for a in ws0)
            ws = input_cache().get(input_key(self.layout, params, N, K, base, seed - base),
                                   lambda: tuple(a.copy() for a in ws0))
            return Inputs(params, M, N, K, xs, None), xs, ws
        inputs = make_inputs(params, M, N, K, seed=seed, reference=reference)
        ws = input_cache().get(input_key(self.layout, params, N, K, seed), lambda: pack(inputs.w))
        if reference:
            self._last = (params, (M, N, K), seed, inputs.x, ws)
        return inputs, inputs.x, ws


def warm() -> None:
    """Compile (CuPy's JIT, on tiny arrays) CuPy's own kernels that every problem's reference and check use: the
    float64 product, difference and norm of make_inputs, the poisoned fills and float64 conversions of the outputs.
    The profiler runs it while the first kernel compiles, so the first points do not."""
    cp = _cp()
    a = cp.ones((4, 4), dtype=cp.float64)
    float(cp.linalg.norm(a @ a.T - a))
    for dtype in (cp.float16, cp.float32, cp.uint16, cp.uint32, cp.int32):
        b = cp.empty(4, dtype=dtype)
        b.fill(np.iinfo(dtype).max if b.dtype.kind in "ui" else np.nan)
        b.astype(cp.float64)
    cp.cuda.Device().synchronize()


def bytes_read(*arrays: Any) -> int:
    """Bytes of the device arrays a kernel reads or writes (CuPy or torch)."""
    total = 0
    for a in arrays:
        total += int(a.nbytes) if hasattr(a, "nbytes") else int(a.numel() * a.element_size())
    return total
