"""Measured points joined with their predictions: ratios, achieved rates, model-error summaries, whole-model roll-ups.

Public API (stable; the dashboard and the hypotheses evaluator call these):

- `compare_points(measured, *, calibrations=None) -> DataFrame` — one row per measured point with every column of
  `workbench.storage.schema.COMPARISON_COLUMNS`, plus `EXTRA_COLUMNS` (signed errors, spread, bandwidth fraction,
  timestamp).
- `latest_points(comparison) -> DataFrame` — one row per (gpu_key, kernel, scheme, M, N, K, mode): the newest.
- `best_per_scheme(comparison, schemes=None) -> DataFrame` — the fastest measured kernel of each scheme per point.
- `error_summary(comparison, by=("gpu_key",)) -> DataFrame` — median / p90 / max |error| per group and tier,
  throttled points excluded and counted.
- `rollup_measured(comparison, model, *, gpu_key=None, schemes=None, batches=None, calibrations=None) -> DataFrame`
  — whole-model decode step time (Σ count × layer time) and tokens/s, measured beside predicted.

Speedups and crossovers live in `workbench.analysis.speedup`.

Definitions (all times in seconds; a "tier" is datasheet, calibrated or floor):
- ratio_<tier> = predicted time / measured median time; error_<tier> = ratio_<tier> − 1 (signed fraction; negative
  means the model is optimistic, which a roofline normally is).
- achieved_bytes_per_s = bytes / measured time and achieved_flops_per_s = flops / measured time, with bytes and flops
  from `models.schemes.traffic` (the same accounting the model uses).
- roofline_fraction = roofline time / measured time, against the calibrated tier where the GPU has a calibration,
  else the datasheet tier: 1.0 means the kernel runs at the roofline.
- bandwidth_fraction = achieved_bytes_per_s / the calibrated read-stream ceiling (the datasheet bandwidth without
  a calibration; `bandwidth_ceiling_source` says which).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError
from models.kernel_fit import OUTPUT_COLUMNS
from models.roofline import TIERS
from workbench.analysis.kernel_tier import kernel_tier
from workbench.storage.schema import COMPARISON_COLUMNS, MEASUREMENT_COLUMNS

POINT_KEY = ("gpu_key", "kernel", "scheme", "M", "N", "K", "mode")
EXTRA_COLUMNS: dict[str, str] = {
    "error_datasheet": "float64",
    "error_calibrated": "float64",
    "error_floor": "float64",
    "error_kernel": "float64",
    # the kernel-aware tier's attribution (workbench.analysis.kernel_tier; seconds, they add up to time_kernel_s)
    # and the remainder measured - predicted; the kernel's own roofline; where its figures and parameters came from
    "attr_fixed_s": "float64",
    "attr_fixup_s": "float64",
    "attr_memory_s": "float64",
    "attr_alu_s": "float64",
    "attr_tensor_s": "float64",
    "attr_remainder_s": "float64",
    "kernel_bandwidth_bytes_per_s": "float64",
    "kernel_peak_flops_per_s": "float64",
    "kernel_terms_source": "string",
    "kernel_params_source": "string",
    "spread_rel": "float64",
    "bandwidth_ceiling_bytes_per_s": "float64",
    "bandwidth_ceiling_source": "string",  # "calibrated" | "datasheet" | ""
    "bandwidth_fraction": "float64",
    "backend": "string",
    "timestamp": "string",
}
ALL_COLUMNS: dict[str, str] = {**COMPARISON_COLUMNS, **EXTRA_COLUMNS}
_PRED_TIME = TIERS


# ---------------------------------------------------------------------------------------------------- helpers
def empty_comparison() -> pd.DataFrame:
    """A typed comparison frame with no rows."""
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in ALL_COLUMNS.items()})


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """Every column of ALL_COLUMNS (compare_points builds each one) cast to its declared dtype."""
    out = {}
    for col, dtype in ALL_COLUMNS.items():
        series = df[col]
        if dtype == "string":
            out[col] = series.astype("string").fillna("")
        else:  # float64, int64, boolean
            out[col] = series.astype(dtype)
    return pd.DataFrame(out).reset_index(drop=True)


def throttled_mask(df: pd.DataFrame) -> pd.Series:
    """True where a point was throttled; <NA> (no NVML) counts as not throttled."""
    if "throttled" not in df.columns:
        return pd.Series(False, index=df.index)
    return df["throttled"].astype("boolean").fillna(False).astype(bool)


def model_calibrations(calibrations: Mapping[str, Any] | None) -> dict[str, Any]:
    """gpu_key -> models.hardware.Calibration; store dicts (workbench.storage.store.load_calibrations) are parsed."""
    from models.hardware import parse_calibration

    return {k: parse_calibration(dict(v), k) if isinstance(v, Mapping) else v for k, v in (calibrations or {}).items()}


def _datasheet_bandwidth(gpu_keys: Iterable[str]) -> dict[str, float]:
    """Catalogue bandwidth per gpu_key; every key is in the catalogue (predict has refused any other first)."""
    from models.hardware import get_gpu

    return {k: float(get_gpu(k).bandwidth) for k in gpu_keys}


def _predict(points: pd.DataFrame, calibrations: Mapping[str, Any], sm_clock_hz: np.ndarray | None) -> pd.DataFrame:
    """models.roofline.predict on (gpu, scheme, M, N, K) rows, compute ceilings scaled by each row's SM clock."""
    from models.roofline import predict

    return predict(points, calibrations=dict(calibrations) or None, sm_clock_hz=sm_clock_hz)  # keeps the RangeIndex


