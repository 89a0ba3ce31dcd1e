"""Figures of the chapter's closing lessons (issue 20): quantization error against bytes per weight, and the scheme
to run at each batch size. Pure builders of DataFrames, no Dash, no I/O.

Inputs (fractions and SI units):
- `error_vs_bytes(table)`: rows of `workbench.analysis.quant_error.explore` (label, format, granularity, size,
  symmetric, zero, bits_per_weight, weight_error_rel, output_error_rel). x = bits per weight (codes + scales + zero
  points), y = relative error (log), one colour per format (its scheme's colour), one marker per granularity, filled for
  symmetric and open for a zero point; the lower-left frontier is what accuracy each byte buys.
- `scheme_per_batch(tables)`: rows of `workbench.analysis.recommend.by_batch` for one or more shapes (N, K, M,
  best_measured, kernel, time_s, margin, tie, best_predicted). One row of the figure per shape: the measured winner per
  batch as a filled marker in its scheme's colour (a ring marks a margin inside the noise), the predicted winner as an
  open marker just below.
- `ladder(rows, rungs)`: measured points (kernel, M, time_measured_s) at one GPU, shape and mode, and the rungs of
  the W4A16 tricks ladder (models.ladder.RUNGS: index, kernels, trick, adds, m_from). Two panels, one bar per batch
  (M = 1, 4, 16): each rung's speedup over rung 0 (the chapter's kernel), and its time per call; a rung's time is the
  fastest of its kernels measured at that batch (`ladder_table`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from workbench.interfaces.dashboard import style

FORMAT_SCHEME = {"int4": "w4a16", "int8": "w8a16", "fp8": "fp8"}  # colour of each weight format
GRANULARITY_SYMBOLS = {"tensor": "square", "channel": "diamond", "group": "circle", "block": "triangle-up"}
ERROR_COLUMNS = {"output_error_rel": "relative error of y = x Wᵀ", "weight_error_rel": "relative error of W"}


def error_vs_bytes(table: pd.DataFrame, error: str = "output_error_rel", title: str = "") -> Any:
    """Error against bits per weight, one trace per (format, granularity, zero-point storage)."""
    if error not in ERROR_COLUMNS:
        raise ValueError(f"error must be one of {', '.join(ERROR_COLUMNS)}, got {error!r}")
    if table.empty:
        return style.empty_figure("no quantization choices to show", title)
    traces = []
    for (fmt, gran, zero), part in table.groupby(["format", "granularity", "zero"], sort=True):
        part = part.sort_values("bits_per_weight")
        sym = zero == "none"
        color = style.scheme_color(FORMAT_SCHEME.get(str(fmt), str(fmt)))
        symbol = GRANULARITY_SYMBOLS.get(str(gran), "circle") + ("" if sym else "-open")
        traces.append(dict(
            type="scatter", x=part["bits_per_weight"].to_numpy(dtype=float),
            y=part[error].to_numpy(dtype=float), mode="markers+lines" if gran == "group" else "markers",
            name=f"{fmt} {gran}{'' if sym else f' + {zero} zero'}", legendgroup=str(fmt),
            marker={"color": color, "symbol": symbol, "size": 10, "line": {"color": color, "width": 1.5}},
            line={"color": color, "width": 1, "dash": "solid" if sym else "dot" if zero == "fp16" else "dash"},
            text=part["label"].astype(str).to_numpy(),
            customdata=np.stack([part["weight_error_rel"].to_numpy(dtype=float) * 100,
                                 part["output_error_rel"].to_numpy(dtype=float) * 100], axis=1),
            hovertemplate="%{text}<br>%{x:.3f} bits/weight<br>W error %{customdata[0]:.3g}%"
                          "<br>y error %{customdata[1]:.3g}%<extra></extra>"))
    layout = {
        "title": {"text": title or "What accuracy each byte buys"},
        "xaxis": {"title": {"text": "stored bits per weight (codes + scales + zero points)"}},
        "yaxis": {"title": {"text": ERROR_COLUMNS[error]}, "type": "log"},
    }
    return style.make_figure(traces, layout)


def scheme_per_batch(tables: pd.DataFrame, title: str = "") -> Any:
    """The fastest scheme per batch and shape, measured (filled) and predicted (open)."""
    if tables.empty:
        return style.empty_figure("no measurements to recommend from", title)
    df = tables.copy()
    df["shape"] = df["N"].astype(int).astype(str) + "×" + df["K"].astype(int).astype(str)
    shapes = list(dict.fromkeys(df.sort_values(["N", "K"])["shape"]))
    row = {s: i for i, s in enumerate(shapes)}
    traces = []
    schemes = sorted(set(df["best_measured"]) | set(df["best_predicted"]) - {""}, key=style.scheme_rank)
    for scheme in schemes:
        color = style.scheme_color(scheme)
        meas = df[df["best_measured"] == scheme]
        if len(meas):
            tie = meas["tie"].to_numpy(dtype=bool)
            traces.append(dict(
                type="scatter", x=meas["M"].to_numpy(), y=meas["shape"].map(row).to_numpy(dtype=float),
                mode="markers", name=f"{scheme} (measured)", legendgroup=scheme,
                marker={"color": color, "size": 16, "symbol": "circle",
                        "line": {"color": np.where(tie, "#000000", color).tolist(), "width": np.where(tie, 3, 1)}},
                customdata=np.stack([meas["kernel"].astype(str).to_numpy(),
                                     (meas["time_s"].to_numpy(dtype=float) * style.US).round(2).astype(str),
                                     (meas["margin"].to_numpy(dtype=float) * 100).round(1).astype(str),
                                     np.where(tie, " (inside the noise)", "")], axis=1),
                text=meas["shape"].to_numpy(),
                hovertemplate=f"{scheme} at M=%{{x}} on %{{text}}<br>%{{customdata[0]}}: %{{customdata[1]}} µs"
                              "<br>margin %{customdata[2]}%%{customdata[3]}<extra>measured</extra>"))
        pred = df[df["best_predicted"] == scheme]
        if len(pred):
            traces.append(dict(
                type="scatter", x=pred["M"].to_numpy(), y=pred["shape"].map(row).to_numpy(dtype=float) - 0.3,
                mode="markers", name=f"{scheme} (predicted)", legendgroup=scheme,
                marker={"color": color, "size": 10, "symbol": "circle-open", "line": {"width": 2}},
                text=pred["shape"].to_numpy(),
                hovertemplate=f"{scheme} predicted fastest at M=%{{x}} on %{{text}}<extra>predicted</extra>"))
    layout = {
        "title": {"text": title or "Which scheme to run at each batch (filled: measured, open: predicted)"},
        "xaxis": style.log2_batch_axis(),
        "yaxis": {"title": {"text": "layer shape N×K"}, "tickvals": list(range(len(shapes))), "ticktext": shapes,
                  "range": [-0.7, len(shapes) - 0.4]},
        "height": 160 + 70 * len(shapes),
    }
    return style.make_figure(traces, layout)


LADDER_BATCHES = (1, 4, 16)
LADDER_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2")  # one per batch shown


def ladder_table(rows: pd.DataFrame, rungs: Sequence[Any], batches: Sequence[int] = LADDER_BATCHES) -> pd.DataFrame:
    """One row per (rung, batch) measured: rung, label, M, kernel (the rung's fastest), time_s, speedup over rung 0
    at the same batch (NaN where rung 0 was not measured). Rungs below their m_from are left out."""
    cols = ["rung", "label", "M", "kernel", "time_s", "speedup"]
    out = []
    for M in batches:
        at = rows[rows["M"] == M]
        base = np.nan
        for r in rungs:
            mine = at[at["kernel"].astype(str).isin(list(r.kernels))]
            if M < r.m_from or mine.empty:
                continue
            best = mine.loc[mine["time_measured_s"].astype(float).idxmin()]
            t = float(best["time_measured_s"])
            if r.index == 0:
                base = t
            out.append({"rung": r.index, "label": f"{r.index} {r.trick}", "M": M, "kernel": str(best["kernel"]),
                        "time_s": t, "speedup": base / t})
    return pd.DataFrame(out, columns=cols)


def ladder(rows: pd.DataFrame, rungs: Sequence[Any], batches: Sequence[int] = LADDER_BATCHES, title: str = "") -> Any:
    """The W4A16 production-tricks ladder at one shape: speedup over rung 0 (top) and time per call (bottom)."""
    table = ladder_table(rows, rungs, batches)
    if table.empty:
        return style.empty_figure("no kernel of the W4A16 ladder measured at this GPU, shape and mode "
                                  "(bench/anchors.py or workbench profile measures them)", title)
    labels = [f"{r.index} {r.trick}" for r in rungs]
    adds = {f"{r.index} {r.trick}": r.adds for r in rungs}
    speed, times = [], []
    for i, M in enumerate(batches):
        part = table[table["M"] == M]
        if part.empty:
            continue
        color = LADDER_COLORS[i % len(LADDER_COLORS)]
        custom = np.stack([part["kernel"].to_numpy(), (part["time_s"].to_numpy() * style.US).round(2).astype(str),
                           part["label"].map(adds).to_numpy()], axis=1)
        common = dict(type="bar", x=part["label"].to_numpy(), name=f"M = {M}", legendgroup=f"M{M}",
                      marker={"color": color}, customdata=custom)
        speed.append({**common, "y": part["speedup"].to_numpy(dtype=float),
                      "text": [f"{v:.2f}×" if np.isfinite(v) else "" for v in part["speedup"]],
                      "textposition": "outside",
                      "hovertemplate": f"M = {M}: %{{customdata[0]}}<br>%{{y:.2f}}× the chapter's kernel, "
                                       "%{customdata[1]} µs<br>adds: %{customdata[2]}<extra></extra>"})
        times.append({**common, "y": part["time_s"].to_numpy(dtype=float) * style.US, "showlegend": False,
                      "hovertemplate": f"M = {M}: %{{customdata[0]}}<br>%{{customdata[1]}} µs<extra></extra>"})
    xaxis = {"categoryorder": "array", "categoryarray": labels, "type": "category"}
    panels = [
        # log: each trick multiplies the speed, and rung 5 at M = 16 (~100×) would flatten the others on a linear axis
        style.Panel(speed, dict(xaxis), {"title": {"text": "speedup over rung 0 (×, log)"}, "type": "log"},
                    title="each trick's speedup over the chapter's kernel"),
        style.Panel(times, {**xaxis, "title": {"text": "rung (each adds one trick to the one before)"}},
                    {"title": {"text": style.TIME_AXIS}, "type": "log"}, title="time per call"),
    ]
    layout = {"title": {"text": title or "The W4A16 production-tricks ladder"}, "barmode": "group",
              "legend": {"title": {"text": "batch"}}}
    return style.compose(panels, 2, 1, layout, vspace=0.14)
