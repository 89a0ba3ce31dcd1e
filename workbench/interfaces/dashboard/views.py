"""One function per view: (data, session frames, selection) -> Plotly figure.

Each filters the precomputed frames (queries), asks the comparison / model layers for derived numbers
(workbench.analysis.speedup, workbench.analysis.compare, models.roofline, models.rollup) and hands plain frames to
the pure builders.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError
from workbench.interfaces.dashboard import fig_batch, fig_diagnostics, fig_roofline, style
from workbench.interfaces.dashboard.data import TIER_COLUMNS, DashboardData, Frames, kernel_rollup
from workbench.interfaces.dashboard.queries import (
    MAX_BATCH,
    Selection,
    effective_tier,
    gpu_label,
    select_measured,
    select_predicted,
)

DEFAULT_MODEL = "llama-2-7b"


def _title(data: DashboardData, gpu: str, what: str, sel: Selection) -> str:
    shape = f"model {sel.model}" if sel.model else sel.shape.replace("x", "×")
    return f"{what} — {gpu_label(data, gpu)} · {shape} · {sel.mode}"


# ---------------------------------------------------------------------------------------------------- roofline
def ceilings(data: DashboardData, gpu: str, schemes: tuple[str, ...], tier: str = "datasheet") -> pd.DataFrame:
    """The roofs of one GPU for the compute units the selected schemes use, at the drawn tier: calibrated roofs for
    the calibrated tiers where the GPU has a calibration, datasheet roofs otherwise."""
    from models.schemes import get_scheme

    spec = data.gpus.get(gpu)
    if spec is None:
        return pd.DataFrame(columns=["unit", "tier", "peak_flops", "bandwidth"])
    cal = data.calibrations.get(gpu)
    use_cal = cal is not None and tier != "datasheet"
    rows, seen = [], set()
    for name in schemes:
        unit = get_scheme(name).compute_unit
        used, peak = (cal if use_cal else spec).ceiling(unit)
        bandwidth = (cal if use_cal else spec).bandwidth
        if used in seen or not np.isfinite(peak):
            continue
        seen.add(used)
        rows.append({"unit": used, "tier": "calibrated" if use_cal else "datasheet", "peak_flops": float(peak),
                     "bandwidth": float(bandwidth)})  # fmt: skip
    return pd.DataFrame(rows, columns=["unit", "tier", "peak_flops", "bandwidth"])


KERNEL_CEILING_COLUMNS = ("kernel_bandwidth_bytes_per_s", "kernel_peak_flops_per_s")


def kernel_ceilings(measured: pd.DataFrame) -> pd.DataFrame:
    """Each drawn kernel's own ceilings (tier "kernel") when the comparison carries them; empty otherwise."""
    if measured.empty or not all(c in measured.columns for c in KERNEL_CEILING_COLUMNS):
        return pd.DataFrame(columns=["unit", "tier", "peak_flops", "bandwidth"])
    part = measured[["kernel", *KERNEL_CEILING_COLUMNS]].dropna()
    part = part.groupby("kernel", observed=True, sort=True)[list(KERNEL_CEILING_COLUMNS)].median().reset_index()
    return pd.DataFrame(
        {
            "unit": part["kernel"].astype(str),
            "tier": "kernel",
            "peak_flops": part["kernel_peak_flops_per_s"].astype(float),
            "bandwidth": part["kernel_bandwidth_bytes_per_s"].astype(float),
        }
    )


def shown_measured(frame: pd.DataFrame, sel: Selection) -> pd.DataFrame:
    """The measured rows a view draws: the fastest kernel of each scheme at each point (default), or every kernel.
    A kernel filter always shows the chosen kernels themselves."""
    from workbench.analysis.compare import best_per_scheme

    if frame.empty or not sel.best or sel.kernels:
        return frame
    return best_per_scheme(frame)


def measured_rows(data: DashboardData, frames: Frames, sel: Selection, gpu: str) -> pd.DataFrame:
    """`shown_measured(select_measured(frames.latest, data, sel, (gpu,)), sel)`, the best kernels read from
    `frames.best`: a point's keys (GPU, scheme, N, K, M, mode) are all selection keys, so the best rows of a selection
    are the selection of the best rows."""
    if sel.best and not sel.kernels:
        return select_measured(frames.best, data, sel, (gpu,), frames.rows("best")).reset_index(drop=True)
    return select_measured(frames.latest, data, sel, (gpu,), frames.rows("latest"))


