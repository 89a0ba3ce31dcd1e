"""The kernel-aware tier on the analysis side: kernel facts from the kernel catalogue (data/model/kernel-facts.json,
published from the registry by `workbench kernel-facts`: nothing here imports `kernels`), GPU figures from the
calibrations, fitted parameters from data/model/kernel-params.json, joined to measured rows or to bare
(scheme, M, N, K) points.

- `kernel_tier(points, calibrations)`: rows naming a kernel get time_kernel_s and its attribution. L2-hot rows are
  left NaN (the tier models L2-cold reads) and say so.
- `best_kernel_tier(points, calibrations)`: rows naming only a scheme get the fastest prediction among the registered
  kernels of that scheme that run at that M on that GPU (`kernel_predicted` names it): how `workbench predict`
  speaks for kernels and GPUs never measured.
- `predict_tiers(points, calibrations)`: every tier for bare points: the roofline tiers (models.roofline.predict) and
  the kernel tier of the fastest registered kernel per scheme (what `workbench predict` and the dashboard draw).
- `fit_rows(measured)`: the rows parameters are estimated from (L2-cold, unthrottled or power-capped at full clock,
  finite, checked).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models import kernel_catalogue as catalogue
from models.errors import InputError
from models.hardware import Calibration, get_gpu, load_calibrations
from models.kernel_fit import OUTPUT_COLUMNS, predict_kernels
from models.kernel_model import ParamTable, load_params
from models.kernel_terms import GpuTerms, KernelFacts, gpu_terms
from models.library_kernels import LIBRARY
from models.paths import catalogue_dir, data_dir
from models.transfer import FACTORS_FILE, TransferFactors, load_factors, transfer_terms

PARAMS_FILE = Path("model") / "kernel-params.json"  # under the data directory


def params_path(root: str | Path | None = None) -> Path:
    return (Path(root) if root is not None else data_dir()) / PARAMS_FILE


def params_for(root: str | Path | None = None) -> ParamTable:
    """The kernel tier's parameters for a data directory: its own model/kernel-params.json when it holds one (what
    `workbench model-fit --data-dir DIR` writes), else the shipped ones."""
    own = params_path(root) if root is not None else None
    return load_params(own if own is not None and own.is_file() else params_path())


def kernel_entries() -> dict[str, catalogue.KernelEntry]:
    """Every modeled kernel: the registered ones (the kernel catalogue) and the vendor-library kernels modeled only
    (models.library_kernels)."""
    return {**LIBRARY, **catalogue.shipped()}


def kernel_facts() -> dict[str, KernelFacts]:
    """Kernel name -> its KernelFacts, for every modeled kernel that declares them."""
    return {name: e.facts for name, e in kernel_entries().items() if e.facts is not None}


def _kernel_limits() -> dict[str, tuple[str, int, int, int, int | None]]:
    return {e.name: (e.scheme, e.m_min, e.m_max, e.min_cc, e.max_cc) for e in kernel_entries().values() if e.facts}


def with_library_params(table: ParamTable, factors: TransferFactors | None) -> ParamTable:
    """`table` (fitted on our measurements) plus the library kernels' parameters fitted on public timings; a kernel
    in both keeps `table`'s."""
    if factors is None or not factors.kernels:
        return table
    return ParamTable({**factors.kernels, **table.kernels}, table.provenance)


@functools.cache
def shipped_factors() -> TransferFactors | None:
    """The transfer factors shipped in data/model/transfer-factors.json (None if absent), read once per process."""
    return load_factors(data_dir() / FACTORS_FILE)


def factors_for(root: str | Path | None = None) -> TransferFactors | None:
    """The transfer factors of a data directory: its own model/transfer-factors.json when it holds one (what
    `workbench model-fit --transfer --data-dir DIR` writes), else the shipped ones."""
    own = Path(root) / FACTORS_FILE if root is not None else None
    return load_factors(own) if own is not None and own.is_file() else shipped_factors()


_SHIPPED = object()


def gpu_lookup(calibrations: Mapping[str, Calibration] | None, factors: Any = _SHIPPED) -> Any:
    """gpu key -> GpuTerms: measured where the GPU has a calibration with a read curve, transferred from the
    reference GPU by `factors` (default: the shipped ones; None: no transfer) otherwise, datasheet where neither."""
    cache: dict[str, GpuTerms] = {}
    factors = shipped_factors() if factors is _SHIPPED else factors
    cals = dict(calibrations or {})

    @functools.cache
    def reference() -> GpuTerms | None:
        # the reference's calibration ships with the catalogue (an installed wheel has no dataset of its own)
        ref_cal = cals.get(factors.reference_gpu) or load_calibrations(catalogue_dir()).get(factors.reference_gpu)
        ref = gpu_terms(factors.reference_gpu, ref_cal) if ref_cal is not None else None
        return ref if ref is not None and ref.sources.get("memory") == "calibrated" else None

    def get(key: str) -> GpuTerms:
        if key not in cache:
            own = gpu_terms(key, cals.get(key))
            ref = reference() if factors is not None and own.sources.get("memory") != "calibrated" else None
            cache[key] = (transfer_terms(get_gpu(key), ref, get_gpu(factors.reference_gpu), factors)
                          if ref is not None else own)
        return cache[key]

    return get


