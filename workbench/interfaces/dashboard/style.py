"""Colours, line styles, axis titles and the empty figure shared by every figure builder.

Plotted values are scaled to the unit written in the axis title (µs, TFLOP/s, MHz); hover text uses d3 formats on
those scaled values, so formatting stays vectorised (no Python loop over points).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

SCHEME_ORDER = ("fp32", "fp16", "bf16", "w8a16", "w4a16", "w8a8", "fp8", "nvfp4", "mxfp4")
_PALETTE = (
    "#7f7f7f",  # fp32
    "#1f77b4",  # fp16
    "#17becf",  # bf16
    "#9467bd",  # w8a16
    "#d62728",  # w4a16
    "#2ca02c",  # w8a8
    "#ff7f0e",  # fp8
    "#8c564b",  # nvfp4
    "#e377c2",  # mxfp4
)
_EXTRA = ("#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")
SCHEME_COLORS = dict(zip(SCHEME_ORDER, _PALETTE, strict=True))
UNIT_COLORS = {
    "fp32": "#7f7f7f",
    "tf32": "#aaaaaa",
    "fp16": "#1f77b4",
    "bf16": "#17becf",
    "int8": "#2ca02c",
    "fp8": "#ff7f0e",
    "fp4": "#8c564b",
}
KERNEL_DASHES = ("solid", "dot", "dashdot", "longdash", "longdashdot")
KERNEL_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "x", "star")

TIME_AXIS = "time per call (µs)"
TOKEN_TIME_AXIS = "time per decode step (ms)"
BATCH_AXIS = "batch M (tokens)"
INTENSITY_AXIS = "arithmetic intensity (FLOP/byte)"
FLOPS_AXIS = "attainable (TFLOP/s)"
SPEEDUP_AXIS = "speedup over baseline (×)"
TOKENS_AXIS = "throughput (tokens/s)"
BATCH_TICKS = [1, 2, 4, 8, 16, 32, 64, 128, 256]

US = 1e6  # seconds -> µs
MS = 1e3
TERA = 1e-12  # FLOP/s -> TFLOP/s
GIGA = 1e-9  # B/s -> GB/s
MEGA = 1e-6  # Hz -> MHz

BASE_LAYOUT: dict[str, Any] = {
    "margin": {"l": 70, "r": 20, "t": 60, "b": 60},
    "legend": {
        "orientation": "v",
        "x": 1.02,
        "y": 1,
        "xanchor": "left",
        "font": {"size": 11},
        "groupclick": "toggleitem",
        "tracegroupgap": 8,
    },
    "hoverlabel": {"font": {"size": 12}},
    "uirevision": "keep",
}


# every figure: no Plotly logo, no cloud "share" button; the camera button exports SVG, the buttons above each
# figure export SVG or PNG (Plotly.downloadImage in the browser)
GRAPH_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "showSendToCloud": False,
    "showEditInChartStudio": False,
    "modeBarButtonsToRemove": ["sendDataToCloud", "editInChartStudio"],
    "toImageButtonOptions": {"format": "svg", "scale": 1},
}

def scatter_type(n_points: int) -> str:
    """Always SVG scatter: the page's plotly.js has no WebGL traces (scripts/build_plotly.sh), and the views reduce the
    points they draw (newest run of each point, best kernel per scheme) to far below where WebGL would pay off."""
    return "scatter"


def scheme_color(scheme: str) -> str:
    """A fixed colour per scheme (unknown names get a stable colour from a second palette)."""
    if scheme in SCHEME_COLORS:
        return SCHEME_COLORS[scheme]
    return _EXTRA[sum(map(ord, scheme)) % len(_EXTRA)]


def unit_color(unit: str) -> str:
    return UNIT_COLORS.get(unit, "#444444")


def scheme_rank(scheme: str) -> int:
    return SCHEME_ORDER.index(scheme) if scheme in SCHEME_ORDER else len(SCHEME_ORDER)


def kernel_styles(kernels: list[str], scheme_of: dict[str, str]) -> dict[str, tuple[str, str]]:
    """(dash, marker symbol) per kernel: kernels of one scheme share its colour and differ in dash and symbol."""
    seen: dict[str, int] = {}
    out = {}
    for kernel in sorted(kernels):
        i = seen.get(scheme_of.get(kernel, ""), 0)
        seen[scheme_of.get(kernel, "")] = i + 1
        out[kernel] = (KERNEL_DASHES[i % len(KERNEL_DASHES)], KERNEL_SYMBOLS[i % len(KERNEL_SYMBOLS)])
    return out


def group(scheme: str, first: bool) -> dict[str, Any]:
    """Legend grouping by scheme: every trace of a scheme in one group (entries stay together, a gap between groups;
    each entry names its scheme, so no group title rows are added to the legend)."""
    return {"legendgroup": scheme}


class Grouper:
    """Hands out `group(...)` kwargs, giving each scheme's title to its first trace only."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __call__(self, scheme: str) -> dict[str, Any]:
        first = scheme not in self.seen
        self.seen.add(scheme)
        return group(scheme, first)


def kernel_symbols(kernels: list[str], scheme_of: dict[str, str]) -> dict[str, str]:
    """A distinct marker symbol per kernel within its scheme (kernels share the scheme's colour; lines stay solid)."""
    return {k: symbol for k, (_, symbol) in kernel_styles(kernels, scheme_of).items()}


def log2_batch_axis(title: str = BATCH_AXIS) -> dict[str, Any]:
    return {"title": {"text": title}, "type": "log", "tickvals": BATCH_TICKS, "ticktext": [str(t) for t in BATCH_TICKS]}


