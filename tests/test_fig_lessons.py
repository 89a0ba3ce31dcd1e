"""The lessons figures (workbench.interfaces.dashboard.fig_lessons) as pure functions of the explorer's and
recommend's frames."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workbench.interfaces.dashboard import fig_lessons, style

DATA = Path(__file__).resolve().parents[1] / "data"


def test_error_vs_bytes_one_trace_per_format_granularity_and_zero():
    from workbench.analysis import quant_error as qe

    table = qe.explore(qe.make_weights("outliers", 64, 512, seed=0), qe.default_choices(("int4", "fp8"), (64, 128)))
    fig = fig_lessons.error_vs_bytes(table)
    names = [t.name for t in fig.data]
    assert len(names) == len(set(names)) == 4 * 3 + 4  # int4: 4 granularities x (sym, int4 zero, fp16 zero); fp8
    assert fig.layout.yaxis.type == "log"
    points = sum(len(t.x) for t in fig.data)
    assert points == len(table)
    g = next(t for t in fig.data if t.name == "int4 group")
    np.testing.assert_allclose(g.x, [4.125, 4.25])  # sorted by bits: G = 128 then G = 64
    assert g.marker.color == style.scheme_color("w4a16") and g.marker.symbol == "circle"
    assert next(t for t in fig.data if t.name == "int4 channel + fp16 zero").marker.symbol == "diamond-open"
    w = fig_lessons.error_vs_bytes(table, "weight_error_rel")
    assert w.layout.yaxis.title.text == "relative error of W"
    with pytest.raises(ValueError):
        fig_lessons.error_vs_bytes(table, "bytes")
    assert fig_lessons.error_vs_bytes(table.iloc[0:0]).layout.annotations  # the empty figure says why


def test_scheme_per_batch_on_the_shipped_data():
    from workbench.analysis import recommend as rec
    from workbench.interfaces.cli_compare import load_comparison

    comparison, _ = load_comparison(DATA)
    if comparison.empty:
        pytest.skip("no shipped measurements")
    tables = pd.concat([rec.by_batch(comparison, "h200-sxm", N, K) for N, K in ((22016, 4096), (4096, 4096))])
    fig = fig_lessons.scheme_per_batch(tables)
    measured = [t for t in fig.data if t.name.endswith("(measured)")]
    predicted = [t for t in fig.data if t.name.endswith("(predicted)")]
    assert sum(len(t.x) for t in measured) == sum(len(t.x) for t in predicted) == len(tables) == 18
    assert list(fig.layout.yaxis.ticktext) == ["4096×4096", "22016×4096"]
    w4 = next(t for t in measured if t.name == "w4a16 (measured)")
    assert w4.marker.color == style.scheme_color("w4a16") and 1 in list(w4.x)
    assert all(y == int(y) for t in measured for y in t.y) and all(y % 1 for t in predicted for y in t.y)


def test_scheme_per_batch_marks_ties_and_handles_empty():
    rows = pd.DataFrame(dict(N=[128, 128], K=[128, 128], M=[1, 8], best_measured=["a", "b"], kernel=["ka", "kb"],
                             time_s=[1e-5, 2e-5], margin=[0.5, 0.01], tie=[False, True], best_predicted=["a", "a"]))
    fig = fig_lessons.scheme_per_batch(rows)
    b = next(t for t in fig.data if t.name == "b (measured)")
    assert list(b.marker.line.width) == [3]
    assert fig_lessons.scheme_per_batch(rows.iloc[0:0]).layout.annotations