def kernel_tier(points: pd.DataFrame, calibrations: Mapping[str, Calibration] | None = None,
                table: ParamTable | None = None, factors: Any = _SHIPPED) -> pd.DataFrame:
    """The kernel tier's columns (OUTPUT_COLUMNS) for rows with gpu, kernel, M, N, K, bytes (and optional mode)."""
    factors = shipped_factors() if factors is _SHIPPED else factors
    table = with_library_params(table if table is not None else load_params(params_path()), factors)
    got = predict_kernels(points, kernel_facts(), gpu_lookup(calibrations, factors), table)
    if "mode" in points:
        hot = points["mode"].astype(str).to_numpy() == "hot"
        for c in OUTPUT_COLUMNS[:-2]:
            got.loc[hot, c] = np.nan
        got.loc[hot, "kernel_params_source"] = "L2-hot: not modelled (the tier reads L2-cold)"
    return got


def best_kernel_tier(points: pd.DataFrame, calibrations: Mapping[str, Calibration] | None = None,
                     table: ParamTable | None = None, bytes_col: str = "bytes") -> pd.DataFrame:
    """`points` (gpu, scheme, M, N, K, bytes) with time_kernel_s, its attribution and kernel_predicted: the fastest
    registered kernel of the row's scheme that supports M on the row's GPU."""
    table = table if table is not None else load_params(params_path())
    limits = _kernel_limits()
    out = points.copy()
    best = pd.DataFrame(index=out.index, columns=list(OUTPUT_COLUMNS), dtype=object)
    best["time_kernel_s"] = np.inf
    names = pd.Series("", index=out.index, dtype=object)
    cc = out["gpu"].astype(str).map(lambda k: get_gpu(k).cc_int)
    for name, (scheme, m_min, m_max, min_cc, max_cc) in limits.items():
        rows = ((out["scheme"].astype(str) == scheme) & out["M"].between(m_min, m_max) & (cc >= min_cc)
                & (cc <= (max_cc or 10**9)))
        if not rows.any():
            continue
        cand = out.loc[rows, ["gpu", "M", "N", "K"]].assign(kernel=name, bytes=out.loc[rows, bytes_col])
        got = kernel_tier(cand, calibrations, table)
        faster = got["time_kernel_s"].to_numpy(dtype=np.float64) < best.loc[rows, "time_kernel_s"].astype(float)
        idx = cand.index[faster.to_numpy()]
        best.loc[idx, list(OUTPUT_COLUMNS)] = got.loc[idx, list(OUTPUT_COLUMNS)].to_numpy()
        names[idx] = name
    best["time_kernel_s"] = best["time_kernel_s"].replace(np.inf, np.nan)
    for c in OUTPUT_COLUMNS:
        out[c] = best[c].astype("float64") if c not in ("kernel_terms_source", "kernel_params_source") else best[c]
    out["kernel_predicted"] = names
    out["bound_kernel"] = kernel_bound(out)
    return out


def kernel_bound(out: pd.DataFrame) -> np.ndarray:
    """The term that sets each row's kernel-tier time: fixed, memory, alu or tensor ("" where not predicted)."""
    terms = out[["attr_memory_s", "attr_alu_s", "attr_tensor_s"]].to_numpy(dtype=np.float64)
    fixed = out[["attr_fixed_s", "attr_fixup_s"]].to_numpy(dtype=np.float64).sum(axis=1)
    largest = np.array(["memory", "alu", "tensor"], dtype=object)[np.nan_to_num(terms, nan=-1.0).argmax(axis=1)]
    return np.where(np.isnan(terms).all(axis=1), "", np.where(fixed > terms.max(axis=1, initial=0), "fixed",
                                                                largest))


def unsupported(name: str, gpu_key: str, M: int) -> str:
    """Why kernel `name` is not predicted on a GPU at batch M ("" when it is): its batch range or architecture."""
    e = kernel_entries()[name]
    cc = get_gpu(gpu_key).cc_int
    if not e.m_min <= M <= e.m_max:
        return f"{name} runs at M = {e.m_min}-{e.m_max}"
    if cc < e.min_cc or (e.max_cc is not None and cc > e.max_cc):
        arch = f"sm_{e.min_cc}" + (f" to sm_{e.max_cc}" if e.max_cc and e.max_cc != e.min_cc else
                                   "" if e.max_cc else " or newer")
        return f"{name} needs {arch}; {gpu_key} is sm_{cc}"
    return ""


