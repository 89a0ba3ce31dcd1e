"""The roofline model, vectorized over a DataFrame of (gpu, scheme, M, N, K) points, in three tiers of columns.

datasheet   t_memory = bytes / bandwidth, t_compute = flops / peak(compute unit used), time = max of the two.
calibrated  the same with the ceilings `workbench calibrate` measured on that GPU (models.hardware.Calibration);
            compute ceilings scale with the SM clock: peak × sm_clock_hz / calibration.sm_clock_hz when a row gives
            its clock (bandwidth does not: it follows the memory clock, which does not throttle with the SMs).
floor       time_floor = max(t_memory_cal, t_compute_cal × q) + graph_launch_floor_s, where the floor is the
            per-launch cost of an empty kernel replayed in a CUDA graph (how the profiler times) and q is wave
            quantization, applied only when a row gives its grid size in a `ctas` column:
            q = ceil(ctas / sms) / (ctas / sms) — the tensor-core ceiling is per SM, and a partial last wave leaves
            SMs idle. The floor is additive because a launch's fixed cost does not overlap its own streaming.
            Nothing here is fitted to measured points.

bytes and flops come from models.schemes.traffic (the one accounting). The bound is the larger term; for the
calibrated tier it is "latency" when the launch floor exceeds both terms. `t_dequant_s` (informational, not in any
tier) is the dequantization instruction time: N·K·dequant_ops_per_weight / (FP32 FLOP/s / 2 instructions per FMA).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError
from models.hardware import Calibration, get_gpu
from models.schemes import SCHEME_PARAMS, get_scheme, traffic

REQUIRED = ("gpu", "scheme", "M", "N", "K")
# The one map from a tier's name to its time column; every reader (compare, CLI, dashboard, hypotheses) uses it.
# "kernel" is the kernel-aware tier (models.kernel_model): it needs a kernel, so predict() below does not fill it;
# the analysis layer (workbench.analysis.kernel_tier) does.
TIERS: dict[str, str] = {"datasheet": "time_datasheet_s", "calibrated": "time_calibrated_s", "floor": "time_floor_s",
                         "kernel": "time_kernel_s"}
TIME_COLUMNS = tuple(TIERS.values())[:3]  # the roofline tiers predict() fills


def _scheme_for(name: str, group_size: Any) -> Any:
    params = {}
    if "group_size" in SCHEME_PARAMS.get(name, {}) and group_size is not None and not pd.isna(group_size):
        params["group_size"] = int(group_size)
    return get_scheme(name, **params)


def _sm_clock(df: pd.DataFrame, sm_clock_hz: Any) -> np.ndarray:
    if sm_clock_hz is None:
        if "sm_clock_hz" in df:
            return pd.to_numeric(df["sm_clock_hz"], errors="coerce").to_numpy(dtype=np.float64)
        return np.full(len(df), np.nan)
    if isinstance(sm_clock_hz, str):
        if sm_clock_hz not in df:
            raise InputError(f"sm_clock_hz column {sm_clock_hz!r} is not in the points")
        return pd.to_numeric(df[sm_clock_hz], errors="coerce").to_numpy(dtype=np.float64)
    return np.broadcast_to(np.asarray(sm_clock_hz, dtype=np.float64), (len(df),)).copy()


def _traffic_columns(df: pd.DataFrame) -> dict[str, np.ndarray]:
    n = len(df)
    out = {k: np.empty(n) for k in ("weight_bytes", "scale_bytes", "act_bytes", "out_bytes", "bytes", "flops",
                                    "dequant_ops")}
    unit = np.empty(n, dtype=object)
    M, N, K = (df[c].to_numpy(dtype=np.float64) for c in ("M", "N", "K"))
    groups = df["group_size"] if "group_size" in df else pd.Series(np.nan, index=df.index)
    keys = pd.MultiIndex.from_arrays([df["scheme"].astype(str), groups.astype("float64")])
    codes, uniques = pd.factorize(keys)
    for code, (name, group) in enumerate(uniques):
        rows = codes == code
        scheme = _scheme_for(name, group)
        t = traffic(scheme, M[rows], N[rows], K[rows])
        for k in ("weight_bytes", "scale_bytes", "act_bytes", "out_bytes", "bytes", "flops"):
            out[k][rows] = getattr(t, k)
        out["dequant_ops"][rows] = N[rows] * K[rows] * scheme.dequant_ops_per_weight
        unit[rows] = scheme.compute_unit
    out["compute_unit"] = unit
    return out


def _ceilings(df: pd.DataFrame, units: np.ndarray, calibrations: dict[str, Calibration] | None,
              clock: np.ndarray) -> dict[str, np.ndarray]:
    n = len(df)
    cols = {k: np.full(n, np.nan) for k in ("bandwidth_bytes_per_s", "peak_flops_per_s", "fp32_flops_per_s", "sms",
                                            "bandwidth_calibrated", "peak_calibrated", "floor_s",
                                            "calibration_sm_clock_hz")}
    used = np.empty(n, dtype=object)
    used_cal = np.full(n, "", dtype=object)
    keys = pd.MultiIndex.from_arrays([df["gpu"].astype(str), pd.Index(units, dtype=object)])
    codes, uniques = pd.factorize(keys)
    for code, (gpu_name, unit) in enumerate(uniques):
        rows = codes == code
        gpu = get_gpu(gpu_name)
        used[rows], cols["peak_flops_per_s"][rows] = gpu.ceiling(unit)
        cols["bandwidth_bytes_per_s"][rows] = gpu.bandwidth
        cols["fp32_flops_per_s"][rows] = gpu.peak("fp32")
        cols["sms"][rows] = gpu.sms
        cal = (calibrations or {}).get(gpu.key)
        if cal is not None:
            used_cal[rows], cols["peak_calibrated"][rows] = cal.ceiling(unit)
            cols["bandwidth_calibrated"][rows] = cal.bandwidth
            cols["floor_s"][rows] = cal.floor_s
            cols["calibration_sm_clock_hz"][rows] = cal.sm_clock_hz
    scale = clock / cols["calibration_sm_clock_hz"]
    cols["peak_calibrated"] = np.where(np.isfinite(scale), cols["peak_calibrated"] * scale, cols["peak_calibrated"])
    cols["compute_unit_used"] = used
    cols["compute_unit_calibrated"] = used_cal
    return cols


def _bound(t_mem: np.ndarray, t_comp: np.ndarray) -> np.ndarray:
    return np.where(t_mem >= t_comp, "memory", "compute").astype(object)


def predict(points: pd.DataFrame, calibrations: dict[str, Calibration] | None = None,
            sm_clock_hz: Any = None) -> pd.DataFrame:
    """Add the model's columns to `points` (one row per gpu, scheme, M, N, K; other columns are kept).

    Optional point columns: group_size (for schemes that take one), sm_clock_hz (per-row SM clock for the
    calibrated tier; the `sm_clock_hz` argument — a number, an array or a column name — overrides it), ctas (grid
    size, for wave quantization in the floor tier). Raises InputError on an unknown GPU/scheme or bad shape.
    """
    missing = [c for c in REQUIRED if c not in points]
    if missing:
        raise InputError(f"points lack column(s) {', '.join(missing)}; need {', '.join(REQUIRED)}")
    df = points.copy()
    if df.empty:
        return df.assign(**{c: pd.Series(dtype="float64") for c in TIME_COLUMNS})
    tr = _traffic_columns(df)
    clock = _sm_clock(df, sm_clock_hz)
    ce = _ceilings(df, tr["compute_unit"], calibrations, clock)

    t_mem = tr["bytes"] / ce["bandwidth_bytes_per_s"]
    t_comp = tr["flops"] / ce["peak_flops_per_s"]
    time = np.maximum(t_mem, t_comp)
    t_mem_c = tr["bytes"] / ce["bandwidth_calibrated"]
    t_comp_c = tr["flops"] / ce["peak_calibrated"]
    time_c = np.maximum(t_mem_c, t_comp_c)  # NaN where there is no calibration
    if "ctas" in df:
        ctas = pd.to_numeric(df["ctas"], errors="coerce").to_numpy(dtype=np.float64)
        waves = ctas / ce["sms"]
        q = np.where(np.isfinite(waves) & (waves > 0), np.ceil(waves) / np.where(waves > 0, waves, 1.0), 1.0)
    else:
        q = np.ones(len(df))
    floor = ce["floor_s"]
    bound_c = np.where(np.isnan(time_c), "", _bound(t_mem_c, t_comp_c)).astype(object)
    bound_c = np.where(floor > time_c, "latency", bound_c).astype(object)

    intensity = tr["flops"] / tr["bytes"]
    new = {
        **{k: tr[k] for k in ("weight_bytes", "scale_bytes", "act_bytes", "out_bytes", "bytes", "flops")},
        "intensity": intensity,
        "compute_unit": tr["compute_unit"],
        "compute_unit_used": ce["compute_unit_used"],
        "bandwidth_bytes_per_s": ce["bandwidth_bytes_per_s"],
        "peak_flops_per_s": ce["peak_flops_per_s"],
        "t_memory_s": t_mem,
        "t_compute_s": t_comp,
        "time_datasheet_s": time,
        "bound_datasheet": _bound(t_mem, t_comp),
        "attainable_flops": tr["flops"] / time,
        "ridge": ce["peak_flops_per_s"] / ce["bandwidth_bytes_per_s"],
        "dequant_ops": tr["dequant_ops"],
        "t_dequant_s": tr["dequant_ops"] / (ce["fp32_flops_per_s"] / 2.0),
        "compute_unit_calibrated": ce["compute_unit_calibrated"],
        "bandwidth_calibrated": ce["bandwidth_calibrated"],
        "peak_calibrated": ce["peak_calibrated"],
        "t_memory_calibrated_s": t_mem_c,
        "t_compute_calibrated_s": t_comp_c,
        "time_calibrated_s": time_c,
        "bound_calibrated": bound_c,
        "attainable_flops_calibrated": tr["flops"] / time_c,
        "ridge_calibrated": ce["peak_calibrated"] / ce["bandwidth_calibrated"],
        "floor_s": floor,
        "time_floor_s": np.maximum(t_mem_c, t_comp_c * q) + floor,
    }
    for name, values in new.items():
        df[name] = values
    return df


def _keys(pred: pd.DataFrame) -> list[str]:
    return [c for c in ("gpu", "layer", "N", "K", "M") if c in pred]


def speedup(pred: pd.DataFrame, baseline: str = "bf16", time_col: str = "time_datasheet_s") -> pd.DataFrame:
    """`pred` with `time_baseline_s` and `speedup` = baseline time / time, matched per (gpu, [layer], N, K, M)."""
    if time_col not in pred:
        raise InputError(f"no column {time_col!r} to compute a speedup from; valid: {', '.join(TIME_COLUMNS)}")
    base = pred[pred["scheme"] == baseline]
    if base.empty:
        present = sorted(pred["scheme"].astype(str).unique()) if "scheme" in pred else []
        raise InputError(f"baseline scheme {baseline!r} is not among the predicted schemes; valid: "
                         f"{', '.join(present)}")
    keys = _keys(pred)
    base = base.drop_duplicates(keys)[[*keys, time_col]].rename(columns={time_col: "time_baseline_s"})
    out = pred.drop(columns=[c for c in ("time_baseline_s", "speedup") if c in pred])
    out = out.merge(base, on=keys, how="left", sort=False)
    out.index = pred.index
    out["speedup"] = out["time_baseline_s"] / out[time_col]
    return out


def crossover(pred: pd.DataFrame, baseline: str = "bf16", time_col: str = "time_datasheet_s") -> pd.DataFrame:
    """Per (gpu, scheme, [layer], N, K): the first M (in the batches given) where the speedup over `baseline`
    is <= 1, NaN if it never is; the baseline scheme itself is left out."""
    sp = speedup(pred, baseline, time_col)
    sp = sp[sp["scheme"] != baseline]
    groups = [c for c in ("gpu", "scheme", "layer", "N", "K") if c in sp]
    all_groups = sp[groups].drop_duplicates().reset_index(drop=True)
    first = sp[sp["speedup"] <= 1].groupby(groups, sort=False)["M"].min().rename("crossover_M").reset_index()
    out = all_groups.merge(first, on=groups, how="left")
    out["crossover_M"] = out["crossover_M"].astype("float64")
    return out