# ---------------------------------------------------------------------------------------------------- comparison
def compare_points(measured: pd.DataFrame, *, calibrations: Mapping[str, Any] | None = None,
                   params: Any = None) -> pd.DataFrame:
    """Join each measured point with its datasheet, calibrated and calibrated+floor predictions.

    `measured` has the columns of MEASUREMENT_COLUMNS (as `workbench.storage.store.load_measurements` returns them);
    `calibrations` maps gpu_key to a calibration (a store dict or a `models.hardware.Calibration`). Rows whose
    gpu_key is empty (a GPU outside the catalogue) cannot be predicted and are dropped.
    """
    needed = ("gpu_key", "scheme", "kernel", "M", "N", "K", "time_median_s")
    missing = [c for c in needed if c not in measured.columns]
    if missing:
        raise InputError(f"measurements lack column(s) {', '.join(missing)}; expected the measurement schema")
    df = measured.copy()
    for col, dtype in MEASUREMENT_COLUMNS.items():
        if col not in df.columns:
            nullable = {"int64": "Int64", "float64": "Float64"}.get(dtype, dtype)  # NumPy float64 rejects pd.NA
            df[col] = pd.Series([pd.NA] * len(df), index=df.index, dtype=nullable)
    df = df[df["gpu_key"].astype("string").fillna("") != ""].reset_index(drop=True)
    # MoE expert layers (profile --moe) are not dense GEMMs: workbench.analysis.moe_tier reads them
    df = df[pd.to_numeric(df["experts"], errors="coerce").fillna(1).to_numpy() <= 1].reset_index(drop=True)
    if df.empty:
        return empty_comparison()
    cals = model_calibrations(calibrations)
    points = pd.DataFrame(
        {
            "gpu": df["gpu_key"].astype(str).to_numpy(),
            "scheme": df["scheme"].astype(str).to_numpy(),
            "M": df["M"].astype("int64").to_numpy(),
            "N": df["N"].astype("int64").to_numpy(),
            "K": df["K"].astype("int64").to_numpy(),
            "group_size": df["group_size"].astype("float64").where(df["group_size"].astype("float64") > 0).to_numpy(),
        }
    )
    clock = df["sm_clock_median_hz"].astype("float64").to_numpy()
    pred = _predict(points, cals, clock)
    measured_t = df["time_median_s"].astype("float64").to_numpy()
    stored = df["bytes"].astype("float64").to_numpy()  # a MEASUREMENT_COLUMNS column: filled with NA above if absent
    kt = kernel_tier(pd.DataFrame({"gpu": points["gpu"], "kernel": df["kernel"].astype(str).to_numpy(),
                                   "M": points["M"], "N": points["N"], "K": points["K"], "mode": df["mode"].to_numpy(),
                                   "bytes": np.where(np.isfinite(stored) & (stored > 0), stored, pred["bytes"])}),
                     cals, params)
    pred["time_kernel_s"] = kt["time_kernel_s"].to_numpy(dtype="float64")
    out = pd.DataFrame(
        {
            "gpu_key": df["gpu_key"],
            "gpu_name": df["gpu_name"],
            "scheme": df["scheme"],
            "kernel": df["kernel"],
            "role": df["role"],
            "layer": df["layer"],
            "M": df["M"],
            "N": df["N"],
            "K": df["K"],
            "mode": df["mode"],
            "bytes": pred["bytes"].to_numpy(dtype="float64"),
            "flops": pred["flops"].to_numpy(dtype="float64"),
            "intensity": pred["intensity"].to_numpy(dtype="float64"),
            "time_measured_s": measured_t,
            "time_p10_s": df["time_p10_s"].astype("float64").to_numpy(),
            "time_p90_s": df["time_p90_s"].astype("float64").to_numpy(),
            "sm_clock_median_hz": clock,
            "throttled": df["throttled"].astype("boolean"),
            "ref_error_rel": df["ref_error_rel"].astype("float64").to_numpy(),
            "spread_rel": df["spread_rel"].astype("float64").to_numpy(),
            "backend": df["backend"],
            "timestamp": df["timestamp"],
        }
    )
    for tier, col in _PRED_TIME.items():  # predict returns every roofline tier; time_kernel_s was added above
        t = pred[col].to_numpy(dtype="float64")
        out[col] = t
        out[f"ratio_{tier}"] = t / measured_t
        out[f"error_{tier}"] = t / measured_t - 1.0
    out["bound_datasheet"] = pred["bound_datasheet"].to_numpy()  # never missing: "memory" | "compute"
    out["bound_calibrated"] = pred["bound_calibrated"].to_numpy()  # "" without a calibration; _typed fills NA
    out["achieved_bytes_per_s"] = out["bytes"] / measured_t
    out["achieved_flops_per_s"] = out["flops"] / measured_t
    for col in OUTPUT_COLUMNS[1:]:
        out[col] = kt[col].to_numpy()
    out["attr_remainder_s"] = measured_t - out["time_kernel_s"]
    roof = np.where(np.isfinite(out["time_calibrated_s"]), out["time_calibrated_s"], out["time_datasheet_s"])
    out["roofline_fraction"] = roof / measured_t
    _add_bandwidth_fraction(out, cals)
    return _typed(out)


