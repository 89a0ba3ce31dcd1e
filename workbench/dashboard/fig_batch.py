"""Figures against batch size: time vs batch, speedup vs batch, whole-model roll-up, and the GPU side-by-side facet.

Pure builders. Inputs (SI units):
- time: `predicted` (scheme, M, time_s) dashed per scheme; `measured` (kernel, scheme, M, time_s, p10_s, p90_s)
  solid with a p10–p90 band per kernel.
- speedup: `predicted` (scheme, M, speedup, ideal) dashed, with the ideal bytes-only curve dotted; `measured`
  (kernel, scheme, M, speedup) solid; `crossovers` (label, scheme, M, kind) marked on the y = 1 line.
- roll-up: (label, scheme, source, M, time_per_token_s, tokens_per_s), source "predicted" | "measured".
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from workbench.dashboard import style


def _scheme_of(measured: pd.DataFrame) -> dict[str, str]:
    if measured.empty:
        return {}
    pairs = measured[["kernel", "scheme"]].drop_duplicates()
    return dict(zip(pairs["kernel"].astype(str), pairs["scheme"].astype(str), strict=True))


def _sorted_groups(frame: pd.DataFrame, key: str):
    for name, part in frame.groupby(key, sort=True, observed=True):
        yield str(name), part.sort_values("M")


def _line(x, y, name: str, group: str, showlegend: bool, line: dict, hover: str, **extra: Any) -> dict[str, Any]:
    return dict(
        type="scatter",
        x=np.asarray(x),
        y=np.asarray(y, dtype=float),
        mode=extra.pop("mode", "lines"),
        name=name,
        legendgroup=group,
        showlegend=showlegend,
        line=line,
        hovertemplate=hover,
        **extra,
    )


def time_panel(
    predicted: pd.DataFrame,
    measured: pd.DataFrame,
    *,
    scale: float = style.US,
    unit: str = "µs per call",
    tier: str = "datasheet",
    title: str = "",
    showlegend: bool = True,
) -> style.Panel:
    """Predicted time per scheme (dashed) and measured time per kernel (solid, p10–p90 band)."""
    short = unit.split(" ")[0]
    traces = []
    for scheme, part in _sorted_groups(predicted, "scheme"):
        traces.append(
            _line(
                part["M"],
                part["time_s"].to_numpy() * scale,
                f"{scheme} predicted ({tier})",
                f"p-{scheme}",
                showlegend,
                {"color": style.scheme_color(scheme), "dash": "dash", "width": 2},
                f"<b>{scheme}</b> predicted ({tier})<br>M=%{{x}} · %{{y:.4g}} {short}<extra></extra>",
            )
        )
    styles = style.kernel_styles(list(measured["kernel"].astype(str).unique()), _scheme_of(measured))
    for kernel, part in _sorted_groups(measured, "kernel"):
        scheme = str(part["scheme"].iloc[0])
        color = style.scheme_color(scheme)
        dash, symbol = styles.get(kernel, ("solid", "circle"))
        x = part["M"].to_numpy()
        lo = part["p10_s"].to_numpy(dtype=float) * scale
        hi = part["p90_s"].to_numpy(dtype=float) * scale
        traces.append(
            dict(
                type="scatter",
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
            )
        )
        traces.append(
            _line(
                x,
                part["time_s"].to_numpy(dtype=float) * scale,
                f"{kernel} measured",
                f"m-{kernel}",
                showlegend,
                {"color": color, "dash": dash, "width": 2},
                f"<b>{kernel}</b> ({scheme}) measured<br>M=%{{x}} · median %{{y:.4g}} {short}"
                f"<br>p10 %{{customdata[0]:.4g}} · p90 %{{customdata[1]:.4g}} {short}<extra></extra>",
                mode="lines+markers",
                marker={"symbol": symbol, "size": 7},
                customdata=np.column_stack([lo, hi]),
            )
        )
    yaxis = {"type": "log", "title": {"text": f"time ({unit})"}}
    return style.Panel(traces, style.log2_batch_axis(), yaxis, title)


def speedup_panel(
    predicted: pd.DataFrame,
    measured: pd.DataFrame,
    crossovers: pd.DataFrame,
    *,
    baseline: str,
    tier: str = "datasheet",
    title: str = "",
    showlegend: bool = True,
) -> style.Panel:
    """Speedup over `baseline` per batch: predicted dashed, ideal bytes-only dotted, measured solid, crossovers ✕."""
    traces = []
    for scheme, part in _sorted_groups(predicted, "scheme"):
        color = style.scheme_color(scheme)
        traces.append(
            _line(
                part["M"],
                part["ideal"],
                f"{scheme} ideal (bytes only)",
                f"i-{scheme}",
                showlegend,
                {"color": color, "dash": "dot", "width": 1.5},
                f"<b>{scheme}</b> ideal bytes-only<br>M=%{{x}} · %{{y:.3f}}×<extra></extra>",
            )
        )
        traces.append(
            _line(
                part["M"],
                part["speedup"],
                f"{scheme} predicted ({tier})",
                f"p-{scheme}",
                showlegend,
                {"color": color, "dash": "dash", "width": 2},
                f"<b>{scheme}</b> predicted ({tier})<br>M=%{{x}} · %{{y:.3f}}×<extra></extra>",
            )
        )
    styles = style.kernel_styles(list(measured["kernel"].astype(str).unique()), _scheme_of(measured))
    for kernel, part in _sorted_groups(measured, "kernel"):
        scheme = str(part["scheme"].iloc[0])
        dash, symbol = styles.get(kernel, ("solid", "circle"))
        traces.append(
            _line(
                part["M"],
                part["speedup"],
                f"{kernel} measured",
                f"m-{kernel}",
                showlegend,
                {"color": style.scheme_color(scheme), "dash": dash, "width": 2},
                f"<b>{kernel}</b> ({scheme}) measured<br>M=%{{x}} · %{{y:.3f}}×<extra></extra>",
                mode="lines+markers",
                marker={"symbol": symbol, "size": 7},
            )
        )
    if not crossovers.empty:
        traces.append(
            dict(
                type="scatter",
                x=crossovers["M"].to_numpy(dtype=float),
                y=np.ones(len(crossovers)),
                mode="markers",
                name="crossover (speedup ≤ 1)",
                legendgroup="crossover",
                showlegend=showlegend,
                marker={
                    "symbol": "x",
                    "size": 13,
                    "line": {"width": 1, "color": "#000"},
                    "color": [style.scheme_color(str(s)) for s in crossovers["scheme"]],
                },
                text=np.array(
                    (crossovers["label"].astype(str) + " (" + crossovers["kind"].astype(str) + ")").tolist(), dtype=str
                ),
                hovertemplate="<b>crossover</b> %{text}<br>first M with speedup ≤ 1: %{x}<extra></extra>",
            )
        )
    one = {
        "type": "line",
        "xref": "x domain",
        "x0": 0,
        "x1": 1,
        "yref": "y",
        "y0": 1.0,
        "y1": 1.0,
        "line": {"color": "#444", "width": 1},
    }
    yaxis = {"type": "log", "title": {"text": f"speedup over {baseline} (×)"}}
    return style.Panel(traces, style.log2_batch_axis(), yaxis, title, shapes=[one])


def time_figure(predicted: pd.DataFrame, measured: pd.DataFrame, *, title: str, tier: str, per_token: bool = False):
    """Time vs batch for one GPU and one shape (µs per call) or one model (ms per decode step)."""
    if predicted.empty and measured.empty:
        return style.empty_figure("Nothing to draw for this selection.", title)
    scale, unit = (style.MS, "ms per decode step") if per_token else (style.US, "µs per call")
    panel = time_panel(predicted, measured, scale=scale, unit=unit, tier=tier)
    return style.compose([panel], 1, 1, {"title": {"text": title}})


def speedup_figure(
    predicted: pd.DataFrame, measured: pd.DataFrame, crossovers: pd.DataFrame, *, baseline: str, tier: str, title: str
):
    """Speedup vs batch over the baseline, predicted and measured, ideal curve and crossovers."""
    if predicted.empty and measured.empty:
        return style.empty_figure("Nothing to draw for this selection.", title)
    panel = speedup_panel(predicted, measured, crossovers, baseline=baseline, tier=tier)
    return style.compose([panel], 1, 1, {"title": {"text": title}})


def rollup_figure(rollup: pd.DataFrame, *, title: str):
    """Whole-model decode: ms per step and tokens/s vs batch, per scheme (predicted dashed, measured solid)."""
    if rollup.empty:
        return style.empty_figure("No roll-up for this selection.", title)
    left: list[dict[str, Any]] = []
    right: list[dict[str, Any]] = []
    for (label, source), part in rollup.groupby(["label", "source"], sort=True, observed=True):
        part = part.sort_values("M")
        measured = source == "measured"
        line = {
            "color": style.scheme_color(str(part["scheme"].iloc[0])),
            "dash": "solid" if measured else "dash",
            "width": 2,
        }
        mode = "lines+markers" if measured else "lines"
        name = f"{label} {source}"
        left.append(
            _line(
                part["M"],
                part["time_per_token_s"].to_numpy() * style.MS,
                name,
                name,
                True,
                line,
                f"<b>{name}</b><br>M=%{{x}} · %{{y:.4g}} ms per step<extra></extra>",
                mode=mode,
            )
        )
        right.append(
            _line(
                part["M"],
                part["tokens_per_s"],
                name,
                name,
                False,
                line,
                f"<b>{name}</b><br>M=%{{x}} · %{{y:.4g}} tokens/s<extra></extra>",
                mode=mode,
            )
        )
    panels = [
        style.Panel(
            left,
            style.log2_batch_axis(),
            {"type": "log", "title": {"text": style.TOKEN_TIME_AXIS}},
            "time per decode step",
        ),
        style.Panel(
            right, style.log2_batch_axis(), {"type": "log", "title": {"text": style.TOKENS_AXIS}}, "throughput"
        ),
    ]
    return style.compose(panels, 1, 2, {"title": {"text": title}}, hspace=0.1)


def facet_figure(panels: list[style.Panel], *, title: str, height: int = 520):
    """Side-by-side panels, one per GPU, on shared axes (only the first contributes legend entries)."""
    if not panels:
        return style.empty_figure("Select two or more GPUs to compare.", title)
    return style.compose(
        panels, 1, len(panels), {"title": {"text": title}, "height": height}, hspace=0.06, share_y=True
    )
