"""The roofline figure: log-log attainable FLOP/s vs arithmetic intensity for one GPU.

Pure builders: DataFrames in, Plotly traces / Figure out. Inputs (SI units):
- `ceilings`: one row per (unit, tier) with columns unit, tier ("datasheet" | "calibrated"), peak_flops, bandwidth.
- `measured`: comparison rows (workbench.schema.COMPARISON_COLUMNS) — drawn filled at their achieved FLOP/s.
- `predicted`: model rows (models.roofline.predict output) with the chosen tier's time column — drawn open.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from workbench.dashboard import style

X_RANGE = (0.1, 1e4)  # FLOP/byte: fp32 GEMV (~0.25) to large-batch int4 GEMM


def ceiling_traces(ceilings: pd.DataFrame, showlegend: bool = True) -> list[dict[str, Any]]:
    """One roof per (unit, tier): the memory diagonal up to the ridge, then the flat compute ceiling."""
    traces = []
    lo, hi = X_RANGE
    for row in ceilings.itertuples(index=False):
        if not (row.peak_flops > 0 and row.bandwidth > 0):
            continue
        ridge = row.peak_flops / row.bandwidth
        xs = np.array([lo, min(max(ridge, lo), hi), hi])
        ys = np.minimum(xs * row.bandwidth, row.peak_flops) * style.TERA
        calibrated = row.tier == "calibrated"
        name = f"{row.unit} roof ({row.tier})"
        traces.append(
            dict(
                type="scatter",
                x=xs,
                y=ys,
                mode="lines",
                name=name,
                legendgroup=name,
                showlegend=showlegend,
                line={"color": style.unit_color(row.unit), "dash": "solid" if calibrated else "dash", "width": 1.5},
                hovertemplate=(
                    f"<b>{name}</b><br>peak %{{customdata[0]:.4g}} TFLOP/s<br>bandwidth %{{customdata[1]:.4g}} GB/s"
                    f"<br>ridge %{{customdata[2]:.3g}} FLOP/B<extra></extra>"
                ),
                customdata=np.tile([row.peak_flops * style.TERA, row.bandwidth * style.GIGA, ridge], (3, 1)),
            )
        )
    return traces


# customdata is numeric only (Plotly deep-copies object arrays element by element); strings go in `text`.
_MEASURED_HOVER = (
    "<b>{kernel}</b> ({scheme}) · M=%{{customdata[0]}} · %{{customdata[1]}}×%{{customdata[2]}}<br>"
    "measured %{{customdata[3]:.4g}} µs (p10 %{{customdata[4]:.4g}}, p90 %{{customdata[5]:.4g}})<br>"
    "predicted ({tier}) %{{customdata[6]:.4g}} µs · pred/meas %{{customdata[7]:.3f}}<br>"
    "achieved %{{customdata[8]:.4g}} GB/s · %{{y:.4g}} TFLOP/s<br>"
    "intensity %{{x:.3g}} FLOP/B · %{{text}}<extra>measured</extra>"
)
_PREDICTED_HOVER = (
    "<b>{scheme}</b> predicted ({tier}) · M=%{{customdata[0]}} · %{{customdata[1]}}×%{{customdata[2]}}<br>"
    "time %{{customdata[3]:.4g}} µs · traffic %{{customdata[4]:.4g}} MB · %{{customdata[5]:.4g}} GB/s<br>"
    "attainable %{{y:.4g}} TFLOP/s · intensity %{{x:.3g}} FLOP/B · bound %{{text}}<extra>predicted</extra>"
)


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    return frame[name].to_numpy(dtype=float) if name in frame else np.full(len(frame), np.nan)


def measured_traces(measured: pd.DataFrame, tier: str, time_col: str, showlegend: bool = True) -> list[dict[str, Any]]:
    """Filled markers at (intensity, achieved FLOP/s), one trace per kernel, coloured by scheme."""
    traces = []
    bound_col = "bound_datasheet" if tier == "datasheet" else "bound_calibrated"
    for kernel, part in measured.groupby("kernel", sort=True, observed=True):
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
        bound = part[bound_col].astype("string").fillna("") if bound_col in part else pd.Series("", index=part.index)
        throttled = part["throttled"].astype("string").fillna("n/a") if "throttled" in part else "n/a"
        text = np.array(("bound " + bound + " · throttled " + throttled).tolist(), dtype=str)
        traces.append(
            dict(
                type=style.scatter_type(len(part)),
                x=part["intensity"].to_numpy(dtype=float),
                y=part["achieved_flops_per_s"].to_numpy(dtype=float) * style.TERA,
                mode="markers",
                name=f"{kernel} measured",
                legendgroup=f"m-{kernel}",
                showlegend=showlegend,
                marker={"color": style.scheme_color(scheme), "size": 8, "line": {"width": 0.5, "color": "#222"}},
                customdata=custom,
                text=text,
                hovertemplate=_MEASURED_HOVER.format(kernel=kernel, scheme=scheme, tier=tier),
            )
        )
    return traces


def predicted_traces(
    predicted: pd.DataFrame, tier: str, time_col: str, showlegend: bool = True
) -> list[dict[str, Any]]:
    """Open markers at (intensity, FLOPs / predicted time), one trace per scheme."""
    traces = []
    bound_col = "bound_datasheet" if tier == "datasheet" else "bound_calibrated"
    for scheme, part in predicted.groupby("scheme", sort=False, observed=True):
        part = part[part[time_col] > 0]
        if part.empty:
            continue
        t = part[time_col].to_numpy(dtype=float)
        nbytes = part["bytes"].to_numpy(dtype=float)
        custom = np.column_stack(
            [
                _column(part, "M"),
                _column(part, "N"),
                _column(part, "K"),
                t * style.US,
                nbytes * 1e-6,
                nbytes / t * style.GIGA,
            ]
        )
        bound = np.array(part[bound_col].astype("string").fillna("").tolist(), dtype=str) if bound_col in part else None
        traces.append(
            dict(
                type=style.scatter_type(len(part)),
                x=part["intensity"].to_numpy(dtype=float),
                y=part["flops"].to_numpy(dtype=float) / t * style.TERA,
                mode="markers",
                name=f"{scheme} predicted",
                legendgroup=f"p-{scheme}",
                showlegend=showlegend,
                marker={
                    "color": style.scheme_color(str(scheme)),
                    "size": 9,
                    "symbol": "circle-open",
                    "line": {"width": 1.5},
                },
                customdata=custom,
                text=bound,
                hovertemplate=_PREDICTED_HOVER.format(scheme=scheme, tier=tier),
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
) -> style.Panel:
    """The roofline's traces and log-log axes, as one panel (a whole figure or a cell of the GPU comparison)."""
    traces = ceiling_traces(ceilings, showlegend) + predicted_traces(predicted, tier, time_col, showlegend)
    traces += measured_traces(measured, tier, time_col, showlegend)
    xaxis = {"type": "log", "title": {"text": style.INTENSITY_AXIS}, "range": list(np.log10(X_RANGE))}
    yaxis = {"type": "log", "title": {"text": style.FLOPS_AXIS}}
    return style.Panel(traces, xaxis, yaxis, title)


def roofline_figure(
    ceilings: pd.DataFrame,
    measured: pd.DataFrame,
    predicted: pd.DataFrame,
    *,
    tier: str,
    time_col: str,
    title: str,
):
    """The roofline for one GPU: datasheet roofs dashed, calibrated solid, measured filled, predicted open."""
    if ceilings.empty and measured.empty and predicted.empty:
        return style.empty_figure("Nothing to draw for this selection.", title)
    panel = roofline_panel(ceilings, measured, predicted, tier=tier, time_col=time_col)
    return style.compose([panel], 1, 1, {"title": {"text": title}})
