"""Figures that split a time into parts: the whole-model roll-up with its per-layer breakdown, and the kernel-aware
attribution of each measured point.

Pure builders. Inputs (SI units):
- roll-up: (label, scheme, source, M, time_per_token_s, tokens_per_s), source "predicted" | "measured"; layers:
  (scheme, source, layer, time_s) at one batch (count × time of each linear layer in one decode step).
- attribution: (label, M, attr_fixed_s, attr_memory_s, attr_alu_s, attr_tensor_s, attr_fixup_s, attr_remainder_s),
  one row per bar; the remainder (measured − predicted) may be negative and is drawn hatched.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from workbench.interfaces.dashboard import style
from workbench.interfaces.dashboard.fig_batch import _line

ATTRIBUTION_PARTS = (
    ("attr_fixed_s", "fixed cost (launch, latency, drain)", "#9ca3af"),
    ("attr_memory_s", "memory", "#2563eb"),
    ("attr_alu_s", "CUDA-core work (dequant, convert)", "#f59e0b"),
    ("attr_tensor_s", "tensor cores", "#16a34a"),
    ("attr_fixup_s", "split-K / stream-K fix-up", "#9333ea"),
    ("attr_remainder_s", "unexplained remainder (measured − predicted)", "#dc2626"),
)
ATTRIBUTION_COLUMNS = tuple(c for c, _, _ in ATTRIBUTION_PARTS)
MEASURED_NOTE = "measured = fastest kernel per layer"
ROW_PX = 380  # attribution: the figure grows by this per row of panels (at least MIN_HEIGHT_PX)
MIN_HEIGHT_PX = 460
ROW_GAP_PX = 90  # between rows of panels: room for the batch axis and the next row's titles, however many rows
LAYER_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _layer_panel(layers: pd.DataFrame, batch: int) -> style.Panel:
    """Stacked horizontal bars: one bar per (scheme, source), one segment per layer (ms per decode step)."""
    bars = (layers["scheme"].astype(str) + " " + layers["source"].astype(str)).to_numpy()
    order = list(dict.fromkeys(bars))
    traces = []
    for i, (layer, part) in enumerate(layers.groupby("layer", sort=False, observed=True)):
        part_bars = (part["scheme"].astype(str) + " " + part["source"].astype(str)).to_numpy()
        traces.append(
            dict(
                type="bar",
                orientation="h",
                x=part["time_s"].to_numpy(dtype=float) * style.MS,
                y=part_bars,
                name=str(layer),
                legendgroup="layers",
                legendgrouptitle={"text": f"layers (M = {batch})"} if i == 0 else None,
                marker={"color": LAYER_COLORS[i % len(LAYER_COLORS)]},
                hovertemplate=f"<b>{layer}</b> · %{{y}}<br>%{{x:.4g}} ms per decode step<extra></extra>",
            )
        )
    traces = [{k: v for k, v in t.items() if v is not None} for t in traces]
    xaxis = {"title": {"text": f"time per decode step at M = {batch} (ms)"}}
    yaxis = {"categoryorder": "array", "categoryarray": order[::-1], "automargin": True}
    return style.Panel(traces, xaxis, yaxis, f"per-layer parts at M = {batch}")


def rollup_figure(rollup: pd.DataFrame, *, title: str, layers: pd.DataFrame | None = None, batch: int = 1):
    """Whole-model decode: ms per step and tokens/s vs batch per scheme (predicted dashed, measured solid), and the
    per-layer parts of one step; the chart says what "measured" means."""
    if rollup.empty:
        return style.empty_figure("No roll-up for this selection.", title)
    left: list[dict[str, Any]] = []
    right: list[dict[str, Any]] = []
    grouper = style.Grouper()
    groups = sorted(rollup.groupby(["scheme", "source"], sort=True, observed=True),
                    key=lambda kv: (style.scheme_rank(str(kv[0][0])), kv[0][1] != "predicted"))  # fmt: skip
    for (scheme, source), part in groups:
        part = part.sort_values("M")
        measured = source == "measured"
        line = {"color": style.scheme_color(str(scheme)), "dash": "solid" if measured else "dash", "width": 2}
        mode = "lines+markers" if measured else "lines"
        name = f"{scheme} measured (fastest kernel per layer)" if measured else f"{scheme} predicted"
        kw = {k: v for k, v in grouper(str(scheme)).items() if k != "legendgroup"}
        left.append(_line(part["M"], part["time_per_token_s"].to_numpy() * style.MS, name, str(scheme), True, line,
                          f"<b>{scheme}</b> {name}<br>M=%{{x}} · %{{y:.4g}} ms per step<extra></extra>", mode=mode,
                          **kw))  # fmt: skip
        right.append(_line(part["M"], part["tokens_per_s"], name, str(scheme), False, line,
                           f"<b>{scheme}</b> {name}<br>M=%{{x}} · %{{y:.4g}} tokens/s<extra></extra>",
                           mode=mode))  # fmt: skip
    panels = [
        style.Panel(left, style.log2_batch_axis(), {"type": "log", "title": {"text": style.TOKEN_TIME_AXIS}},
                    "time per decode step"),  # fmt: skip
        style.Panel(right, style.log2_batch_axis(), {"type": "log", "title": {"text": style.TOKENS_AXIS}},
                    "throughput"),  # fmt: skip
    ]
    has_layers = layers is not None and not layers.empty
    if has_layers:
        panels.append(_layer_panel(layers, batch))
    lines = [*title.split("<br>"), f"{MEASURED_NOTE} (unmeasured layers left out of its bars); predicted = Σ over "
             "layers of count × time"]  # fmt: skip
    layout = {
        "title": {"text": "<br>".join(lines), "font": {"size": 14}, "y": 0.99, "yanchor": "top"},
        "margin": {"l": 90, "r": 20, "t": 60 + 20 * len(lines), "b": 60},
        "barmode": "stack",
        "height": 960 if has_layers else 600,
    }
    if has_layers:
        return style.compose(panels, 2, 2, layout, hspace=0.1, vspace=0.16)
    return style.compose(panels, 1, 2, layout, hspace=0.1)


def attribution_figure(frame: pd.DataFrame, *, title: str, panels_by: str = "label"):
    """Stacked bars per M of the kernel-aware terms; one panel per `panels_by` value (a kernel or a scheme's best
    kernel). The remainder is hatched and may go below zero (barmode "relative")."""
    if frame.empty:
        return style.empty_figure("No measured points with an attribution for this selection.", title)
    groups = list(frame.groupby(panels_by, sort=False, observed=True))
    cols = min(3, len(groups))
    rows = -(-len(groups) // cols)
    panels = []
    for i, (label, part) in enumerate(groups):
        part = part.sort_values("M")
        x = [str(int(m)) for m in part["M"]]
        kernels = np.array(part.get("kernel", part[panels_by]).astype("string").tolist(), dtype=str)
        traces = []
        for col, name, color in ATTRIBUTION_PARTS:
            remainder = col == "attr_remainder_s"
            traces.append(
                dict(
                    type="bar",
                    x=x,
                    y=part[col].to_numpy(dtype=float) * style.US,
                    name=name,
                    legendgroup=col,
                    showlegend=i == 0,
                    marker={
                        "color": "rgba(220,38,38,0.25)" if remainder else color,
                        "line": {"color": color, "width": 1.5 if remainder else 0},
                        "pattern": {"shape": "/" if remainder else "", "fgcolor": color},
                    },
                    text=kernels,
                    hovertemplate=f"<b>%{{text}}</b> · M=%{{x}}<br>{name}: %{{y:.4g}} µs<extra></extra>",
                )
            )
        xaxis = {"title": {"text": style.BATCH_AXIS}, "type": "category"}
        yaxis = {"title": {"text": "time per call (µs)"}, "zeroline": True, "zerolinecolor": "#111"}
        panels.append(style.Panel(traces, xaxis, yaxis, str(label)))
    height = max(MIN_HEIGHT_PX, ROW_PX * rows)
    margin = style.BASE_LAYOUT["margin"]
    vspace = style.pixel_gap(ROW_GAP_PX, height, margin["t"] + margin["b"])
    layout = {"title": {"text": title}, "barmode": "relative", "height": height}
    return style.compose(panels, rows, cols, layout, hspace=0.08, vspace=vspace)