def predicted_rows(data: DashboardData, frames: Frames, sel: Selection, gpu: str, tier: str, schemes=None):
    """Prediction rows for the curves: the grid when it carries the tier's column, else (a per-kernel tier such as
    the kernel-aware one) the drawn kernels' own predictions at their measured points."""
    col = TIER_COLUMNS[tier]
    pred = select_predicted(data, sel, gpu, schemes)
    if col in pred.columns:
        return pred
    return measured_rows(data, frames, replace(sel, schemes=tuple(schemes or sel.schemes)), gpu)


def _roofline_parts(data: DashboardData, frames: Frames, sel: Selection, gpu: str) -> dict[str, Any]:
    tier = effective_tier(data, gpu, sel.tier)
    measured = measured_rows(data, frames, sel, gpu)
    roofs = pd.concat([ceilings(data, gpu, sel.schemes, tier), kernel_ceilings(measured)], ignore_index=True)
    return {
        "ceilings": roofs,
        "measured": measured,
        "predicted": predicted_rows(data, frames, sel, gpu, tier),
        "tier": tier,
        "time_col": TIER_COLUMNS[tier],
        "best": sel.best and not sel.kernels,
    }


def roofline_view(data: DashboardData, frames: Frames, sel: Selection):
    parts = _roofline_parts(data, frames, sel, sel.primary)
    return fig_roofline.roofline_figure(**parts, title=_title(data, sel.primary, "Roofline", sel))


# ---------------------------------------------------------------------------------------------------- time vs batch
def _rollup_predicted(data: DashboardData, sel: Selection, gpu: str, schemes: tuple[str, ...]) -> pd.DataFrame:
    """(scheme, batch, time_step_s, tokens_per_s, bytes_step) of the selected model from the precomputed roll-up."""
    tier = effective_tier(data, gpu, sel.tier)
    roll = kernel_rollup(data, sel.model, gpu) if tier == "kernel" else data.rollups
    if f"time_step_{tier}_s" not in roll.columns:
        tier = effective_tier(data, gpu, "floor", data.predictions)
    mask = np.array(roll["model"] == sel.model, dtype=bool) & np.array(roll["gpu_key"] == gpu, dtype=bool)
    mask &= np.array(roll["scheme"].isin(schemes), dtype=bool)
    batch = roll["batch"].to_numpy()
    mask &= (batch >= sel.m_lo) & (batch <= sel.m_hi)
    part = roll[mask]
    step = part[f"time_step_{tier}_s"].to_numpy(dtype=float)
    return pd.DataFrame(
        {
            "scheme": part["scheme"].astype(str).to_numpy(),
            "batch": part["batch"].to_numpy(),
            "time_step_s": step,
            "tokens_per_s": part["batch"].to_numpy() / step,
            "bytes_step": part["bytes_step"].to_numpy(),
        }
    )


def _complete_schemes(data: DashboardData, frames: Frames, sel: Selection, gpu: str, schemes: tuple[str, ...]):
    """Schemes measured on every linear layer shape of the model (MoE expert layers never count as measured)."""
    from models.workloads import get_model

    layers = get_model(sel.model).layers
    if any(layer.experts > 1 for layer in layers) or frames.latest.empty:
        return ()
    cmp = frames.latest
    mine = cmp[np.array(cmp["gpu_key"] == gpu, dtype=bool) & np.array(cmp["mode"] == sel.mode, dtype=bool)]
    have = mine.groupby(["scheme", "N", "K"], observed=True).size().reset_index()[["scheme", "N", "K"]]
    need = {(int(layer.N), int(layer.K)) for layer in layers}
    out = []
    for scheme in schemes:
        got = have[have["scheme"] == scheme]
        if need <= set(zip(got["N"].astype(int), got["K"].astype(int), strict=True)):
            out.append(scheme)
    return tuple(out)


def _rollup_measured(data: DashboardData, frames: Frames, sel: Selection, gpu: str, schemes: tuple[str, ...]):
    """compare.rollup_measured for the schemes measured on every layer (empty when none is)."""
    from workbench.analysis.compare import rollup_measured

    complete = _complete_schemes(data, frames, sel, gpu, schemes)
    if not complete:
        return pd.DataFrame(columns=["scheme", "M", "time_step_measured_s", "tokens_per_s_measured"])
    out = rollup_measured(
        frames.latest, sel.model, gpu_key=gpu, schemes=list(complete), calibrations=data.calibrations, mode=sel.mode
    )
    out = out[(out["M"] >= sel.m_lo) & (out["M"] <= sel.m_hi)]
    return out[np.isfinite(out["time_step_measured_s"].to_numpy(dtype=float))]


