"""The MoE figure: per GPU a column of two panels, time vs batch (the touched experts on its right axis) over speedup
vs batch; predicted dashed with open markers, measured solid with filled markers, one colour per scheme.

Pure builder. Input (SI units): `rows` as workbench.analysis.moe_curves.curves gives them (gpu, scheme, kernel, tier,
source, batch, time_s, touched, speedup).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from workbench.interfaces.dashboard import style

TOUCHED_COLOR = "#555555"
TOUCHED_AXIS = "touched experts"
HSPACE = 0.12  # room for each column's right-hand axis


def _line(part: pd.DataFrame, y: str, scale: float, name: str, scheme: str, source: str, axes: tuple[str, str],
          show: bool, hover: str) -> dict[str, Any]:
    measured = source == "measured"
    color = style.scheme_color(scheme)
    return dict(type="scatter", x=part["batch"].to_numpy(), y=part[y].to_numpy(dtype=float) * scale,
                mode="lines+markers", name=name, legendgroup=scheme, showlegend=show, xaxis=axes[0], yaxis=axes[1],
                line={"color": color, "dash": "solid" if measured else "dash", "width": 2 if measured else 1.5},
                marker={"color": color if measured else "white", "size": 7, "symbol": "circle",
                        "line": {"color": color, "width": 1.5}},
                customdata=part[["touched"]].to_numpy(dtype=float),
                hovertemplate=f"<b>{name}</b><br>batch %{{x}}<br>{hover}<br>touched experts %{{customdata[0]:.1f}}"
                              "<extra></extra>")  # fmt: skip


def _touched(part: pd.DataFrame, source: str, axes: tuple[str, str], show: bool) -> dict[str, Any]:
    measured = source == "measured"
    name = "touched experts (measured draw)" if measured else "touched experts (expected)"
    return dict(type="scatter", x=part["batch"].to_numpy(), y=part["touched"].to_numpy(dtype=float),
                mode="markers" if measured else "lines", name=name, legendgroup="touched", legendrank=2000,
                showlegend=show, xaxis=axes[0], yaxis=axes[1],
                line={"color": TOUCHED_COLOR, "dash": "dot", "width": 1.5},
                marker={"color": TOUCHED_COLOR, "symbol": "x-thin", "size": 9, "line": {"color": TOUCHED_COLOR,
                                                                                          "width": 2}},
                hovertemplate=f"{name}<br>batch %{{x}}: %{{y:.1f}}<extra></extra>")  # fmt: skip


def _name(scheme: str, source: str, tier: str, kernel: str) -> str:
    if source == "measured":
        return f"{scheme} measured ({kernel})"
    return f"{scheme} predicted ({tier}{', ' + kernel if kernel else ''})"


def moe_figure(rows: pd.DataFrame, gpus: list[str], labels: dict[str, str], *, title: str):
    """Columns = `gpus` (in order); top: µs per call of the selected layer(s) and touched experts; bottom: speedup
    over bf16 of each source (predicted over predicted, measured over measured)."""
    if rows.empty or not gpus:
        return style.empty_figure("Nothing to draw for this selection.", title)
    n = len(gpus)
    hspace = style.fit_gap(HSPACE, n)  # every GPU selected: 13 columns of HSPACE would not fit
    width = (1.0 - hspace * (n - 1)) / n
    layout: dict[str, Any] = {"title": {"text": title}, "height": 720, "annotations": [],
                              "margin": {"l": 70, "r": 60, "t": 80, "b": 60},
                              "legend": {**style.BASE_LAYOUT["legend"], "x": 1.06}}  # fmt: skip
    traces: list[dict[str, Any]] = []
    shown: set[str] = set()
    for c, gpu in enumerate(gpus):
        t, s, k = c + 1, n + c + 1, 2 * n + c + 1  # axis numbers: time, speedup, touched (over the time panel)
        x0 = c * (width + hspace)
        dom = [round(x0, 9), round(min(1.0, x0 + width), 9)]
        ref = {i: ("", "") if i == 1 else (str(i), str(i)) for i in (t, s, k)}
        batch_axis = style.log2_batch_axis()
        layout[f"xaxis{ref[t][0]}"] = {**batch_axis, "domain": dom, "anchor": f"y{ref[t][1]}", "title": None}
        layout[f"xaxis{ref[s][0]}"] = {**batch_axis, "domain": dom, "anchor": f"y{ref[s][1]}",
                                       "matches": f"x{ref[t][0]}"}
        layout[f"yaxis{ref[t][1]}"] = {"type": "log", "title": {"text": "time per call (µs)" if c == 0 else ""},
                                       "domain": [0.47, 1.0], "anchor": f"x{ref[t][0]}"}
        layout[f"yaxis{ref[s][1]}"] = {"title": {"text": "speedup over bf16 (×)" if c == 0 else ""},
                                       "domain": [0.0, 0.38], "anchor": f"x{ref[s][0]}"}
        layout[f"yaxis{ref[k][1]}"] = {"title": {"text": TOUCHED_AXIS}, "overlaying": f"y{ref[t][1]}", "side": "right",
                                       "anchor": f"x{ref[t][0]}", "rangemode": "tozero", "showgrid": False,
                                       "type": "linear", "tickmode": "auto",  # not the template's ticks synced to y
                                       "tickfont": {"color": TOUCHED_COLOR}}
        mine = rows[rows["gpu"] == gpu]
        has_measured = bool((mine["source"] == "measured").any())
        note = "" if has_measured else " — predictions only (no MoE rows measured here)"
        layout["annotations"].append({"text": f"{labels.get(gpu, gpu)}{note}", "x": x0 + width / 2, "y": 1.0,
                                      "xref": "paper", "yref": "paper", "xanchor": "center", "yanchor": "bottom",
                                      "showarrow": False, "font": {"size": 14}})  # fmt: skip
        groups = sorted(mine.groupby(["scheme", "source", "tier", "kernel"], sort=False, observed=True),
                        key=lambda kv: (style.scheme_rank(str(kv[0][0])), kv[0][1] != "predicted"))
        for (scheme, source, tier, kernel), part in groups:
            part = part.sort_values("batch")
            name = _name(str(scheme), str(source), str(tier), str(kernel))
            show = name not in shown
            shown.add(name)
            traces.append(_line(part, "time_s", style.US, name, str(scheme), str(source), (f"x{ref[t][0]}",
                                f"y{ref[t][1]}"), show, "%{y:.4g} µs"))  # fmt: skip
            traces.append(_line(part, "speedup", 1.0, name, str(scheme), str(source), (f"x{ref[s][0]}",
                                f"y{ref[s][1]}"), False, "%{y:.2f}× over bf16"))  # fmt: skip
        for source in ("predicted", "measured"):
            part = mine[mine["source"] == source].drop_duplicates("batch").sort_values("batch")
            if len(part):
                name = f"touched {source}"
                traces.append(_touched(part, source, (f"x{ref[t][0]}", f"y{ref[k][1]}"), name not in shown))
                shown.add(name)
    return style.make_figure(traces, layout)