TRACE_TYPES = ("scatter", "bar", "heatmap")  # all that assets/plotly-workbench.min.js draws (scripts/build_plotly.sh)


@functools.cache
def _template() -> dict[str, Any]:
    import plotly.io as pio

    full = pio.templates["plotly_white"].to_plotly_json()
    # the page's plotly.js draws scatter, bar and heatmap only: the other trace types' defaults would be sent with
    # every figure and applied by every draw for nothing (7 kB -> 2 kB of JSON)
    return {**full, "data": {k: v for k, v in full["data"].items() if k in TRACE_TYPES}}


def make_figure(traces: list[dict[str, Any]], layout: dict[str, Any]):
    """A Plotly Figure from trace and layout dicts, built without Plotly's per-property validation.

    Validation and the deep copies that go with it cost ~10× the rest of a callback at 10⁵ rows; the builders here
    produce only known-good properties (the figure tests render them in a real browser).
    """
    import plotly.graph_objects as go

    full = {**BASE_LAYOUT, "template": _template(), **layout}
    return go.Figure(data=traces, layout=full, _validate=False)


@dataclass
class Panel:
    """One subplot: its traces (without axis refs), its axes and an optional title."""

    traces: list[dict[str, Any]]
    xaxis: dict[str, Any]
    yaxis: dict[str, Any]
    title: str = ""
    shapes: list[dict[str, Any]] = field(default_factory=list)  # xref/yref "x"/"y" are rewritten to the cell's
    annotations: list[dict[str, Any]] = field(default_factory=list)  # xref/yref "x"/"y" rewritten like shapes


MIN_CELLS_SHARE = 0.25  # compose: a grid's cells keep at least this share of the figure's width and of its height


def fit_gap(gap: float, cells: int) -> float:
    """The gap (a share of the figure) between `cells` subplots along one axis: as asked where the cells keep at least
    MIN_CELLS_SHARE of the axis, else shrunk until they do, so any number of rows or columns stays inside [0, 1]."""
    if cells < 2:
        return gap
    return min(gap, (1.0 - MIN_CELLS_SHARE) / (cells - 1))


def pixel_gap(gap_px: float, size_px: float, margins_px: float) -> float:
    """A gap of `gap_px` pixels as a share of a figure `size_px` tall (or wide) with `margins_px` of margins: for a
    figure that grows with its rows, the gap between them stays the same on screen."""
    return gap_px / max(size_px - margins_px, 1.0)


def compose(
    panels: list[Panel],
    rows: int,
    cols: int,
    layout: dict[str, Any],
    *,
    hspace: float = 0.07,
    vspace: float = 0.08,
    share_x: bool = False,
    share_y: bool = False,
):
    """Place panels on a rows × cols grid (row-major), like make_subplots but without its validation cost; gaps too
    wide for the grid to fit are shrunk (fit_gap)."""
    hspace, vspace = fit_gap(hspace, cols), fit_gap(vspace, rows)
    width = (1.0 - hspace * (cols - 1)) / cols
    height = (1.0 - vspace * (rows - 1)) / rows
    out_layout: dict[str, Any] = dict(layout)
    traces: list[dict[str, Any]] = []
    annotations = list(layout.get("annotations", []))
    shapes = list(layout.get("shapes", []))
    for i, panel in enumerate(panels):
        r, c = divmod(i, cols)
        n = i + 1
        xref, yref = ("x", "y") if n == 1 else (f"x{n}", f"y{n}")
        x0 = c * (width + hspace)
        y1 = 1.0 - r * (height + vspace)
        xaxis = {**panel.xaxis, "domain": [max(0.0, round(x0, 9)), min(1.0, round(x0 + width, 9))], "anchor": yref}
        if share_x and n > 1:
            xaxis["matches"] = "x"
        if share_x and r < rows - 1:
            xaxis["showticklabels"] = False
            xaxis.pop("title", None)
        out_layout["xaxis" if n == 1 else f"xaxis{n}"] = xaxis
        yaxis = {**panel.yaxis, "domain": [max(0.0, round(y1 - height, 9)), min(1.0, round(y1, 9))], "anchor": xref}
        if share_y and n > 1:
            yaxis["matches"] = "y"
        out_layout["yaxis" if n == 1 else f"yaxis{n}"] = yaxis
        traces.extend({**t, "xaxis": xref, "yaxis": yref} for t in panel.traces)
        for shape in panel.shapes:
            shapes.append(
                {
                    **shape,
                    "xref": shape.get("xref", "x").replace("x", xref, 1),
                    "yref": shape.get("yref", "y").replace("y", yref, 1),
                }
            )
        for note in panel.annotations:
            annotations.append(
                {
                    **note,
                    "xref": note.get("xref", "x").replace("x", xref, 1),
                    "yref": note.get("yref", "y").replace("y", yref, 1),
                }
            )
        if panel.title:
            annotations.append(
                {
                    "text": panel.title,
                    "x": x0 + width / 2,
                    "y": y1,
                    "xref": "paper",
                    "yref": "paper",
                    "xanchor": "center",
                    "yanchor": "bottom",
                    "showarrow": False,
                    "font": {"size": 14},
                }
            )
    out_layout["annotations"] = annotations
    out_layout["shapes"] = shapes
    return make_figure(traces, out_layout)


def empty_figure(message: str, title: str = ""):
    """A figure with no data and a centred message (used for empty selections)."""
    return make_figure(
        [],
        {
            "title": {"text": title},
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "annotations": [
                {
                    "text": message,
                    "xref": "paper",
                    "yref": "paper",
                    "x": 0.5,
                    "y": 0.5,
                    "showarrow": False,
                    "font": {"size": 15, "color": "#555"},
                }
            ],
        },
    )
