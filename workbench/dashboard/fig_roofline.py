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


def _add(fig, trace, row: int | None, col: int | None) -> None:
    if row is None:
        fig.add_trace(trace)
    else:
        fig.add_trace(trace, row=row, col=col)


def ceiling_traces(ceilings: pd.DataFrame, showlegend: bool = True) -> list[Any]:
    """One roof per (unit, tier): the memory diagonal up to the ridge, then the flat compute ceiling."""
    import plotly.graph_objects as go

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
            go.Scatter(
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


_MEASURED_HOVER = (
    "<b>%{customdata[0]}</b> (%{customdata[1]}) · M=%{customdata[2]} · %{customdata[3]}<br>"
    "measured %{customdata[4]:.4g} µs (p10 %{customdata[5]:.4g}, p90 %{customdata[6]:.4g})<br>"
    "predicted (%{customdata[7]}) %{customdata[8]:.4g} µs · pred/meas %{customdata[9]:.3f}<br>"
    "achieved %{customdata[10]:.4g} GB/s · %{y:.4g} TFLOP/s<br>"
    "intensity %{x:.3g} FLOP/B · bound %{customdata[11]} · throttled %{customdata[12]}<extra>measured</extra>"
)
_PREDICTED_HOVER = (
    "<b>%{customdata[0]}</b> predicted (%{customdata[1]}) · M=%{customdata[2]} · %{customdata[3]}<br>"
    "time %{customdata[4]:.4g} µs · traffic %{customdata[5]:.4g} MB · %{customdata[6]:.4g} GB/s<br>"
    "attainable %{y:.4g} TFLOP/s · intensity %{x:.3g} FLOP/B · bound %{customdata[7]}<extra>predicted</extra>"
)


def _shape_labels(frame: pd.DataFrame) -> np.ndarray:
    return (frame["N"].astype("string") + "×" + frame["K"].astype("string")).to_numpy(dtype=object)


def measured_traces(measured: pd.DataFrame, tier: str, time_col: str, showlegend: bool = True) -> list[Any]:
    """Filled markers at (intensity, achieved FLOP/s), one trace per scheme."""
    import plotly.graph_objects as go

    traces = []
    ratio_col = "ratio_" + tier
    for scheme, part in measured.groupby("scheme", sort=False, observed=True):
        if part.empty:
            continue
        bound = part.get("bound_calibrated" if tier != "datasheet" else "bound_datasheet")
        custom = np.column_stack(
            [
                part["kernel"].to_numpy(dtype=object),
                part["scheme"].to_numpy(dtype=object),
                part["M"].to_numpy(),
                _shape_labels(part),
                part["time_measured_s"].to_numpy() * style.US,
                part["time_p10_s"].to_numpy() * style.US,
                part["time_p90_s"].to_numpy() * style.US,
                np.full(len(part), tier, dtype=object),
                part[time_col].to_numpy() * style.US,
                part[ratio_col].to_numpy() if ratio_col in part else np.full(len(part), np.nan),
                part["achieved_bytes_per_s"].to_numpy() * style.GIGA,
                bound.to_numpy(dtype=object) if bound is not None else np.full(len(part), "", dtype=object),
                part["throttled"].astype("string").fillna("n/a").to_numpy(dtype=object),
            ]
        )
        traces.append(
            go.Scattergl(
                x=part["intensity"].to_numpy(),
                y=part["achieved_flops_per_s"].to_numpy() * style.TERA,
                mode="markers",
                name=f"{scheme} measured",
                legendgroup=f"m-{scheme}",
                showlegend=showlegend,
                marker={"color": style.scheme_color(str(scheme)), "size": 8, "line": {"width": 0.5, "color": "#222"}},
                customdata=custom,
                hovertemplate=_MEASURED_HOVER,
            )
        )
    return traces


def predicted_traces(predicted: pd.DataFrame, tier: str, time_col: str, showlegend: bool = True) -> list[Any]:
    """Open markers at (intensity, FLOPs / predicted time), one trace per scheme."""
    import plotly.graph_objects as go

    traces = []
    bound_col = "bound_datasheet" if tier == "datasheet" else "bound_calibrated"
    for scheme, part in predicted.groupby("scheme", sort=False, observed=True):
        part = part[part[time_col] > 0]
        if part.empty:
            continue
        t = part[time_col].to_numpy()
        custom = np.column_stack(
            [
                part["scheme"].to_numpy(dtype=object),
                np.full(len(part), tier, dtype=object),
                part["M"].to_numpy(),
                _shape_labels(part),
                t * style.US,
                part["bytes"].to_numpy() * 1e-6,
                part["bytes"].to_numpy() / t * style.GIGA,
                part[bound_col].astype("string").fillna("").to_numpy(dtype=object)
                if bound_col in part
                else np.full(len(part), "", dtype=object),
            ]
        )
        traces.append(
            go.Scattergl(
                x=part["intensity"].to_numpy(),
                y=part["flops"].to_numpy() / t * style.TERA,
                mode="markers",
                name=f"{scheme} predicted",
                legendgroup=f"p-{scheme}",
                showlegend=showlegend,
                marker={"color": style.scheme_color(str(scheme)), "size": 9, "symbol": "circle-open", "line": {"width": 1.5}},
                customdata=custom,
                hovertemplate=_PREDICTED_HOVER,
            )
        )
    return traces


def add_roofline(
    fig,
    ceilings: pd.DataFrame,
    measured: pd.DataFrame,
    predicted: pd.DataFrame,
    *,
    tier: str,
    time_col: str,
    row: int | None = None,
    col: int | None = None,
    showlegend: bool = True,
) -> None:
    """Add the roofline's traces to `fig` (a subplot cell when row/col are given)."""
    for trace in ceiling_traces(ceilings, showlegend) + predicted_traces(predicted, tier, time_col, showlegend):
        _add(fig, trace, row, col)
    for trace in measured_traces(measured, tier, time_col, showlegend):
        _add(fig, trace, row, col)
    axes = {"row": row, "col": col} if row is not None else {}
    fig.update_xaxes(type="log", title_text=style.INTENSITY_AXIS, range=list(np.log10(X_RANGE)), **axes)
    fig.update_yaxes(type="log", title_text=style.FLOPS_AXIS, **axes)


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
    import plotly.graph_objects as go

    if ceilings.empty and measured.empty and predicted.empty:
        return style.empty_figure("Nothing to draw for this selection.", title)
    fig = go.Figure(layout=style.BASE_LAYOUT)
    add_roofline(fig, ceilings, measured, predicted, tier=tier, time_col=time_col)
    fig.update_layout(title={"text": title})
    return fig
