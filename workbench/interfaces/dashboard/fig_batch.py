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

from workbench.interfaces.dashboard import style


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


def _coinciding(curves: dict[str, pd.DataFrame], column: str) -> dict[str, str]:
    """scheme -> the earlier scheme whose curve it coincides with (within 0.5 % at every M), so a line hidden under
    another is named in the legend ("fp8 predicted = w8a8")."""
    out: dict[str, str] = {}
    seen: list[tuple[str, pd.Series]] = []
    for scheme, part in curves.items():
        series = part.set_index("M")[column].astype(float)
        for other, prev in seen:
            common = series.index.intersection(prev.index)
            if len(common) == len(series) and len(common) and np.allclose(series[common], prev[common], rtol=5e-3):
                out[scheme] = other
                break
        seen.append((scheme, series))
    return out


def _ordered(frame: pd.DataFrame, key: str) -> list[tuple[str, pd.DataFrame]]:
    groups = list(_sorted_groups(frame, key))
    return sorted(groups, key=lambda kv: (style.scheme_rank(str(kv[1]["scheme"].iloc[0])), kv[0]))


def _measured_groups(measured: pd.DataFrame, best: bool) -> tuple[list[tuple[str, pd.DataFrame]], dict[str, str]]:
    """(name, rows) per measured trace: per scheme (best kernel at each M) or per kernel; and each kernel's symbol."""
    if measured.empty:
        return [], {}
    if best:
        return _ordered(measured, "scheme"), {}
    return _ordered(measured, "kernel"), style.kernel_symbols(list(measured["kernel"].astype(str).unique()),
                                                              _scheme_of(measured))  # fmt: skip