def _add_bandwidth_fraction(out: pd.DataFrame, cals: Mapping[str, Any]) -> None:
    keys = sorted(set(out["gpu_key"].astype(str)))
    sheet = _datasheet_bandwidth(keys)
    ceiling = {}
    source = {}
    for key in keys:
        read = float(cals[key].bandwidth) if key in cals else float("nan")
        if np.isfinite(read) and read > 0:
            ceiling[key], source[key] = read, "calibrated"
        else:
            ceiling[key], source[key] = sheet[key], "datasheet"
    gk = out["gpu_key"].astype(str)
    out["bandwidth_ceiling_bytes_per_s"] = gk.map(ceiling).astype("float64").to_numpy()
    out["bandwidth_ceiling_source"] = gk.map(source).to_numpy()
    out["bandwidth_fraction"] = out["achieved_bytes_per_s"] / out["bandwidth_ceiling_bytes_per_s"]


def latest_points(comparison: pd.DataFrame) -> pd.DataFrame:
    """One row per (gpu_key, kernel, scheme, M, N, K, mode): the newest measurement (by timestamp) of each point."""
    if comparison.empty:
        return comparison
    order = comparison.sort_values("timestamp", kind="stable")
    return order.drop_duplicates(subset=list(POINT_KEY), keep="last").reset_index(drop=True)