def named_kernel_tier(points: pd.DataFrame, calibrations: Mapping[str, Calibration] | None = None,
                      table: ParamTable | None = None) -> pd.DataFrame:
    """`points` (gpu, kernel, M, N, K, bytes) with the kernel tier of each row's named kernel, kernel_predicted and
    bound_kernel; a kernel that does not run on the row's GPU or batch is left NaN and kernel_params_source says
    why (instead of a prediction)."""
    unknown = sorted(set(points["kernel"].astype(str)) - set(kernel_facts()))
    if unknown:
        raise InputError(f"unknown kernel {unknown[0]!r}; modeled kernels: {', '.join(sorted(kernel_facts()))}")
    out = kernel_tier(points, calibrations, table)
    why = [unsupported(k, g, int(m)) for k, g, m in zip(out["kernel"].astype(str), out["gpu"].astype(str), out["M"],
                                                         strict=True)]
    off = np.array([bool(w) for w in why])
    for c in OUTPUT_COLUMNS[:-2]:
        out.loc[off, c] = np.nan
    out.loc[off, "kernel_params_source"] = [w for w in why if w]
    out["kernel_predicted"] = out["kernel"].astype(str)
    out["bound_kernel"] = kernel_bound(out)
    return out


def predict_tiers(points: pd.DataFrame, calibrations: Mapping[str, Calibration] | None = None,
                  kernel: bool = True, table: ParamTable | None = None) -> pd.DataFrame:
    """`points` (gpu, scheme, M, N, K, optional group_size and any other columns) with the roofline tiers and, when
    `kernel`, the kernel tier of the fastest registered kernel of each scheme at each M (best_kernel_tier)."""
    from models.roofline import predict

    pred = predict(points, dict(calibrations) if calibrations else None)
    return best_kernel_tier(pred, calibrations, table) if kernel else pred


# A point flagged `throttled` only because the power cap was active (NVML's sw_power_cap bit) while its lowest sampled
# SM clock stayed within 3 % of the calibration clock ran at full speed: on the H200's 91cc094 recording 572 such
# points read 1.003x (median; p90 1.014x) the earlier recording's unflagged times of the same points, as unflagged
# pairs do (1.000x, p90 1.009x). They count as unthrottled here; any other reason or a lower clock does not.
HELD_CLOCK_REASONS = frozenset({"sw_power_cap"})
HELD_CLOCK_FRACTION = 0.97


def held_clock(df: pd.DataFrame) -> pd.Series:
    """Whether each flagged point's only throttle reasons are HELD_CLOCK_REASONS and its lowest SM clock stayed at
    HELD_CLOCK_FRACTION of the calibration clock or above (False where a column is missing or NaN)."""
    if not {"clock_reasons", "sm_clock_min_hz", "calibration_sm_clock_hz"} <= set(df.columns):
        return pd.Series(False, index=df.index)
    reasons = (frozenset(filter(None, r.split(","))) if isinstance(r, str) else frozenset()
               for r in df["clock_reasons"].tolist())
    only_cap = np.fromiter((bool(r) and r <= HELD_CLOCK_REASONS for r in reasons), dtype=bool, count=len(df))
    sm_min = df["sm_clock_min_hz"].to_numpy(dtype=np.float64, na_value=np.nan)
    cal = df["calibration_sm_clock_hz"].to_numpy(dtype=np.float64, na_value=np.nan)
    return pd.Series(only_cap & (sm_min >= HELD_CLOCK_FRACTION * cal), index=df.index)


def fit_rows(measured: pd.DataFrame, keep_throttled: bool = False) -> pd.DataFrame:
    """Rows a fit or a check may use: L2-cold, unthrottled (unless `keep_throttled`; a point flagged for the power
    cap alone at full clock counts as unthrottled: `held_clock`), finite positive time, passed the float64 check."""
    df = measured.copy()
    ok = (df["mode"].astype(str) == "cold") & (df["time_median_s"].astype(float) > 0)
    if "throttled" in df and not keep_throttled:
        ok &= ~df["throttled"].astype("boolean").fillna(False).astype(bool) | held_clock(df)
    if "ref_error_rel" in df:
        err = df["ref_error_rel"].astype(float)
        ok &= ~(err > 0.05)
    df = df[ok.to_numpy()].copy()
    df["gpu"] = df["gpu_key"].astype(str)
    return df.reset_index(drop=True)