def time_panel(
    predicted: pd.DataFrame,
    measured: pd.DataFrame,
    *,
    scale: float = style.US,
    unit: str = "µs per call",
    tier: str = "datasheet",
    title: str = "",
    showlegend: bool = True,
    best: bool = True,
) -> style.Panel:
    """Predicted time per scheme (dashed) and measured time (solid, p10–p90 band): the best kernel per scheme at
    each M, or every kernel with its own marker. Legend grouped by scheme."""
    short = unit.split(" ")[0]
    traces = []
    grouper = style.Grouper()
    curves = dict(_ordered(predicted, "scheme"))
    same = _coinciding(curves, "time_s")
    for scheme, part in curves.items():
        name = f"{scheme} predicted ({tier})" + (f" = {same[scheme]}" if scheme in same else "")
        traces.append(
            _line(
                part["M"],
                part["time_s"].to_numpy() * scale,
                name,
                scheme,
                showlegend,
                {"color": style.scheme_color(scheme), "dash": "dash", "width": 2},
                f"<b>{scheme}</b> predicted ({tier})<br>M=%{{x}} · %{{y:.4g}} {short}<extra></extra>",
                **{k: v for k, v in grouper(scheme).items() if k != "legendgroup"},
            )
        )
    groups, symbols = _measured_groups(measured, best)
    for name, part in groups:
        scheme = str(part["scheme"].iloc[0])
        color = style.scheme_color(scheme)
        x = part["M"].to_numpy()
        lo = part["p10_s"].to_numpy(dtype=float) * scale
        hi = part["p90_s"].to_numpy(dtype=float) * scale
        label = f"{scheme} measured (best kernel)" if best else name
        traces.append(
            dict(
                type="scatter",
                x=np.concatenate([x, x[::-1]]),
                y=np.concatenate([hi, lo[::-1]]),
                fill="toself",
                fillcolor=color,
                opacity=0.15,
                line={"width": 0},
                mode="lines",
                hoverinfo="skip",
                legendgroup=scheme,
                showlegend=False,
                name=f"{label} p10–p90",
            )
        )
        kernels = np.array(part["kernel"].astype("string").tolist(), dtype=str)
        traces.append(
            _line(
                x,
                part["time_s"].to_numpy(dtype=float) * scale,
                label,
                scheme,
                showlegend,
                {"color": color, "dash": "solid", "width": 2},
                f"<b>%{{text}}</b> ({scheme}) measured<br>M=%{{x}} · median %{{y:.4g}} {short}"
                f"<br>p10 %{{customdata[0]:.4g}} · p90 %{{customdata[1]:.4g}} {short}<extra></extra>",
                mode="lines+markers",
                marker={"symbol": symbols.get(name, "circle"), "size": 8},
                customdata=np.column_stack([lo, hi]),
                text=kernels,
                **{k: v for k, v in grouper(scheme).items() if k != "legendgroup"},
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
    best: bool = True,
) -> style.Panel:
    """Speedup over `baseline` per batch: predicted dashed, ideal bytes-only dotted (one legend entry for all),
    measured solid, crossovers ✕ labelled on the chart with the kernel (or scheme) they belong to."""
    traces = []
    grouper = style.Grouper()
    first_ideal = True
    for scheme, part in _ordered(predicted, "scheme"):
        color = style.scheme_color(scheme)
        traces.append(
            _line(
                part["M"],
                part["ideal"],
                "ideal, bytes only (dotted)",
                "ideal",
                showlegend and first_ideal,
                {"color": color, "dash": "dot", "width": 1.5},
                f"<b>{scheme}</b> ideal bytes-only<br>M=%{{x}} · %{{y:.3f}}×<extra></extra>",
            )
        )
        first_ideal = False
        traces.append(
            _line(
                part["M"],
                part["speedup"],
                f"{scheme} predicted ({tier})",
                scheme,
                showlegend,
                {"color": color, "dash": "dash", "width": 2},
                f"<b>{scheme}</b> predicted ({tier})<br>M=%{{x}} · %{{y:.3f}}×<extra></extra>",
                **{k: v for k, v in grouper(scheme).items() if k != "legendgroup"},
            )
        )
    groups, symbols = _measured_groups(measured, best)
    for name, part in groups:
        scheme = str(part["scheme"].iloc[0])
        kernels = np.array(part["kernel"].astype("string").tolist(), dtype=str)
        traces.append(
            _line(
                part["M"],
                part["speedup"],
                f"{scheme} measured (best kernel)" if best else name,
                scheme,
                showlegend,
                {"color": style.scheme_color(scheme), "dash": "solid", "width": 2},
                f"<b>%{{text}}</b> ({scheme}) measured<br>M=%{{x}} · %{{y:.3f}}×<extra></extra>",
                mode="lines+markers",
                marker={"symbol": symbols.get(name, "circle"), "size": 8},
                text=kernels,
                **{k: v for k, v in grouper(scheme).items() if k != "legendgroup"},
            )
        )
    labels: list[str] = []
    if not crossovers.empty:
        labels = (crossovers["label"].astype(str) + " (" + crossovers["kind"].astype(str) + ")").tolist()
        traces.append(
            dict(
                type="scatter",
                x=crossovers["M"].to_numpy(dtype=float),
                y=np.ones(len(crossovers)),
                mode="markers",
                name="crossover (first M with speedup ≤ 1)",
                legendgroup="crossover",
                showlegend=showlegend,
                marker={
                    "symbol": "x",
                    "size": 13,
                    "line": {"width": 1, "color": "#000"},
                    "color": [style.scheme_color(str(s)) for s in crossovers["scheme"]],
                },
                text=np.array(labels, dtype=str),
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
    notes = []
    if not crossovers.empty:  # each crossover labelled on the chart with its kernel, staggered so none overlap
        for i, (m, text) in enumerate(zip(crossovers["M"].to_numpy(dtype=float), labels, strict=True)):
            notes.append({"x": float(np.log10(m)), "y": 0.0, "text": text, "showarrow": True, "arrowhead": 0,
                          "ax": 0, "ay": (-1) ** i * (24 + 16 * (i // 2)), "font": {"size": 10},
                          "bgcolor": "rgba(255,255,255,0.85)"})  # fmt: skip
    yaxis = {"type": "log", "title": {"text": f"speedup over {baseline} (×)"}}
    return style.Panel(traces, style.log2_batch_axis(), yaxis, title, shapes=[one], annotations=notes)


def time_figure(
    predicted: pd.DataFrame,
    measured: pd.DataFrame,
    *,
    title: str,
    tier: str,
    per_token: bool = False,
    best: bool = True,
):
    """Time vs batch for one GPU and one shape (µs per call) or one model (ms per decode step)."""
    if predicted.empty and measured.empty:
        return style.empty_figure("Nothing to draw for this selection.", title)
    scale, unit = (style.MS, "ms per decode step") if per_token else (style.US, "µs per call")
    panel = time_panel(predicted, measured, scale=scale, unit=unit, tier=tier, best=best)
    return style.compose([panel], 1, 1, {"title": {"text": title}})


def speedup_figure(
    predicted: pd.DataFrame,
    measured: pd.DataFrame,
    crossovers: pd.DataFrame,
    *,
    baseline: str,
    tier: str,
    title: str,
    best: bool = True,
):
    """Speedup vs batch over the baseline, predicted and measured, ideal curve and crossovers."""
    if predicted.empty and measured.empty:
        return style.empty_figure("Nothing to draw for this selection.", title)
    panel = speedup_panel(predicted, measured, crossovers, baseline=baseline, tier=tier, best=best)
    return style.compose([panel], 1, 1, {"title": {"text": title}})


def facet_figure(panels: list[style.Panel], *, title: str, height: int = 520):
    """Side-by-side panels, one per GPU, on shared axes (only the first contributes legend entries)."""
    if not panels:
        return style.empty_figure("Select two or more GPUs to compare.", title)
    return style.compose(
        panels, 1, len(panels), {"title": {"text": title}, "height": height}, hspace=0.06, share_y=True
    )
