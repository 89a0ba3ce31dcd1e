"""The roofline figure: log-log attainable FLOP/s vs arithmetic intensity for one GPU.

Pure builders: DataFrames in, Plotly traces / Figure out. Inputs (SI units):
- `ceilings`: one row per (unit, tier) with columns unit, tier ("datasheet" | "calibrated"), peak_flops, bandwidth.
- `measured`: comparison rows (workbench.storage.schema.COMPARISON_COLUMNS) — drawn filled at their achieved FLOP/s.
- `predicted`: model rows (models.roofline.predict output) with the chosen tier's time column — drawn open.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from workbench.interfaces.dashboard import style

X_RANGE = (0.1, 1e4)  # FLOP/byte: fp32 GEMV (~0.25) to large-batch int4 GEMM


def merge_roofs(ceilings: pd.DataFrame) -> pd.DataFrame:
    """Roofs with the same peak and bandwidth drawn once, their units named together ("fp16/bf16")."""
    if ceilings.empty:
        return ceilings
    rows: dict[tuple[float, float, str], dict[str, Any]] = {}
    for row in ceilings.itertuples(index=False):
        key = (round(float(row.peak_flops), -6), round(float(row.bandwidth), -6), str(row.tier))
        if key in rows:
            rows[key]["unit"] += "/" + str(row.unit)
        else:
            rows[key] = {"unit": str(row.unit), "tier": str(row.tier), "peak_flops": float(row.peak_flops),
                         "bandwidth": float(row.bandwidth)}  # fmt: skip
    return pd.DataFrame(list(rows.values()), columns=["unit", "tier", "peak_flops", "bandwidth"])


def ceiling_traces(ceilings: pd.DataFrame) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One roof per (unit, tier) — the memory diagonal up to the ridge, then the flat compute ceiling — labelled on
    the chart at its ridge point (roofs take no legend entries). Tier "kernel" roofs (a kernel's own bandwidth and
    peak) are thin dashed lines."""
    traces, notes = [], []
    lo, hi = X_RANGE
    for i, row in enumerate(merge_roofs(ceilings).itertuples(index=False)):
        if not (row.peak_flops > 0 and row.bandwidth > 0):
            continue
        ridge = row.peak_flops / row.bandwidth
        xs = np.array([lo, min(max(ridge, lo), hi), hi])
        ys = np.minimum(xs * row.bandwidth, row.peak_flops) * style.TERA
        kernel = row.tier == "kernel"
        name = f"{row.unit} ceiling" if kernel else f"{row.unit} roof ({row.tier})"
        color = "#555" if kernel else style.unit_color(row.unit.split("/")[0])
        traces.append(
            dict(
                type="scatter",
                x=xs,
                y=ys,
                mode="lines",
                name=name,
                showlegend=False,
                line={"color": color, "dash": "dash" if kernel else "solid", "width": 1 if kernel else 1.8},
                hovertemplate=(
                    f"<b>{name}</b><br>peak %{{customdata[0]:.4g}} TFLOP/s<br>bandwidth %{{customdata[1]:.4g}} GB/s"
                    f"<br>ridge %{{customdata[2]:.3g}} FLOP/B<extra></extra>"
                ),
                customdata=np.tile([row.peak_flops * style.TERA, row.bandwidth * style.GIGA, ridge], (3, 1)),
            )
        )
        if lo <= ridge <= hi:
            notes.append(
                {
                    "x": float(np.log10(ridge)),
                    "y": float(np.log10(row.peak_flops * style.TERA)),
                    "text": f"{name} · ridge {ridge:.3g} FLOP/B",
                    "showarrow": True,
                    "arrowhead": 0,
                    "ax": 0,
                    "ay": -18 - 16 * (i % 3),
                    "font": {"size": 10, "color": color},
                    "bgcolor": "rgba(255,255,255,0.8)",
                }
            )
    return traces, notes


# customdata is numeric only (Plotly deep-copies object arrays element by element); strings go in `text`.
_MEASURED_HOVER = (
    "<b>%{{text}}</b> · M=%{{customdata[0]}} · %{{customdata[1]}}×%{{customdata[2]}}<br>"
    "measured %{{customdata[3]:.4g}} µs (p10 %{{customdata[4]:.4g}}, p90 %{{customdata[5]:.4g}})<br>"
    "predicted ({tier}) %{{customdata[6]:.4g}} µs · pred/meas %{{customdata[7]:.3f}}<br>"
    "achieved %{{customdata[8]:.4g}} GB/s · %{{y:.4g}} TFLOP/s · intensity %{{x:.3g}} FLOP/B<extra>{what}</extra>"
)
_PREDICTED_HOVER = (
    "<b>{scheme}</b> predicted ({tier}) · M=%{{customdata[0]}} · %{{customdata[1]}}×%{{customdata[2]}}<br>"
    "time %{{customdata[3]:.4g}} µs · traffic %{{customdata[4]:.4g}} MB · %{{customdata[5]:.4g}} GB/s<br>"
    "attainable %{{y:.4g}} TFLOP/s · intensity %{{x:.3g}} FLOP/B · bound %{{text}}<extra>predicted</extra>"
)


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    return frame[name].to_numpy(dtype=float) if name in frame else np.full(len(frame), np.nan)


def _scheme_of(frame: pd.DataFrame) -> dict[str, str]:
    pairs = frame[["kernel", "scheme"]].drop_duplicates()
    return dict(zip(pairs["kernel"].astype(str), pairs["scheme"].astype(str), strict=True))


