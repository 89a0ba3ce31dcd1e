"""Diagnostic figures: the model-error heatmap and the clocks/power per measured point.

Pure builders. Inputs (SI units):
- error: (label, M, ratio) with ratio = predicted / measured time (1 = exact, < 1 = the model is optimistic).
- clocks: measurement rows (workbench.storage.schema.MEASUREMENT_COLUMNS) in the order they were measured.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.interfaces.dashboard import style

_RATIO_TICKS = (0.25, 0.5, 0.7, 1.0, 1.4, 2.0, 4.0)
COLOR_LIMIT = 2.0  # log2: the colours span 0.25× … 4×; beyond that a cell keeps the end colour and its own label
# diverging, saturating quickly near 1 so a 0.7× or 1.4× error is visibly coloured (red: the model is optimistic)
_COLORSCALE = [[0.0, "#67001f"], [0.3, "#d6604d"], [0.42, "#f4a582"], [0.5, "#f7f7f7"], [0.58, "#92c5de"],
               [0.7, "#4393c3"], [1.0, "#053061"]]  # fmt: skip


def error_heatmap(frame: pd.DataFrame, *, tier: str, title: str):
    """predicted/measured per (kernel, batch) on a log2 colour scale centred on 1, capped at 0.25× and 4× (the
    colour bar says "≤" / "≥" at its ends; every cell prints its own ratio)."""
    frame = frame[np.isfinite(frame["ratio"]) & (frame["ratio"] > 0)] if not frame.empty else frame
    if frame.empty:
        return style.empty_figure(f"No measured points with a {tier} prediction for this selection.", title)
    table = frame.pivot_table(index="label", columns="M", values="ratio", aggfunc="median", observed=True)
    table = table.sort_index(ascending=False)
    ratio = table.to_numpy(dtype=float)
    text = np.where(np.isfinite(ratio), np.char.mod("%.2f×", np.nan_to_num(ratio, nan=1.0)), "")
    z = np.clip(np.log2(ratio), -COLOR_LIMIT, COLOR_LIMIT)
    limit = COLOR_LIMIT
    ticktext = [f"{t:g}×" for t in _RATIO_TICKS]
    ticktext[0], ticktext[-1] = "≤" + ticktext[0], "≥" + ticktext[-1]
    heat = dict(
        type="heatmap",
        z=z,
        x=[str(m) for m in table.columns],
        y=list(table.index),
        text=text,
        texttemplate="%{text}",
        customdata=ratio,
        colorscale=_COLORSCALE,
        zmid=0.0,
        zmin=-limit,
        zmax=limit,
        colorbar={
            "title": {"text": "predicted / measured"},
            "tickvals": [np.log2(t) for t in _RATIO_TICKS],
            "ticktext": ticktext,
        },
        hovertemplate=f"<b>%{{y}}</b><br>M=%{{x}}<br>predicted ({tier}) / measured"
        " = %{customdata:.3f}<extra></extra>",
    )
    layout = {
        "title": {"text": title},
        "xaxis": {"title": {"text": style.BATCH_AXIS}, "type": "category"},
        "yaxis": {"title": {"text": "kernel (scheme)"}},
        "height": max(380, 60 + 34 * len(table.index)),
    }
    return style.make_figure([heat], layout)


CLOCK_POINTS = 2000  # per panel
_CLOCK_PANELS = (
    ("sm_clock_median_hz", "SM clock (MHz)", style.MEGA),
    ("mem_clock_median_hz", "memory clock (MHz)", style.MEGA),
    ("power_median_w", "power (W)", 1.0),
)


def clocks_figure(measured: pd.DataFrame, *, title: str):
    """SM clock, memory clock and power per measured point (in run order); throttled points marked ✕."""
    if measured.empty:
        return style.empty_figure("No measured points for this selection (predictions only).", title)
    frame = measured.sort_values(["timestamp"], kind="stable").reset_index(drop=True)
    total = len(frame)
    if total > CLOCK_POINTS:  # SVG markers: the newest points, the title says how many of how many
        frame = frame.iloc[total - CLOCK_POINTS :].reset_index(drop=True)
    if frame[[c for c, _, _ in _CLOCK_PANELS]].isna().all().all():
        return style.empty_figure("These measurements carry no NVML clock samples.", title)
    x = np.arange(len(frame))
    throttled = frame["throttled"].fillna(False).to_numpy(dtype=bool)
    # numeric customdata (Plotly deep-copies object arrays element by element); strings go in `text`
    custom = np.column_stack(
        [
            frame["M"].to_numpy(dtype=float),
            frame["N"].to_numpy(dtype=float),
            frame["K"].to_numpy(dtype=float),
            frame["sm_clock_min_hz"].to_numpy(dtype=float) * style.MEGA,
            frame["temperature_max_c"].to_numpy(dtype=float),
        ]
    )
    reasons = frame["clock_reasons"].astype("string").fillna("").replace("", "none")
    # fixed-width unicode, not object: validated and copied as one block
    text = np.array(
        (
            frame["kernel"].astype("string")
            + " · "
            + frame["gpu_key"].astype("string")
            + "<br>clock reasons: "
            + reasons
        ).tolist(),
        dtype=str,
    )
    hover = (
        "<b>%{text}</b><br>M=%{customdata[0]} · %{customdata[1]}×%{customdata[2]} · %{y:.4g} {unit}"
        "<br>SM clock min %{customdata[3]:.0f} MHz · max temp %{customdata[4]:.0f} °C<extra></extra>"
    )
    panels = []
    for i, (column, axis, scale) in enumerate(_CLOCK_PANELS):
        unit = axis.split("(")[-1].rstrip(")")
        y = frame[column].to_numpy(dtype=float) * scale
        traces = [
            dict(
                type=style.scatter_type(len(x)),
                x=x,
                y=y,
                mode="markers",
                name=axis,
                marker={"size": 5, "color": "#1f77b4"},
                customdata=custom,
                text=text,
                hovertemplate=hover.replace("{unit}", unit),
                showlegend=False,
            )
        ]
        if throttled.any():
            traces.append(
                dict(
                    type=style.scatter_type(len(x)),
                    x=x[throttled],
                    y=y[throttled],
                    mode="markers",
                    name="throttled",
                    legendgroup="throttled",
                    showlegend=i == 0,
                    marker={"size": 10, "symbol": "x", "color": "#d62728"},
                    customdata=custom[throttled],
                    text=text[throttled],
                    hovertemplate=hover.replace("{unit}", unit),
                )
            )
        xaxis = {"title": {"text": "measured point (run order)"}}
        panels.append(style.Panel(traces, xaxis, {"title": {"text": axis}}))
    n_thr = int(throttled.sum())
    shown = f"newest {len(frame)} of {total} points" if total > len(frame) else f"{len(frame)} points"
    layout = {"title": {"text": f"{title} — {shown}, {n_thr} throttled"}, "height": 640}
    return style.compose(panels, 3, 1, layout, vspace=0.06, share_x=True)