def best_per_scheme(comparison: pd.DataFrame, schemes: Iterable[str] | None = None) -> pd.DataFrame:
    """The fastest measured kernel of each scheme at each (gpu_key, N, K, M, mode), by median time.

    This is the "best kernel per scheme and batch" selection the hypotheses use: a claim about W4A16 at batch 1 is
    a claim about the fastest W4A16 kernel measured there, ours or a peer's. Ties keep the first kernel by name.
    """
    df = latest_points(comparison)
    if schemes is not None:
        df = df[df["scheme"].isin(list(schemes))]
    if df.empty:
        return df.reset_index(drop=True)
    df = df.sort_values(["time_measured_s", "kernel"], kind="stable")
    best = df.drop_duplicates(subset=["gpu_key", "scheme", "N", "K", "M", "mode"], keep="first")
    return best.sort_values(["gpu_key", "scheme", "N", "K", "mode", "M"]).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------- error summary
def error_summary(comparison: pd.DataFrame, by: Iterable[str] = ("gpu_key",)) -> pd.DataFrame:
    """Model error per group and tier: n, median / p90 / max of |error| and the median signed error.

    Throttled points are excluded and counted in `n_throttled`; points without a prediction for a tier (no
    calibration) are left out of that tier and the tier row reports n = 0.
    Columns: *by, tier, n, n_throttled, median_abs_error, p90_abs_error, max_abs_error, median_error.
    """
    by = list(by)
    rows = []
    if comparison.empty:
        cols = [*by, "tier", "n", "n_throttled", "median_abs_error", "p90_abs_error", "max_abs_error", "median_error"]
        return pd.DataFrame({c: [] for c in cols})
    marked = comparison.assign(_thr=throttled_mask(comparison))
    groups = marked.groupby(by, sort=True, dropna=False) if by else [((), marked)]
    for key, group in groups:  # a list `by` gives tuple keys, also of one column
        thr = group["_thr"]
        kept = group[~thr.to_numpy(dtype=bool)]
        for tier in TIERS:
            if f"error_{tier}" not in kept:  # a comparison written before the tier existed
                continue
            err = kept[f"error_{tier}"].to_numpy(dtype="float64")
            err = err[np.isfinite(err)]
            absolute = np.abs(err)
            rows.append(
                {
                    **dict(zip(by, key, strict=True)),
                    "tier": tier,
                    "n": int(err.size),
                    "n_throttled": int(thr.sum()),
                    "median_abs_error": float(np.median(absolute)) if err.size else float("nan"),
                    "p90_abs_error": float(np.percentile(absolute, 90)) if err.size else float("nan"),
                    "max_abs_error": float(absolute.max()) if err.size else float("nan"),
                    "median_error": float(np.median(err)) if err.size else float("nan"),
                }
            )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------- roll-up
ROLLUP_COLUMNS = (
    "model", "gpu_key", "scheme", "M", "mode", "n_layers", "n_layers_measured", "kernels", "time_step_measured_s",
    "tokens_per_s_measured", "time_step_datasheet_s", "time_step_calibrated_s", "time_step_floor_s",
    "time_step_predicted_s", "predicted_tier", "tokens_per_s_predicted", "ratio_predicted",
    "time_measured_layers_s", "time_predicted_measured_layers_s", "throttled",
)  # fmt: skip