def measured_traces(
    measured: pd.DataFrame,
    tier: str,
    time_col: str,
    showlegend: bool = True,
    *,
    best: bool = True,
    grouper: style.Grouper | None = None,
) -> list[dict[str, Any]]:
    """Filled markers at (intensity, achieved FLOP/s), coloured by scheme: one trace per scheme holding its best
    kernel at each point (`best`), or one per kernel, each kernel of a scheme a distinct marker."""
    traces: list[dict[str, Any]] = []
    if measured.empty:
        return traces
    grouper = grouper or style.Grouper()
    by = "scheme" if best else "kernel"
    symbols = {} if best else style.kernel_symbols(list(measured["kernel"].astype(str).unique()), _scheme_of(measured))
    parts = sorted(measured.groupby(by, sort=True, observed=True), key=lambda kv: style.scheme_rank(
        str(kv[1]["scheme"].iloc[0]) if len(kv[1]) else ""))  # fmt: skip
    for name, part in parts:
        if part.empty:
            continue
        scheme = str(part["scheme"].iloc[0])
        custom = np.column_stack(
            [
                _column(part, "M"),
                _column(part, "N"),
                _column(part, "K"),
                _column(part, "time_measured_s") * style.US,
                _column(part, "time_p10_s") * style.US,
                _column(part, "time_p90_s") * style.US,
                _column(part, time_col) * style.US,
                _column(part, "ratio_" + tier),
                _column(part, "achieved_bytes_per_s") * style.GIGA,
            ]
        )
        text = np.array((part["kernel"].astype("string") + " (" + scheme + ")").tolist(), dtype=str)
        label = f"{scheme} measured (best kernel)" if best else f"{name}"
        traces.append(
            dict(
                type=style.scatter_type(len(part)),
                x=part["intensity"].to_numpy(dtype=float),
                y=part["achieved_flops_per_s"].to_numpy(dtype=float) * style.TERA,
                mode="markers",
                name=label,
                showlegend=showlegend,
                marker={
                    "color": style.scheme_color(scheme),
                    "size": 9,
                    "symbol": symbols.get(str(name), "circle"),
                    "line": {"width": 0.6, "color": "#222"},
                },
                customdata=custom,
                text=text,
                hovertemplate=_MEASURED_HOVER.format(tier=tier, what="measured, best kernel" if best else "measured"),
                **grouper(scheme),
            )
        )
    return traces


def predicted_traces(
    predicted: pd.DataFrame,
    tier: str,
    time_col: str,
    showlegend: bool = True,
    grouper: style.Grouper | None = None,
) -> list[dict[str, Any]]:
    """Open markers at (intensity, FLOPs / predicted time), one trace per scheme."""
    traces = []
    grouper = grouper or style.Grouper()
    bound_col = "bound_datasheet" if tier == "datasheet" else "bound_calibrated"
    for scheme, part in sorted(predicted.groupby("scheme", sort=False, observed=True),
                               key=lambda kv: style.scheme_rank(str(kv[0]))):  # fmt: skip
        part = part[part[time_col] > 0]
        if part.empty:
            continue
        t = part[time_col].to_numpy(dtype=float)
        nbytes = part["bytes"].to_numpy(dtype=float)
        custom = np.column_stack(
            [_column(part, "M"), _column(part, "N"), _column(part, "K"), t * style.US, nbytes * style.MEGA,
             nbytes / t * style.GIGA]
        )  # fmt: skip
        bound = np.array(part[bound_col].astype("string").fillna("").tolist(), dtype=str) if bound_col in part else None
        traces.append(
            dict(
                type=style.scatter_type(len(part)),
                x=part["intensity"].to_numpy(dtype=float),
                y=part["flops"].to_numpy(dtype=float) / t * style.TERA,
                mode="markers",
                name=f"{scheme} predicted ({tier})",
                showlegend=showlegend,
                marker={"color": style.scheme_color(str(scheme)), "size": 10, "symbol": "circle-open",
                        "line": {"width": 1.6}},  # fmt: skip
                customdata=custom,
                text=bound,
                hovertemplate=_PREDICTED_HOVER.format(scheme=scheme, tier=tier),
                **grouper(str(scheme)),
            )
        )
    return traces


def roofline_panel(
    ceilings: pd.DataFrame,
    measured: pd.DataFrame,
    predicted: pd.DataFrame,
    *,
    tier: str,
    time_col: str,
    title: str = "",
    showlegend: bool = True,
    best: bool = True,
) -> style.Panel:
    """The roofline's traces and log-log axes, as one panel (a whole figure or a cell of the GPU comparison)."""
    roofs, notes = ceiling_traces(ceilings)
    grouper = style.Grouper()
    traces = roofs + predicted_traces(predicted, tier, time_col, showlegend, grouper)
    traces += measured_traces(measured, tier, time_col, showlegend, best=best, grouper=grouper)
    xaxis = {"type": "log", "title": {"text": style.INTENSITY_AXIS}, "range": list(np.log10(X_RANGE))}
    yaxis = {"type": "log", "title": {"text": style.FLOPS_AXIS}}
    return style.Panel(traces, xaxis, yaxis, title, annotations=notes)


def roofline_figure(
    ceilings: pd.DataFrame,
    measured: pd.DataFrame,
    predicted: pd.DataFrame,
    *,
    tier: str,
    time_col: str,
    title: str,
    best: bool = True,
):
    """The roofline for one GPU: roofs of the selected schemes labelled at their ridge, predicted open, measured
    filled (the best kernel per scheme, or every kernel)."""
    if ceilings.empty and measured.empty and predicted.empty:
        return style.empty_figure("Nothing to draw for this selection.", title)
    panel = roofline_panel(ceilings, measured, predicted, tier=tier, time_col=time_col, best=best)
    return style.compose([panel], 1, 1, {"title": {"text": title}})
