"""Figures against batch size: time vs batch, speedup vs batch, whole-model roll-up, and the GPU side-by-side facet.

Pure builders. Inputs (SI units):
- time: `predicted` (scheme, M, time_s) dashed per scheme; `measured` (kernel, scheme, M, time_s, p10_s, p90_s)
  solid with a p10–p90 band per kernel.
- speedup: `predicted` (scheme, M, speedup, ideal) dashed, with the ideal bytes-only curve dotted; `measured`
  (kernel, scheme, M, speedup) solid; `crossovers` (label, scheme, M, kind) marked on the y = 1 line.
- roll-up: (label, scheme, source, M, time_per_token_s, tokens_per_s), source "predicted" | "measured".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from workbench.dashboard import style


def _add(fig, trace, row: int | None, col: int | None) -> None:
    if row is None:
        fig.add_trace(trace)
    else:
        fig.add_trace(trace, row=row, col=col)


def _axes(row: int | None, col: int | None) -> dict[str, int]:
    return {"row": row, "col": col} if row is not None else {}


def _scheme_of(measured: pd.DataFrame) -> dict[str, str]:
    if measured.empty:
        return {}
    pairs = measured[["kernel", "scheme"]].drop_duplicates()
    return dict(zip(pairs["kernel"].astype(str), pairs["scheme"].astype(str), strict=True))


def _sorted_groups(frame: pd.DataFrame, key: str):
    for name, part in frame.groupby(key, sort=True, observed=True):
        yield str(name), part.sort_values("M")


def add_time(
    fig,
    predicted: pd.DataFrame,
    measured: pd.DataFrame,
    *,
    scale: float = style.US,
    unit: str = "µs",
    tier: str = "datasheet",
    row: int | None = None,
    col: int | None = None,
    showlegend: bool = True,
) -> None:
    """Predicted time per scheme (dashed) and measured time per kernel (solid, p10–p90 band)."""
    import plotly.graph_objects as go

    for scheme, part in _sorted_groups(predicted, "scheme"):
        _add(
            fig,
            go.Scatter(
                x=part["M"].to_numpy(),
                y=part["time_s"].to_numpy() * scale,
                mode="lines",
                name=f"{scheme} predicted ({tier})",
                legendgroup=f"p-{scheme}",
                showlegend=showlegend,
                line={"color": style.scheme_color(scheme), "dash": "dash", "width": 2},
                hovertemplate=f"<b>{scheme}</b> predicted ({tier})<br>M=%{{x}} · %{{y:.4g}} {unit}<extra></extra>",
            ),
            row,
            col,
        )
    styles = style.kernel_styles(list(measured["kernel"].astype(str).unique()), _scheme_of(measured))
    for kernel, part in _sorted_groups(measured, "kernel"):
        scheme = str(part["scheme"].iloc[0])
        color = style.scheme_color(scheme)
        dash, symbol = styles.get(kernel, ("solid", "circle"))
        x = part["M"].to_numpy()
        lo = part["p10_s"].to_numpy() * scale
        hi = part["p90_s"].to_numpy() * scale
        _add(
            fig,
            go.Scatter(
                x=np.concatenate([x, x[::-1]]),
                y=np.concatenate([hi, lo[::-1]]),
                fill="toself",
                fillcolor=color,
                opacity=0.18,
                line={"width": 0},
                mode="lines",
                hoverinfo="skip",
                legendgroup=f"m-{kernel}",
                showlegend=False,
                name=f"{kernel} p10–p90",
            ),
            row,
            col,
        )
        _add(
            fig,
            go.Scatter(
                x=x,
                y=part["time_s"].to_numpy() * scale,
                mode="lines+markers",
                name=f"{kernel} measured",
                legendgroup=f"m-{kernel}",
                showlegend=showlegend,
                line={"color": color, "dash": "solid" if dash == "solid" else dash, "width": 2},
                marker={"symbol": symbol, "size": 7},
                customdata=np.column_stack([lo, hi]),
                hovertemplate=(
                    f"<b>{kernel}</b> ({scheme}) measured<br>M=%{{x}} · median %{{y:.4g}} {unit}"
                    f"<br>p10 %{{customdata[0]:.4g}} · p90 %{{customdata[1]:.4g}} {unit}<extra></extra>"
                ),
            ),
            row,
            col,
        )
    fig.update_xaxes(**style.log2_batch_axis(), **_axes(row, col))
    fig.update_yaxes(type="log", title_text=f"time ({unit})", **_axes(row, col))


def add_speedup(
    fig,
    predicted: pd.DataFrame,
    measured: pd.DataFrame,
    crossovers: pd.DataFrame,
    *,
    baseline: str,
    tier: str = "datasheet",
    row: int | None = None,
    col: int | None = None,
    showlegend: bool = True,
) -> None:
    """Speedup over `baseline` per batch: predicted dashed, ideal bytes-only dotted, measured solid, crossovers ✕."""
    import plotly.graph_objects as go

    for scheme, part in _sorted_groups(predicted, "scheme"):
        color = style.scheme_color(scheme)
        x = part["M"].to_numpy()
        _add(
            fig,
            go.Scatter(
                x=x,
                y=part["ideal"].to_numpy(),
                mode="lines",
                name=f"{scheme} ideal (bytes only)",
                legendgroup=f"i-{scheme}",
                showlegend=showlegend,
                line={"color": color, "dash": "dot", "width": 1.5},
                hovertemplate=f"<b>{scheme}</b> ideal bytes-only<br>M=%{{x}} · %{{y:.3f}}×<extra></extra>",
            ),
            row,
            col,
        )
        _add(
            fig,
            go.Scatter(
                x=x,
                y=part["speedup"].to_numpy(),
                mode="lines",
                name=f"{scheme} predicted ({tier})",
                legendgroup=f"p-{scheme}",
                showlegend=showlegend,
                line={"color": color, "dash": "dash", "width": 2},
                hovertemplate=f"<b>{scheme}</b> predicted ({tier})<br>M=%{{x}} · %{{y:.3f}}×<extra></extra>",
            ),
            row,
            col,
        )
    styles = style.kernel_styles(list(measured["kernel"].astype(str).unique()), _scheme_of(measured))
    for kernel, part in _sorted_groups(measured, "kernel"):
        scheme = str(part["scheme"].iloc[0])
        dash, symbol = styles.get(kernel, ("solid", "circle"))
        _add(
            fig,
            go.Scatter(
                x=part["M"].to_numpy(),
                y=part["speedup"].to_numpy(),
                mode="lines+markers",
                name=f"{kernel} measured",
                legendgroup=f"m-{kernel}",
                showlegend=showlegend,
                line={"color": style.scheme_color(scheme), "dash": dash, "width": 2},
                marker={"symbol": symbol, "size": 7},
                hovertemplate=f"<b>{kernel}</b> ({scheme}) measured<br>M=%{{x}} · %{{y:.3f}}×<extra></extra>",
            ),
            row,
            col,
        )
    if not crossovers.empty:
        _add(
            fig,
            go.Scatter(
                x=crossovers["M"].to_numpy(),
                y=np.ones(len(crossovers)),
                mode="markers",
                name="crossover (speedup ≤ 1)",
                legendgroup="crossover",
                showlegend=showlegend,
                marker={
                    "symbol": "x",
                    "size": 13,
                    "color": [style.scheme_color(str(s)) for s in crossovers["scheme"]],
                    "line": {"width": 1, "color": "#000"},
                },
                customdata=np.column_stack(
                    [crossovers["label"].to_numpy(dtype=object), crossovers["kind"].to_numpy(dtype=object)]
                ),
                hovertemplate="<b>crossover</b> %{customdata[0]} (%{customdata[1]})<br>first M = %{x}<extra></extra>",
            ),
            row,
            col,
        )
    if row is None:
        fig.add_hline(y=1.0, line={"color": "#444", "width": 1})
    else:
        fig.add_hline(y=1.0, line={"color": "#444", "width": 1}, row=row, col=col)
    fig.update_xaxes(**style.log2_batch_axis(), **_axes(row, col))
    fig.update_yaxes(type="log", title_text=f"speedup over {baseline} (×)", **_axes(row, col))


def time_figure(predicted: pd.DataFrame, measured: pd.DataFrame, *, title: str, tier: str, per_token: bool = False):
    """Time vs batch for one GPU and one shape (µs per call) or one model (ms per decode step)."""
    import plotly.graph_objects as go

    if predicted.empty and measured.empty:
        return style.empty_figure("Nothing to draw for this selection.", title)
    fig = go.Figure(layout=style.BASE_LAYOUT)
    scale, unit = (style.MS, "ms per decode step") if per_token else (style.US, "µs per call")
    add_time(fig, predicted, measured, scale=scale, unit=unit, tier=tier)
    fig.update_layout(title={"text": title})
    return fig


def speedup_figure(
    predicted: pd.DataFrame, measured: pd.DataFrame, crossovers: pd.DataFrame, *, baseline: str, tier: str, title: str
):
    """Speedup vs batch over the baseline, predicted and measured, ideal curve and crossovers."""
    import plotly.graph_objects as go

    if predicted.empty and measured.empty:
        return style.empty_figure("Nothing to draw for this selection.", title)
    fig = go.Figure(layout=style.BASE_LAYOUT)
    add_speedup(fig, predicted, measured, crossovers, baseline=baseline, tier=tier)
    fig.update_layout(title={"text": title})
    return fig


def rollup_figure(rollup: pd.DataFrame, *, title: str):
    """Whole-model decode: ms per step and tokens/s vs batch, per scheme (predicted dashed, measured solid)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if rollup.empty:
        return style.empty_figure("No roll-up for this selection.", title)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("time per decode step", "throughput"), horizontal_spacing=0.1)
    for (label, source), part in rollup.groupby(["label", "source"], sort=True, observed=True):
        part = part.sort_values("M")
        scheme = str(part["scheme"].iloc[0])
        measured = source == "measured"
        line = {"color": style.scheme_color(scheme), "dash": "solid" if measured else "dash", "width": 2}
        mode = "lines+markers" if measured else "lines"
        name = f"{label} {source}"
        for col, column, scale, unit in ((1, "time_per_token_s", style.MS, "ms"), (2, "tokens_per_s", 1.0, "tokens/s")):
            fig.add_trace(
                go.Scatter(
                    x=part["M"].to_numpy(),
                    y=part[column].to_numpy() * scale,
                    mode=mode,
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    line=line,
                    hovertemplate=f"<b>{name}</b><br>M=%{{x}} · %{{y:.4g}} {unit}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_layout(style.BASE_LAYOUT, title={"text": title})
    fig.update_xaxes(**style.log2_batch_axis())
    fig.update_yaxes(type="log", title_text=style.TOKEN_TIME_AXIS, row=1, col=1)
    fig.update_yaxes(type="log", title_text=style.TOKENS_AXIS, row=1, col=2)
    return fig


def facet_figure(panels: list[tuple[str, Callable[..., None]]], *, title: str, height: int = 520):
    """Side-by-side panels (one per GPU): each callable adds its traces given row, col and showlegend."""
    from plotly.subplots import make_subplots

    if not panels:
        return style.empty_figure("Select two or more GPUs to compare.", title)
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[0] for p in panels], horizontal_spacing=0.06)
    for i, (_, add) in enumerate(panels, start=1):
        add(fig, row=1, col=i, showlegend=i == 1)
    fig.update_layout(style.BASE_LAYOUT, title={"text": title}, height=height)
    return fig


def as_panel(add: Callable[..., None], *args: Any, **kwargs: Any) -> Callable[..., None]:
    """Bind a builder's data arguments, leaving row, col and showlegend to `facet_figure`."""

    def panel(fig, *, row: int, col: int, showlegend: bool) -> None:
        add(fig, *args, row=row, col=col, showlegend=showlegend, **kwargs)

    return panel
