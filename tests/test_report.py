"""The self-contained HTML report: verdict table, figures, plotly.js inlined exactly once, nothing fetched."""

from __future__ import annotations

import pytest

from tests.compare_fixtures import GPU, calibration, frame, point
from workbench.analysis.compare import compare_points
from workbench.analysis.hypotheses import evaluate_all, parse_text

pytest.importorskip("plotly")

TEXT = """
[[hypothesis]]
id = "small"
claim = "W4A16 <b>fast</b> at batch 1"
kind = "speedup"
a = "w4a16"
b = "bf16"
batch = 1
op = ">="
value = 3

[[hypothesis]]
id = "cross"
kind = "crossover"
a = "w4a16"
b = "cublas_bf16"
op = "<="
value = 128
"""


def _inputs():
    rows = []
    for m, tb, tw in [(1, 13e-6, 4e-6), (32, 14e-6, 9e-6), (128, 20e-6, 25e-6)]:
        rows += [point("cublas_bf16", "bf16", m, tb, spread=0.01, role="peer"), point("w4a16_gemv", "w4a16", m, tw)]
    cmp = compare_points(frame(rows), calibrations={GPU: calibration()})
    hyps = parse_text(TEXT, "h.toml")
    return evaluate_all(hyps, cmp), cmp, hyps


def test_report_is_self_contained_with_one_plotly_bundle(tmp_path):
    from workbench.analysis.report import render_report, speedup_pairs, write_report

    results, cmp, hyps = _inputs()
    page = render_report(results, cmp, hyps, [tmp_path / "h.toml"])
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("window.PlotlyConfig") == 1  # the plotly.js bundle, inlined once
    assert page.count("Plotly.newPlot") == len(speedup_pairs(hyps)) + 1  # two speedup figures + model error
    assert 'src="http' not in page  # no script or image fetched from the network
    assert "W4A16 &lt;b&gt;fast&lt;/b&gt;" in page  # claims are escaped
    for verdict in results["verdict"]:
        assert f"<b>{verdict}</b>" in page
    out = write_report(tmp_path / "r.html", results, cmp, hyps)
    assert out.read_text(encoding="utf-8").count("window.PlotlyConfig") == 1


def test_report_without_data_still_renders():
    from workbench.analysis.report import render_report

    results, cmp, hyps = _inputs()
    empty = cmp.iloc[0:0]
    page = render_report(evaluate_all(hyps, empty), empty, hyps)
    assert "No measured points to plot." in page and "inconclusive" in page


def test_speedup_figure_traces():
    from workbench.analysis.report import speedup_figure

    _, cmp, _ = _inputs()
    fig = speedup_figure(cmp, "w4a16", "bf16", GPU)
    names = [t.name for t in fig.data]
    assert names == ["4096×4096 measured", "4096×4096 predicted", "4096×4096 bytes-only"]
    assert list(fig.data[0].y) == pytest.approx([13 / 4, 14 / 9, 20 / 25])