def time_parts(data: DashboardData, frames: Frames, sel: Selection, gpu: str) -> dict[str, Any]:
    """Predicted (scheme, M, time_s) and measured (kernel, scheme, M, time_s, p10_s, p90_s) for one GPU."""
    tier = effective_tier(data, gpu, sel.tier)
    if sel.model:
        pred = _rollup_predicted(data, sel, gpu, sel.schemes)
        predicted = pd.DataFrame({"scheme": pred["scheme"], "M": pred["batch"], "time_s": pred["time_step_s"]})
        meas = _rollup_measured(data, frames, sel, gpu, sel.schemes)
        measured = pd.DataFrame(
            {
                "kernel": meas.get("scheme", pd.Series(dtype=str)).astype(str) + " (fastest kernel per layer)",
                "scheme": meas.get("scheme", pd.Series(dtype=str)),
                "M": meas.get("M", pd.Series(dtype=float)),
                "time_s": meas.get("time_step_measured_s", pd.Series(dtype=float)),
            }
        )
        measured["p10_s"] = measured["time_s"]
        measured["p90_s"] = measured["time_s"]
        return {"predicted": predicted, "measured": measured, "tier": tier, "per_token": True}
    pred = predicted_rows(data, frames, sel, gpu, tier)
    pred = pred.groupby(["scheme", "M"], observed=True, as_index=False)[TIER_COLUMNS[tier]].median()
    predicted = pd.DataFrame({"scheme": pred["scheme"].astype(str), "M": pred["M"], "time_s": pred[TIER_COLUMNS[tier]]})
    cmp = measured_rows(data, frames, sel, gpu)
    measured = pd.DataFrame(
        {
            "kernel": cmp["kernel"].astype(str),
            "scheme": cmp["scheme"].astype(str),
            "M": cmp["M"],
            "time_s": cmp["time_measured_s"],
            "p10_s": cmp["time_p10_s"],
            "p90_s": cmp["time_p90_s"],
        }
    )
    return {"predicted": predicted, "measured": measured, "tier": tier, "per_token": False}


def time_view(data: DashboardData, frames: Frames, sel: Selection):
    parts = time_parts(data, frames, sel, sel.primary)
    best = sel.best and not sel.kernels
    return fig_batch.time_figure(**parts, title=_title(data, sel.primary, "Time vs batch", sel), best=best)


# ---------------------------------------------------------------------------------------------------- speedup
def baseline_scheme(frames: Frames, baseline: str) -> str:
    """The scheme whose predictions stand for the baseline: a kernel's scheme, or the baseline itself."""
    cmp = frames.latest
    if not cmp.empty:
        hit = cmp.loc[cmp["kernel"] == baseline, "scheme"]
        if len(hit):
            return str(hit.iloc[0])
    return baseline


