"""The check of one point: a kernel's output, poisoned before the launch, against its float64 reference, where they
are.

`relative_errors(y, ref)` gives (||y - ref||_2 / ||ref||_2, max|y - ref| / max|ref|), inf when y is not finite (an
unwritten, NaN-poisoned element). On NumPy arrays it is the host arithmetic the profiler always used; on two device
arrays (CuPy) the same figures come from cuBLAS (`cupy.cublas`: daxpy for the difference, ddot for the squared
norms, idamax for the largest magnitudes): only scalars cross to the host, and no CuPy kernel is compiled for it.
Both paths run one algorithm (`blas_errors`) over a BLAS namespace; the CPU tests run it over `HostBlas`, NumPy with
cuBLAS's conventions, and compare with the host path. The norms agree to rounding (a sum in another order, ~1e-15
relative), the maxima exactly.

`check_output(runner, problem)` is what the profiler calls: the runner's `device_output(problem)` (its output as a
float64 device array) against a reference kept on the device, else the host path (`runner.output`, the reference
copied over). CuPy is imported inside functions only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def is_device_array(a: Any) -> bool:
    """A CuPy array (the device path takes those; a torch output comes through the runner's device_output)."""
    return type(a).__module__.split(".")[0] == "cupy"


def to_host(a: Any) -> np.ndarray:
    """A device array (CuPy / torch) or NumPy array as float64 NumPy."""
    if hasattr(a, "get"):
        a = a.get()
    elif hasattr(a, "detach"):
        a = a.detach().float().cpu().numpy()
    return np.asarray(a, dtype=np.float64)


def relative_errors(y: Any, ref: Any) -> tuple[float, float]:
    """(||y - ref||_2 / ||ref||_2, max|y - ref| / max|ref|); inf when y is not finite (unwritten / NaN). Two CuPy
    arrays are compared on the device (cuBLAS, scalars back); anything else on the host in float64."""
    if is_device_array(y) and is_device_array(ref):
        import cupy
        from cupy import cublas

        if y.shape != ref.shape:
            raise ValueError(f"output shape {y.shape} != reference shape {ref.shape}")
        return blas_errors(y.astype(cupy.float64, copy=False), ref.astype(cupy.float64, copy=False), cublas)
    return host_errors(y, ref)


def host_errors(y: Any, ref: Any) -> tuple[float, float]:
    """relative_errors in NumPy float64 (device arrays are copied to the host first)."""
    y = to_host(y)
    ref = to_host(ref)
    if y.shape != ref.shape:
        raise ValueError(f"output shape {y.shape} != reference shape {ref.shape}")
    # one difference array and reductions over it (the large checks' host time): a NaN or inf in y shows in its norm
    d = (y - ref).ravel()
    dnorm = math.sqrt(float(d @ d))
    if not math.isfinite(dnorm):
        return math.inf, math.inf
    flat = ref.ravel()
    norm = math.sqrt(float(flat @ flat))
    peak = max(float(flat.max()), -float(flat.min())) if flat.size else 0.0
    dmax = max(float(d.max()), -float(d.min())) if d.size else 0.0
    return (dnorm / norm if norm else math.nan, dmax / peak if peak else math.nan)


def blas_errors(y: Any, ref: Any, blas: Any) -> tuple[float, float]:
    """relative_errors of two float64 arrays of one module through `blas` (cupy.cublas, or HostBlas): d = y - ref by
    axpy into a copy of y, the squared norms by dot, the largest magnitudes by iamax (1-based, as BLAS)."""
    if y.shape != ref.shape:
        raise ValueError(f"output shape {y.shape} != reference shape {ref.shape}")
    r = ref.ravel()
    if r.size == 0:
        return math.nan, math.nan
    d = y.ravel().copy()
    blas.axpy(-1.0, r, d)  # d = y - ref: one rounding, as the host's subtraction
    dnorm = math.sqrt(float(blas.dot(d, d)))  # a NaN or inf in y shows here, as on the host
    if not math.isfinite(dnorm):
        return math.inf, math.inf
    norm = math.sqrt(float(blas.dot(r, r)))
    peak, dmax = _abs_max(r, blas), _abs_max(d, blas)
    return (dnorm / norm if norm else math.nan, dmax / peak if peak else math.nan)


def _abs_max(a: Any, blas: Any) -> float:
    """max |a| of a finite 1-D array: the element iamax points at (one scalar read back)."""
    return abs(float(a[int(blas.iamax(a)) - 1]))


class HostBlas:
    """cupy.cublas's axpy, dot and iamax over NumPy arrays, with their conventions (y updated in place, a 0-d
    result, a 1-based index): `blas_errors` runs the device arithmetic through it in the CPU tests."""

    @staticmethod
    def axpy(a: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        y += a * x
        return y

    @staticmethod
    def dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.asarray(np.dot(x, y))

    @staticmethod
    def iamax(x: np.ndarray) -> np.ndarray:
        return np.asarray(np.argmax(np.abs(x)) + 1, dtype=np.int32)


def check_output(runner: Any, problem: Any) -> tuple[float, float]:
    """The point's kernel error: on the device when the runner gives its output there (`device_output`, a float64
    device array) and the reference is a device array, else on the host (`runner.output` and the reference as
    float64 NumPy). (nan, nan) without a reference."""
    ref = problem.ref
    if ref is None:
        return math.nan, math.nan
    device_output = getattr(runner, "device_output", None)
    if device_output is not None and is_device_array(ref):
        y = device_output(problem)
        if y is not None:
            return relative_errors(y, ref)
    return host_errors(runner.output(problem), ref)


def poison(out: Any) -> None:
    """Fill an output with NaN (integer outputs: the most negative value; unsigned, e.g. bf16 bits: all ones, a NaN)
    so that unwritten elements fail the check."""
    try:
        dtype = np.dtype(str(getattr(out, "dtype", "float32")).replace("torch.", ""))
    except TypeError:  # e.g. torch.bfloat16: a float
        dtype = np.dtype("float32")
    if dtype.kind == "u":
        value: float | int = int(np.iinfo(dtype).max)
    elif dtype.kind == "i":
        value = int(np.iinfo(dtype).min)
    else:
        value = math.nan
    if hasattr(out, "fill_"):
        out.fill_(value)
    else:
        out.fill(value)