def rollup_measured(
    comparison: pd.DataFrame,
    model: str,
    *,
    gpu_key: str | None = None,
    schemes: Iterable[str] | None = None,
    batches: Iterable[int] | None = None,
    calibrations: Mapping[str, Any] | None = None,
    mode: str = "cold",
) -> pd.DataFrame:
    """Whole-model decode step time from measured layer times, beside the predicted one, per (GPU, scheme, M).

    time_step = Σ over the model's linear layers of count × layer time, with each layer timed by the fastest kernel
    of the scheme measured at that (N, K, M) (`best_per_scheme`); tokens/s = M / time_step (a decode step makes one
    token for each of the M sequences). The measured step is NaN unless every layer was measured (MoE expert layers,
    which run on a fraction of the batch, never are: they count as unmeasured). The predicted steps sum
    `models.roofline.predict` over the same layers at the calibration clock (MoE layers: the expected number of
    distinct experts × the time of one expert at its expected tokens, rounded up, from `models.workloads.expert_load`).
    Defaults: every GPU, scheme and batch measured (in `mode`) for at least one layer of the model. Where only some
    layers were measured, time_measured_layers_s (Σ count × time over the measured layers) sits beside
    time_predicted_measured_layers_s (the predicted tier summed over the same layers), so like compares with like.
    """
    from models.workloads import get_model

    layers = get_model(model).layers
    cals = model_calibrations(calibrations)
    df = comparison[comparison["mode"] == mode] if len(comparison) else comparison
    if gpu_key is not None:
        df = df[df["gpu_key"] == gpu_key]
    shapes = {(layer.N, layer.K) for layer in layers}
    if len(df):
        on_shape = [(int(n), int(k)) in shapes for n, k in zip(df["N"], df["K"], strict=True)]
        df = df[np.asarray(on_shape, dtype=bool)]
    best = best_per_scheme(df, schemes)
    scheme_list = list(schemes) if schemes is not None else sorted(set(best["scheme"]))
    gpus = [gpu_key] if gpu_key is not None else sorted(set(best["gpu_key"]))
    rows = []
    for gpu in gpus:
        for scheme in scheme_list:
            mine = best[(best["gpu_key"] == gpu) & (best["scheme"] == scheme)]
            ms = sorted({int(m) for m in batches}) if batches is not None else sorted(set(mine["M"].astype(int)))
            for m in ms:
                rows.append(_rollup_row(model, layers, gpu, scheme, m, mode, mine[mine["M"] == m], cals))
    return pd.DataFrame(rows, columns=list(ROLLUP_COLUMNS))


def _rollup_row(
    model: str, layers: tuple, gpu: str, scheme: str, m: int, mode: str, best: pd.DataFrame, cals: Mapping[str, Any]
) -> dict[str, Any]:
    from models.workloads import expert_load

    measured, used, throttled, n_measured = 0.0, [], False, 0
    points, was_measured = [], []
    for layer in layers:
        active, tokens = expert_load(m, layer.experts, layer.top_k)
        weight = layer.count * float(active)
        points.append((layer.N, layer.K, int(np.ceil(float(tokens) - 1e-9)), weight))
        row = best[(best["N"] == layer.N) & (best["K"] == layer.K)] if layer.experts <= 1 else best.iloc[0:0]
        was_measured.append(not row.empty)
        if row.empty:
            continue
        n_measured += 1
        measured += layer.count * float(row["time_measured_s"].iloc[0])
        used.append(f"{layer.name}={row['kernel'].iloc[0]}")
        throttled |= bool(throttled_mask(row).iloc[0])
    step = measured if n_measured == len(layers) else float("nan")
    frame = pd.DataFrame(
        {
            "gpu": gpu,
            "scheme": scheme,
            "M": [p[2] for p in points],
            "N": [p[0] for p in points],
            "K": [p[1] for p in points],
        }  # fmt: skip
    )
    pred = _predict(frame, {k: v for k, v in cals.items() if k == gpu}, None)
    weights = np.array([p[3] for p in points])
    tiers = {}
    for tier in ("datasheet", "calibrated", "floor"):  # the roofline tiers predict returns (no kernel tier here)
        tiers[tier] = float(np.sum(weights * pred[_PRED_TIME[tier]].to_numpy(dtype="float64")))
    tier = "floor" if np.isfinite(tiers["floor"]) else "datasheet"
    predicted = tiers[tier]
    tier_time = pred[_PRED_TIME[tier]].to_numpy(dtype="float64")
    predicted_measured_layers = float(np.sum((weights * tier_time)[np.asarray(was_measured, dtype=bool)]))
    return {
        "model": model,
        "gpu_key": gpu,
        "scheme": scheme,
        "M": m,
        "mode": mode,
        "n_layers": len(layers),
        "n_layers_measured": n_measured,
        "kernels": ";".join(used),
        "time_step_measured_s": step,
        "tokens_per_s_measured": m / step,
        "time_step_datasheet_s": tiers["datasheet"],
        "time_step_calibrated_s": tiers["calibrated"],
        "time_step_floor_s": tiers["floor"],
        "time_step_predicted_s": predicted,
        "predicted_tier": tier,
        "tokens_per_s_predicted": m / predicted,
        "ratio_predicted": predicted / step,
        "time_measured_layers_s": measured if n_measured else float("nan"),
        "time_predicted_measured_layers_s": predicted_measured_layers if n_measured else float("nan"),
        "throttled": throttled,
    }
