"""Predicted vs public: imported public timings (workbench import; not measured by this workbench) against the
model's prediction for the same (gpu, scheme, M, N, K), one panel per GPU.

Pure builder. Input (SI units): `rows` with scheme, kernel, M, N, K, time_s (the public time), predicted_s (the drawn
tier's prediction), source, framework, framework_version, timing. One marker trace per (scheme, kernel), coloured by
scheme; the diagonal is where prediction = public time.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from workbench.interfaces.dashboard import style

PUBLIC_TAG = "public"  # every trace of public rows says so in its legend name and hover
HOVER_COLUMNS = ("M", "N", "K", "who", "timing", "source", "ratio")


def median_error(rows: pd.DataFrame) -> float:
    """Median |predicted / public − 1| over the rows that have a prediction (NaN when none)."""
    ratio = rows["predicted_s"].to_numpy(dtype=float) / rows["time_s"].to_numpy(dtype=float)
    ratio = ratio[np.isfinite(ratio)]
    return float(np.median(np.abs(ratio - 1.0))) if ratio.size else float("nan")


def _text(series: pd.Series) -> np.ndarray:
    return np.array([html.escape(str(v)) for v in series.astype("string").fillna("")], dtype=object)


def public_panel(rows: pd.DataFrame, *, tier: str, title: str = "", showlegend: bool = True) -> style.Panel:
    """Markers at (public time, predicted time) per (scheme, kernel), with the y = x diagonal."""
    traces = []
    ordered = sorted(rows.groupby(["scheme", "kernel"], observed=True, sort=False).groups,
                     key=lambda sk: (style.scheme_rank(str(sk[0])), str(sk[1])))  # fmt: skip
    scheme_of = {str(k): str(s) for s, k in ordered}
    symbols = style.kernel_symbols(list(scheme_of), scheme_of)
    for scheme, kernel in ordered:
        part = rows[(rows["scheme"] == scheme) & (rows["kernel"] == kernel)]
        who = (part["framework"].astype("string").fillna("") + " " + part["framework_version"].astype("string")
               .fillna("")).str.strip()  # fmt: skip
        ratio = part["predicted_s"].to_numpy(dtype=float) / part["time_s"].to_numpy(dtype=float)
        custom = np.column_stack([part["M"].to_numpy(), part["N"].to_numpy(), part["K"].to_numpy(), _text(who),
                                  _text(part["timing"]), _text(part["source"]), ratio])  # fmt: skip
        traces.append(dict(
            type=style.scatter_type(len(part)),
            x=part["time_s"].to_numpy(dtype=float) * style.US,
            y=part["predicted_s"].to_numpy(dtype=float) * style.US,
            mode="markers",
            name=f"{kernel} ({scheme}) · {PUBLIC_TAG}",
            legendgroup=str(scheme),
            showlegend=showlegend,
            marker={"color": style.scheme_color(str(scheme)), "symbol": symbols.get(str(kernel), "circle"),
                    "size": 7, "opacity": 0.75, "line": {"width": 0}},
            customdata=custom,
            hovertemplate=(
                f"<b>{html.escape(str(kernel))}</b> ({scheme}) · {PUBLIC_TAG} timing, not measured here"
                "<br>M=%{customdata[0]} · N×K=%{customdata[1]}×%{customdata[2]}"
                f"<br>public %{{x:.4g}} µs · predicted ({tier}) %{{y:.4g}} µs · ratio %{{customdata[6]:.2f}}"
                "<br>%{customdata[3]} · %{customdata[4]}<br>source: %{customdata[5]}<extra></extra>"
            ),
        ))  # fmt: skip
    both = np.concatenate([rows["time_s"].to_numpy(dtype=float), rows["predicted_s"].to_numpy(dtype=float)])
    both = both[np.isfinite(both) & (both > 0)] * style.US
    if both.size:
        lo, hi = float(both.min()) / 1.2, float(both.max()) * 1.2
        traces.append(dict(type="scatter", x=[lo, hi], y=[lo, hi], mode="lines", name="predicted = public",
                           legendgroup="diagonal", legendrank=2000, showlegend=showlegend, hoverinfo="skip",
                           line={"color": "#444444", "dash": "dash", "width": 1}))  # fmt: skip
    xaxis = {"type": "log", "title": {"text": f"{PUBLIC_TAG} time (µs per call)"}}
    yaxis = {"type": "log", "title": {"text": f"predicted, {tier} tier (µs per call)"}}
    return style.Panel(traces, xaxis, yaxis, title)