def _predicted_speedup(data: DashboardData, sel: Selection, gpu: str, base: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scheme, M, speedup, ideal) over the baseline scheme, and the predicted crossovers, from models.roofline."""
    from models.roofline import crossover, speedup

    tier = effective_tier(data, gpu, sel.tier, data.predictions)
    schemes = tuple(dict.fromkeys((*sel.schemes, base)))
    pred = select_predicted(data, sel, gpu, schemes)
    if pred.empty or not (pred["scheme"] == base).any():
        return pd.DataFrame(columns=["scheme", "M", "speedup", "ideal"]), _no_crossings()
    frame = pd.DataFrame(
        {
            "gpu": pred["gpu_key"].astype(str),
            "scheme": pred["scheme"].astype(str),
            "M": pred["M"],
            "N": pred["N"],
            "K": pred["K"],
            "bytes": pred["bytes"],
            "time": pred[TIER_COLUMNS[tier]],
        }
    )
    out = speedup(frame, baseline=base, time_col="time")
    ideal = speedup(frame, baseline=base, time_col="bytes")["speedup"].to_numpy()
    curves = pd.DataFrame({"scheme": out["scheme"], "M": out["M"], "speedup": out["speedup"], "ideal": ideal})
    cross = crossover(out, baseline=base, time_col="time").dropna(subset=["crossover_M"])  # reuses out.speedup
    crossings = pd.DataFrame(
        {"label": cross["scheme"], "scheme": cross["scheme"], "M": cross["crossover_M"], "kind": "predicted"}
    )
    return curves[curves["scheme"] != base], crossings


def _no_crossings() -> pd.DataFrame:
    return pd.DataFrame(columns=["label", "scheme", "M", "kind"])


def _speedup_table(data: DashboardData, frames: Frames, sel: Selection, gpu: str) -> pd.DataFrame | None:
    """workbench.analysis.speedup's table over the baseline for one GPU (None: nothing measured, or the baseline
    was not measured here)."""
    from workbench.analysis.speedup import pair_speedups, speedups

    everything = replace(sel, schemes=tuple(str(x) for x in frames.latest["scheme"].unique()), kernels=())
    pool = select_measured(frames.latest, data, everything, (gpu,), frames.rows("latest"))
    if pool.empty:
        return None
    try:
        if sel.best and not sel.kernels:  # each scheme's fastest kernel at each point over the baseline
            parts = [pair_speedups(pool, scheme, sel.baseline) for scheme in sel.schemes]
            parts = [p for p in parts if not p.empty]
            return pd.concat(parts, ignore_index=True) if parts else speedups(pool.iloc[0:0], baseline=sel.baseline)
        return speedups(pool, baseline=sel.baseline)
    except InputError:  # the baseline was not measured here
        return None


def _measured_speedup(
    data: DashboardData, frames: Frames, sel: Selection, gpu: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kernel, scheme, M, speedup) over the baseline kernel and the measured crossovers, from
    workbench.analysis.speedup."""
    from workbench.analysis.speedup import crossovers

    empty = pd.DataFrame(columns=["kernel", "scheme", "M", "speedup"])
    # every row is one point (gpu, N, K, mode, M): the table over every batch, cut to the range, is the same table;
    # it is cached per (uploads, GPU, selection less the batch range and the tier), which a tier change keeps
    wide = replace(sel, m_lo=1, m_hi=MAX_BATCH, tier="")
    key = (frames.uploads, gpu, wide)
    if key not in data.speedup_tables:
        if len(data.speedup_tables) >= 256:
            data.speedup_tables.clear()
        data.speedup_tables[key] = _speedup_table(data, frames, wide, gpu)
    table = data.speedup_tables[key]
    if table is None:
        return empty, _no_crossings()
    table = table[(table["M"] >= sel.m_lo) & (table["M"] <= sel.m_hi)]
    if table.empty:
        return empty, _no_crossings()
    keep = table["scheme"].isin(sel.schemes) & (table["kernel"] != table["baseline_kernel"])
    if sel.kernels:
        keep &= table["kernel"].isin(sel.kernels)
    table = table[keep]
    curves = pd.DataFrame(
        {"kernel": table["kernel"], "scheme": table["scheme"], "M": table["M"], "speedup": table["speedup_measured"]}
    )
    cross = crossovers(table).dropna(subset=["crossover_measured"])
    scheme_of = dict(zip(table["side"].astype(str), table["scheme"].astype(str), strict=True))
    # the kernel that crossed: the side's kernel at the crossover batch (the side itself when it is a kernel)
    at = {(str(r.side), int(r.M)): str(r.kernel) for r in table[["side", "M", "kernel"]].itertuples(index=False)}
    labels = [at.get((str(side), int(m)), str(side)) for side, m in zip(cross["side"], cross["crossover_measured"],
                                                                         strict=True)]  # fmt: skip
    crossings = pd.DataFrame(
        {
            "label": labels,
            "scheme": cross["side"].astype(str).map(scheme_of),
            "M": cross["crossover_measured"],
            "kind": "measured",
        }
    )
    return curves, crossings


def _model_speedup(data: DashboardData, frames: Frames, sel: Selection, gpu: str, base: str):
    """Whole-model speedup per decode step over the baseline scheme: predicted from the roll-up (with the ideal
    bytes-only ratio), measured from compare.rollup_measured where every layer was measured."""
    shown = tuple(s for s in sel.schemes if s != base)
    roll = _rollup_predicted(data, sel, gpu, (*shown, base))
    base_rows = roll[roll["scheme"] == base].set_index("batch")
    mine = roll[roll["scheme"].isin(shown)]
    base_t = base_rows["time_step_s"].reindex(mine["batch"]).to_numpy()
    base_b = base_rows["bytes_step"].reindex(mine["batch"]).to_numpy()
    predicted = pd.DataFrame(
        {
            "scheme": mine["scheme"].to_numpy(),
            "M": mine["batch"].to_numpy(),
            "speedup": base_t / mine["time_step_s"].to_numpy(),
            "ideal": base_b / mine["bytes_step"].to_numpy(),
        }
    )
    meas = _rollup_measured(data, frames, sel, gpu, (*shown, base))
    measured = pd.DataFrame(columns=["kernel", "scheme", "M", "speedup"])
    if not meas.empty and (meas["scheme"] == base).any():
        base_t = meas[meas["scheme"] == base].set_index("M")["time_step_measured_s"]
        mine = meas[meas["scheme"] != base]
        measured = pd.DataFrame(
            {
                "kernel": mine["scheme"].astype(str) + " (fastest kernel per layer)",
                "scheme": mine["scheme"],
                "M": mine["M"],
                "speedup": base_t.reindex(mine["M"]).to_numpy() / mine["time_step_measured_s"].to_numpy(),
            }
        ).dropna(subset=["speedup"])
    return predicted, measured


