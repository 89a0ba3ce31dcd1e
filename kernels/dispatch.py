"""The best kernel per scheme and batch: which registered kernel a speedup curve should use at each M.

Candidates are the registry's "optimized" kernels of a scheme whose batch range holds M (and whose minimum compute
capability the GPU meets). With measurements, the fastest candidate measured at that M wins (compared on the
(N, K) shapes every measured candidate has); without, the most specialized one does: the candidate with the largest
`prefer_from` (default m_min) not above M (the tensor-core GEMMs from batch 16, though they run any M; the GEMV
kernels below), ties broken by name. Pure Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kernels import registry
from kernels.registry import KernelSpec
from models.errors import InputError


def candidates(scheme: str, M: int, cc: int | None = None,
               specs: Sequence[KernelSpec] | None = None) -> list[KernelSpec]:
    """Optimized kernels of `scheme` that run batch M (on compute capability cc, e.g. 90, when given)."""
    if M < 1:
        raise InputError(f"batch M must be >= 1, got {M}")
    pool = registry.specs(scheme=scheme) if specs is None else [s for s in specs if s.scheme == scheme]
    return [s for s in pool if s.role == "optimized" and s.supports(M, cc)]


def _preferred_from(spec: KernelSpec) -> int:
    return spec.m_min if spec.prefer_from is None else spec.prefer_from


def _static_choice(cands: list[KernelSpec], M: int) -> KernelSpec:
    eligible = [s for s in cands if _preferred_from(s) <= M] or cands
    return sorted(eligible, key=lambda s: (-_preferred_from(s), s.name))[0]


def _measured_choice(cands: list[KernelSpec], M: int, measured: Any,
                     shape: tuple[int, int] | None) -> KernelSpec | None:
    names = {s.name: s for s in cands}
    rows = measured[(measured["M"] == M) & measured["kernel"].isin(list(names))]
    if shape is not None:
        rows = rows[(rows["N"] == shape[0]) & (rows["K"] == shape[1])]
    if rows.empty:
        return None
    table = rows.groupby(["N", "K", "kernel"])["time_median_s"].median().unstack("kernel")
    table = table.dropna(axis=0, how="any")  # shapes every measured candidate has
    if table.empty:
        return None
    total = table.sum(axis=0)
    return names[str(total.idxmin())]


def best_kernel(scheme: str, M: int, measured: Any = None, cc: int | None = None,
                shape: tuple[int, int] | None = None, specs: Sequence[KernelSpec] | None = None) -> KernelSpec | None:
    """The kernel to use for `scheme` at batch M; None when no optimized kernel runs it.

    measured: a DataFrame with columns kernel, M, N, K, time_median_s (the profiler's measurement rows); shape
    restricts the comparison to one (N, K).
    """
    cands = candidates(scheme, M, cc, specs)
    if not cands:
        return None
    if measured is not None and len(measured):
        missing = {"kernel", "M", "N", "K", "time_median_s"} - set(measured.columns)
        if missing:
            raise InputError(f"measurements lack column(s) {', '.join(sorted(missing))} needed to pick a kernel")
        chosen = _measured_choice(cands, M, measured, shape)
        if chosen is not None:
            return chosen
    return _static_choice(cands, M)


def dispatch_table(schemes: Iterable[str], batches: Iterable[int], measured: Any = None, cc: int | None = None,
                   specs: Sequence[KernelSpec] | None = None) -> list[dict[str, Any]]:
    """One row per (scheme, M): the chosen kernel name ("" if none) and why ("measured" or "range")."""
    rows = []
    batches = list(batches)
    for scheme in schemes:
        for M in batches:
            spec = best_kernel(scheme, M, measured, cc, specs=specs)
            how = "range"
            if spec is not None and measured is not None and len(measured):
                if _measured_choice(candidates(scheme, M, cc, specs), M, measured, None) is not None:
                    how = "measured"
            rows.append({"scheme": scheme, "M": M, "kernel": spec.name if spec else "", "chosen_by": how})
    return rows


def best_rows(measured: Any) -> Any:
    """The measurement rows of the fastest optimized kernel per (gpu, scheme, M, N, K, mode): the speedup curves'
    input. Kernels not in the registry or not 'optimized' are left out."""
    known = {s.name for s in registry.specs(role="optimized")}
    rows = measured[measured["kernel"].isin(list(known))]
    if rows.empty:
        return rows
    keys = [c for c in ("gpu_key", "gpu_name", "scheme", "M", "N", "K", "mode") if c in rows.columns]
    idx = rows.groupby(keys, dropna=False)["time_median_s"].idxmin()
    return rows.loc[idx.values].reset_index(drop=True)
