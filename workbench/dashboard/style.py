"""Colours, line styles, axis titles and the empty figure shared by every figure builder.

Plotted values are scaled to the unit written in the axis title (µs, TFLOP/s, MHz); hover text uses d3 formats on
those scaled values, so formatting stays vectorised (no Python loop over points).
"""

from __future__ import annotations

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
    "template": "plotly_white",
    "margin": {"l": 70, "r": 20, "t": 60, "b": 60},
    "legend": {"orientation": "v", "x": 1.02, "y": 1, "xanchor": "left", "font": {"size": 11}},
    "hoverlabel": {"font": {"size": 12}},
    "uirevision": "keep",
}


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


def log2_batch_axis(title: str = BATCH_AXIS) -> dict[str, Any]:
    return {"title": {"text": title}, "type": "log", "tickvals": BATCH_TICKS, "ticktext": [str(t) for t in BATCH_TICKS]}


def empty_figure(message: str, title: str = ""):
    """A figure with no data and a centred message (used for empty selections)."""
    import plotly.graph_objects as go

    fig = go.Figure(layout=BASE_LAYOUT)
    fig.update_layout(
        title={"text": title},
        xaxis={"visible": False},
        yaxis={"visible": False},
        annotations=[
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
    )
    return fig