def speedup_parts(data: DashboardData, frames: Frames, sel: Selection, gpu: str) -> dict[str, Any]:
    """Predicted and measured speedups over the baseline, the ideal curve and the crossovers, for one GPU."""
    tier = effective_tier(data, gpu, sel.tier)
    base = baseline_scheme(frames, sel.baseline)
    if sel.model:
        predicted, measured = _model_speedup(data, frames, sel, gpu, base)
        cross = _no_crossings()
    else:
        predicted, pred_cross = _predicted_speedup(data, sel, gpu, base)
        measured, meas_cross = _measured_speedup(data, frames, sel, gpu)
        parts = [c for c in (pred_cross, meas_cross) if not c.empty]
        cross = pd.concat(parts, ignore_index=True) if parts else _no_crossings()
    return {"predicted": predicted, "measured": measured, "crossovers": cross, "baseline": sel.baseline, "tier": tier,
            "best": sel.best and not sel.kernels}


def speedup_view(data: DashboardData, frames: Frames, sel: Selection):
    parts = speedup_parts(data, frames, sel, sel.primary)
    return fig_batch.speedup_figure(**parts, title=_title(data, sel.primary, f"Speedup over {sel.baseline}", sel))


# ---------------------------------------------------------------------------------------------------- diagnostics
def error_view(data: DashboardData, frames: Frames, sel: Selection):
    """predicted / measured per kernel × batch (median over the selected shapes) for the primary GPU."""
    gpu = sel.primary
    tier = effective_tier(data, gpu, sel.tier, frames.latest)
    cmp = select_measured(frames.latest, data, sel, (gpu,), frames.rows("latest"))
    ratio = (cmp[f"ratio_{tier}"] if f"ratio_{tier}" in cmp.columns
             else cmp[TIER_COLUMNS[tier]] / cmp["time_measured_s"])  # fmt: skip
    frame = pd.DataFrame(
        {
            "label": cmp["kernel"].astype(str) + " (" + cmp["scheme"].astype(str) + ")",
            "M": cmp["M"],
            "ratio": ratio,
        }
    )
    return fig_diagnostics.error_heatmap(frame, tier=tier, title=_title(data, gpu, f"Model error ({tier})", sel))


def clocks_view(data: DashboardData, frames: Frames, sel: Selection):
    measured = select_measured(frames.measurements, data, sel, (sel.primary,), frames.rows("measurements"))
    return fig_diagnostics.clocks_figure(measured, title=_title(data, sel.primary, "Clocks and power", sel))


# ---------------------------------------------------------------------------------------------------- multi-GPU
def compare_view(data: DashboardData, frames: Frames, sel: Selection, view: str):
    """The chosen view (time, speedup or roofline) side by side for every selected GPU."""
    panels = []
    for i, gpu in enumerate(sel.gpus):
        common = {"title": gpu_label(data, gpu), "showlegend": i == 0}
        if view == "roofline":
            panels.append(fig_roofline.roofline_panel(**_roofline_parts(data, frames, sel, gpu), **common))
        elif view == "speedup":
            panels.append(fig_batch.speedup_panel(**speedup_parts(data, frames, sel, gpu), **common))
        else:
            parts = time_parts(data, frames, sel, gpu)
            per_token = parts.pop("per_token")
            scale, unit = (style.MS, "ms per decode step") if per_token else (style.US, "µs per call")
            panels.append(fig_batch.time_panel(**parts, scale=scale, unit=unit, best=sel.best and not sel.kernels,
                                               **common))
    shape = f"model {sel.model}" if sel.model else sel.shape.replace("x", "×")
    return fig_batch.facet_figure(panels, title=f"GPU comparison — {view} · {shape} · {sel.mode}")
