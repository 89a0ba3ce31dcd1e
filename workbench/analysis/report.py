"""One self-contained HTML page: the hypothesis verdicts and the key Plotly figures (speedup vs batch, model error).

Plotly is imported inside the functions (the profiler path never needs it). The plotly.js bundle is inlined once, in
the first figure; later figures reuse it. No image export, no browser, no network: the page opens offline.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.analysis.hypotheses import Hypothesis

VERDICT_COLORS = {"pass": "#dcfce7", "fail": "#fee2e2", "inconclusive": "#fef9c3"}
TIER_COLORS = {"datasheet": "#9ca3af", "calibrated": "#2563eb", "floor": "#dc2626"}
_CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #111827; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #e5e7eb; padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: #f3f4f6; }
td.num { text-align: right; white-space: nowrap; }
.muted { color: #6b7280; font-size: 12px; }
details summary { cursor: pointer; }
"""


def _num(x: Any, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    return f"{float(x):.4g}{unit}"


def verdict_table_html(results: pd.DataFrame) -> str:
    """The verdicts as an HTML table (evidence folded per row)."""
    head = ("id", "claim", "GPU", "source", "verdict", "value [low, high]", "threshold", "evidence", "where")
    rows = []
    for r in results.itertuples(index=False):
        unit = "%" if r.kind in ("model_error", "bandwidth") else ""
        value = _num(r.value, unit)
        if not (pd.isna(r.low) or pd.isna(r.high)) and r.low != r.high:
            value += f" [{_num(r.low, unit)}, {_num(r.high, unit)}]"
        cells = [
            f"<td><code>{html.escape(r.id)}</code></td>",
            f"<td>{html.escape(r.claim)}</td>",
            f"<td>{html.escape(r.gpu_key or '—')}</td>",
            f"<td>{html.escape(r.source)}</td>",
            f'<td style="background:{VERDICT_COLORS[r.verdict]}"><b>{r.verdict}</b></td>',
            f'<td class="num">{html.escape(value)}</td>',
            f"<td>{html.escape(r.threshold)}</td>",
            f"<td><details><summary>{html.escape(r.detail)}</summary>{html.escape(r.evidence)}</details></td>",
            f'<td class="muted">{html.escape(Path(r.file).name)}:{r.line}</td>',
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    header = "".join(f"<th>{h}</th>" for h in head)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def speedup_pairs(hypotheses: Iterable[Hypothesis]) -> list[tuple[str, str]]:
    """The distinct (a, b) pairs that speedup / monotonic / crossover hypotheses compare, in file order."""
    pairs: list[tuple[str, str]] = []
    for h in hypotheses:
        if h.kind in ("speedup", "monotonic", "crossover") and (h.a, h.b) not in pairs:
            pairs.append((h.a, h.b))
    return pairs


def speedup_figure(comparison: pd.DataFrame, a: str, b: str, gpu: str, mode: str = "cold"):
    """Speedup of a over b vs batch on one GPU, one colour per shape: measured solid with p10/p90 error bars,
    predicted dashed, bytes-only ideal dotted."""
    import plotly.graph_objects as go
    from plotly.colors import qualitative

    from workbench.analysis.speedup import pair_speedups

    df = comparison[(comparison["gpu_key"] == gpu) & (comparison["mode"] == mode)]
    table = pair_speedups(df, a, b)
    fig = go.Figure()
    for i, ((n, k), g) in enumerate(table.groupby(["N", "K"], sort=True)):
        g = g.sort_values("M")
        color = qualitative.Plotly[i % len(qualitative.Plotly)]
        shape = f"{n}×{k}"
        err = {"type": "data", "symmetric": False, "array": g["speedup_high"] - g["speedup_measured"],
               "arrayminus": g["speedup_measured"] - g["speedup_low"]}  # fmt: skip
        fig.add_trace(go.Scatter(x=g["M"], y=g["speedup_measured"], mode="lines+markers", name=f"{shape} measured",
                                 line={"color": color}, error_y=err, legendgroup=shape,
                                 customdata=g[["kernel", "baseline_kernel"]].to_numpy(),
                                 hovertemplate="M=%{x}: %{y:.3f}× (%{customdata[0]} vs %{customdata[1]})"))  # fmt: skip
        fig.add_trace(go.Scatter(x=g["M"], y=g["speedup_predicted"], mode="lines", name=f"{shape} predicted",
                                 line={"color": color, "dash": "dash"}, legendgroup=shape))  # fmt: skip
        fig.add_trace(go.Scatter(x=g["M"], y=g["speedup_ideal"], mode="lines", name=f"{shape} bytes-only",
                                 line={"color": color, "dash": "dot", "width": 1}, legendgroup=shape))  # fmt: skip
    fig.add_hline(y=1.0, line={"color": "#6b7280", "width": 1})
    fig.update_xaxes(type="log", title_text="batch M", tickvals=sorted(set(table["M"])) or None)
    fig.update_yaxes(type="log", title_text=f"speedup of {a} over {b} (×)")
    title = f"{gpu}: {a} over {b} ({mode})" + ("" if len(table) else " — no points measured for both")
    fig.update_layout(title=title, height=420, template="plotly_white", margin={"t": 50, "r": 20})
    return fig


def error_figure(comparison: pd.DataFrame, gpu: str):
    """Predicted / measured time ratio vs batch for each tier on one GPU (1 = exact; < 1 the model is optimistic)."""
    import plotly.graph_objects as go

    df = comparison[comparison["gpu_key"] == gpu]
    fig = go.Figure()
    for tier, color in TIER_COLORS.items():
        ratio = df[f"ratio_{tier}"]
        keep = ratio.notna()
        if not keep.any():
            continue
        d = df[keep]
        fig.add_trace(go.Scatter(x=d["M"], y=d[f"ratio_{tier}"], mode="markers", name=tier,
                                 marker={"color": color, "size": 6, "opacity": 0.7},
                                 customdata=d[["kernel", "N", "K"]].to_numpy(),
                                 hovertemplate="%{customdata[0]} %{customdata[1]}×%{customdata[2]} M=%{x}: "
                                               "%{y:.3f}<extra>" + tier + "</extra>"))  # fmt: skip
    fig.add_hline(y=1.0, line={"color": "#6b7280", "width": 1})
    fig.update_xaxes(type="log", title_text="batch M")
    fig.update_yaxes(type="log", title_text="predicted / measured time")
    fig.update_layout(title=f"{gpu}: model error per point and tier", height=420, template="plotly_white")
    return fig


def _error_table_html(comparison: pd.DataFrame) -> str:
    from workbench.analysis.compare import error_summary

    summary = error_summary(comparison)
    if summary.empty:
        return "<p>No measured points.</p>"
    head = "".join(f"<th>{h}</th>" for h in ("GPU", "tier", "n", "throttled excluded", "median |err|", "p90 |err|",
                                              "max |err|", "median signed"))  # fmt: skip
    body = "".join(
        f"<tr><td>{html.escape(str(r.gpu_key))}</td><td>{r.tier}</td><td class='num'>{r.n}</td>"
        f"<td class='num'>{r.n_throttled}</td><td class='num'>{_num(r.median_abs_error * 100, '%')}</td>"
        f"<td class='num'>{_num(r.p90_abs_error * 100, '%')}</td><td class='num'>{_num(r.max_abs_error * 100, '%')}"
        f"</td><td class='num'>{_num(r.median_error * 100, '%')}</td></tr>"
        for r in summary.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_report(
    results: pd.DataFrame, comparison: pd.DataFrame, hypotheses: Iterable[Hypothesis], files: Iterable[Path] = ()
) -> str:
    """The whole page as a string."""
    import plotly.io as pio

    hypotheses = list(hypotheses)
    gpus = sorted(set(comparison["gpu_key"].astype(str))) if len(comparison) else []
    figures = []
    for gpu in gpus:
        for a, b in speedup_pairs(hypotheses):
            figures.append(speedup_figure(comparison, a, b, gpu))
        figures.append(error_figure(comparison, gpu))
    parts = []
    for i, fig in enumerate(figures):
        parts.append(pio.to_html(fig, full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False}))
    counts = results["verdict"].value_counts()
    tally = " · ".join(f"{counts.get(v, 0)} {v}" for v in ("pass", "fail", "inconclusive"))
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    sources = ", ".join(html.escape(str(f)) for f in files) or "—"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Roofline workbench: hypotheses</title>
<style>{_CSS}</style></head><body>
<h1>Speedup hypotheses: verdicts</h1>
<p class="muted">Generated {stamp} · {len(comparison)} measured points · GPUs: {html.escape(", ".join(gpus) or "none")}
· hypotheses: {sources}</p>
<p><b>{tally}</b>. A measured verdict is inconclusive when its margin lies inside the p10/p90 noise, or data is
missing or throttled; predictions carry no noise. Speedups compare the fastest measured kernel of each scheme.</p>
{verdict_table_html(results)}
<h2>Model error (throttled points excluded)</h2>
{_error_table_html(comparison)}
<h2>Figures</h2>
{"".join(f'<div class="figure">{p}</div>' for p in parts) or "<p>No measured points to plot.</p>"}
</body></html>
"""


def write_report(
    path: str | Path,
    results: pd.DataFrame,
    comparison: pd.DataFrame,
    hypotheses: Iterable[Hypothesis],
    files: Iterable[Path] = (),
) -> Path:
    """Render and write the report atomically."""
    from models.errors import InputError
    from workbench.storage.store import atomic_write_bytes

    text = render_report(results, comparison, hypotheses, files)
    try:
        return atomic_write_bytes(path, text.encode("utf-8"))
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
