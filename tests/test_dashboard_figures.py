"""The dashboard's pure figure builders: DataFrames in, Plotly figures out (no app, no data directory)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("plotly")

from workbench.interfaces.dashboard import fig_batch, fig_breakdown, fig_diagnostics, fig_roofline, style  # noqa: E402


def _ceilings() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"unit": "bf16", "tier": "datasheet", "peak_flops": 989e12, "bandwidth": 4.8e12},
            {"unit": "bf16", "tier": "calibrated", "peak_flops": 650e12, "bandwidth": 4.45e12},
        ]
    )


def _measured() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "kernel": ["gemv_w4a16", "cublas_bf16"],
            "scheme": ["w4a16", "bf16"],
            "M": [1, 1],
            "N": [22016, 22016],
            "K": [4096, 4096],
            "intensity": [3.8, 1.0],
            "achieved_flops_per_s": [7.0e12, 3.9e12],
            "achieved_bytes_per_s": [1.8e12, 3.9e12],
            "time_measured_s": [25.7e-6, 46.3e-6],
            "time_p10_s": [25.0e-6, 46.0e-6],
            "time_p90_s": [26.0e-6, 47.0e-6],
            "time_datasheet_s": [9.9e-6, 37.6e-6],
            "ratio_datasheet": [0.385, 0.812],
            "bound_datasheet": ["memory", "memory"],
            "throttled": pd.array([False, pd.NA], dtype="boolean"),
        }
    )


def _predicted() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "scheme": ["w4a16", "bf16"],
            "M": [1, 1],
            "N": [22016, 22016],
            "K": [4096, 4096],
            "intensity": [3.85, 1.0],
            "bytes": [4.7e7, 1.8e8],
            "flops": [1.8e8, 1.8e8],
            "time_datasheet_s": [9.9e-6, 37.6e-6],
            "bound_datasheet": ["memory", "memory"],
        }
    )


def test_roofline_roofs_points_and_axes():
    fig = fig_roofline.roofline_figure(
        _ceilings(), _measured(), _predicted(), tier="datasheet", time_col="time_datasheet_s", title="t", best=False
    )
    roofs = [t for t in fig.data if "roof" in t.name]
    assert roofs and all(t.showlegend is False for t in roofs)  # roofs are labelled on the chart, not in the legend
    labels = [a.text for a in fig.layout.annotations]
    assert any("bf16 roof (datasheet)" in a and "ridge 206 FLOP/B" in a for a in labels)
    sheet = next(t for t in roofs if "datasheet" in t.name)
    lo, hi = fig_roofline.X_RANGE
    assert sheet.y[0] == pytest.approx(4.8e12 * lo * 1e-12)  # the memory diagonal, in TFLOP/s
    assert sheet.y[-1] == pytest.approx(989.0)  # the flat ceiling
    assert sheet.x[1] == pytest.approx(989e12 / 4.8e12)  # the ridge
    measured = [t for t in fig.data if "measured" in (t.hovertemplate or "") and t.type.startswith("scatter")]
    predicted = [t for t in fig.data if "predicted" in t.name]
    assert measured and all("open" not in str(t.marker.symbol) for t in measured)
    assert predicted and all(t.marker.symbol == "circle-open" for t in predicted)
    w4 = next(t for t in measured if t.name == "gemv_w4a16")
    assert w4.y[0] == pytest.approx(7.0)  # achieved FLOP/s shown in TFLOP/s
    assert w4.customdata[0][3] == pytest.approx(25.7)  # measured time in µs in the hover
    assert w4.customdata.dtype.kind == "f"  # numeric customdata (object arrays are slow to copy)
    assert "µs" in w4.hovertemplate and "GB/s" in w4.hovertemplate and "gemv_w4a16" in w4.text[0]
    assert w4.marker.color == style.scheme_color("w4a16") and w4.legendgroup == "w4a16"
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "FLOP/byte" in fig.layout.xaxis.title.text and "TFLOP/s" in fig.layout.yaxis.title.text


def test_coinciding_roofs_are_drawn_once_and_kernel_ceilings_dashed():
    roofs = pd.DataFrame(
        [
            {"unit": "fp16", "tier": "calibrated", "peak_flops": 650e12, "bandwidth": 4.45e12},
            {"unit": "bf16", "tier": "calibrated", "peak_flops": 650e12, "bandwidth": 4.45e12},
            {"unit": "wg_bf16", "tier": "kernel", "peak_flops": 500e12, "bandwidth": 4.0e12},
        ]
    )
    traces, notes = fig_roofline.ceiling_traces(roofs)
    assert [t["name"] for t in traces] == ["fp16/bf16 roof (calibrated)", "wg_bf16 ceiling"]
    assert traces[0]["line"]["dash"] == "solid" and traces[1]["line"]["dash"] == "dash"
    assert len(notes) == 2 and "ridge" in notes[1]["text"]


def test_kernels_of_one_scheme_get_distinct_markers_and_best_mode_one_trace_per_scheme():
    measured = pd.concat([_measured(), _measured().assign(kernel=["wg_w4a16", "gemv_bf16"])], ignore_index=True)
    every = fig_roofline.measured_traces(measured, "datasheet", "time_datasheet_s", best=False)
    symbols = {t["name"]: t["marker"]["symbol"] for t in every}
    assert symbols["gemv_w4a16"] != symbols["wg_w4a16"] and symbols["cublas_bf16"] != symbols["gemv_bf16"]
    best = fig_roofline.measured_traces(measured, "datasheet", "time_datasheet_s", best=True)
    assert [t["legendgroup"] for t in best] == ["bf16", "w4a16"]  # scheme order
    assert [t["name"] for t in best] == ["bf16 measured (best kernel)", "w4a16 measured (best kernel)"]


def test_roofline_predicted_point_is_flops_over_time():
    pred = _predicted()
    traces = fig_roofline.predicted_traces(pred, "datasheet", "time_datasheet_s")
    bf16 = next(t for t in traces if t["legendgroup"] == "bf16")
    assert bf16["y"][0] == pytest.approx(1.8e8 / 37.6e-6 * 1e-12)


def test_time_figure_lines_band_and_units():
    predicted = pd.DataFrame({"scheme": ["bf16", "bf16"], "M": [1, 2], "time_s": [40e-6, 41e-6]})
    measured = pd.DataFrame(
        {
            "kernel": ["k", "k"],
            "scheme": ["bf16", "bf16"],
            "M": [2, 1],
            "time_s": [48e-6, 46e-6],
            "p10_s": [47e-6, 45e-6],
            "p90_s": [49e-6, 47e-6],
        }
    )
    fig = fig_batch.time_figure(predicted, measured, title="t", tier="datasheet", best=False)
    pred = next(t for t in fig.data if "predicted" in t.name)
    assert pred.line.dash == "dash" and pred.legendgroup == "bf16"
    meas = next(t for t in fig.data if t.name == "k")
    assert meas.line.dash == "solid" and meas.legendgroup == "bf16"
    assert list(meas.x) == [1, 2] and list(meas.y) == pytest.approx([46.0, 48.0])  # sorted by M, in µs
    band = next(t for t in fig.data if t.fill == "toself")
    assert list(band.y) == pytest.approx([47.0, 49.0, 47.0, 45.0])  # p90 forward, p10 back
    assert "µs" in fig.layout.yaxis.title.text and "batch" in fig.layout.xaxis.title.text


def test_speedup_figure_ideal_and_crossover():
    predicted = pd.DataFrame(
        {"scheme": ["w4a16"] * 3, "M": [1, 64, 128], "speedup": [3.8, 1.5, 0.9], "ideal": [3.85, 3.7, 3.5]}
    )
    measured = pd.DataFrame({"kernel": ["w4"] * 2, "scheme": ["w4a16"] * 2, "M": [1, 32], "speedup": [1.8, 0.95]})
    cross = pd.DataFrame(
        {"label": ["w4", "w4a16"], "scheme": ["w4a16", "w4a16"], "M": [32, 128], "kind": ["measured", "predicted"]}
    )
    fig = fig_batch.speedup_figure(predicted, measured, cross, baseline="cublas_bf16", tier="datasheet", title="t")
    ideal = next(t for t in fig.data if "ideal" in t.name)
    assert ideal.line.dash == "dot" and ideal.y[0] == pytest.approx(3.85)
    marks = next(t for t in fig.data if t.name.startswith("crossover"))
    assert list(marks.x) == [32, 128] and list(marks.y) == [1.0, 1.0]
    assert fig.layout.shapes and fig.layout.shapes[0].y0 == 1.0  # the y = 1 line
    assert "cublas_bf16" in fig.layout.yaxis.title.text


def test_error_heatmap_log_scale_and_labels():
    frame = pd.DataFrame({"label": ["a (bf16)", "a (bf16)", "b (w4a16)"], "M": [1, 2, 1], "ratio": [0.5, 2.0, 1.0]})
    fig = fig_diagnostics.error_heatmap(frame, tier="datasheet", title="t")
    heat = fig.data[0]
    z = np.array(heat.z, dtype=float)
    row = list(heat.y).index("a (bf16)")
    assert z[row].tolist() == pytest.approx([-1.0, 1.0])  # log2 of predicted/measured
    assert heat.zmid == 0
    assert "0.50×" in np.array(heat.text).ravel().tolist()


def test_error_heatmap_empty_says_so():
    fig = fig_diagnostics.error_heatmap(pd.DataFrame({"label": [], "M": [], "ratio": []}), tier="floor", title="t")
    assert not fig.data and "floor" in fig.layout.annotations[0].text


def test_clocks_figure_marks_throttled_points():
    n = 5
    frame = pd.DataFrame(
        {
            "timestamp": [f"2026-01-01T00:00:0{i}" for i in range(n)],
            "kernel": ["k"] * n,
            "gpu_key": ["h200-sxm"] * n,
            "M": [1, 2, 4, 8, 16],
            "N": [4096] * n,
            "K": [4096] * n,
            "clock_reasons": ["", "", "sw_power_cap", "", ""],
            "sm_clock_min_hz": [1.98e9] * n,
            "sm_clock_median_hz": [1.98e9, 1.98e9, 1.70e9, 1.98e9, 1.98e9],
            "mem_clock_median_hz": [3.2e9] * n,
            "power_median_w": [500.0] * n,
            "temperature_max_c": [50.0] * n,
            "throttled": pd.array([False, False, True, False, pd.NA], dtype="boolean"),
        }
    )
    fig = fig_diagnostics.clocks_figure(frame, title="t")
    sm = fig.data[0]
    assert sm.y[0] == pytest.approx(1980.0)  # MHz
    throttled = [t for t in fig.data if t.name == "throttled"]
    assert len(throttled) == 3 and all(list(t.x) == [2] for t in throttled)
    assert "1 throttled" in fig.layout.title.text
    titles = [fig.layout[f"yaxis{i if i > 1 else ''}"].title.text for i in (1, 2, 3)]
    assert titles == ["SM clock (MHz)", "memory clock (MHz)", "power (W)"]


def test_rollup_figure_two_panels():
    frame = pd.DataFrame(
        {
            "label": ["bf16"] * 2,
            "scheme": ["bf16"] * 2,
            "source": ["predicted"] * 2,
            "M": [1, 2],
            "time_per_token_s": [4e-3, 4.1e-3],
            "tokens_per_s": [250.0, 487.8],
        }
    )
    fig = fig_breakdown.rollup_figure(frame, title="t")
    assert len(fig.data) == 2
    assert "measured = fastest kernel per layer" in fig.layout.title.text
    assert fig.data[0].y[0] == pytest.approx(4.0)  # ms
    assert fig.data[1].y[1] == pytest.approx(487.8)
    assert "ms" in fig.layout.yaxis.title.text and "tokens/s" in fig.layout.yaxis2.title.text


def test_facet_figure_one_panel_per_gpu():
    predicted = pd.DataFrame({"scheme": ["bf16"], "M": [1], "time_s": [40e-6]})
    empty = pd.DataFrame(columns=["kernel", "scheme", "M", "time_s", "p10_s", "p90_s"])
    panels = [fig_batch.time_panel(predicted, empty, title=name, showlegend=name == "A") for name in ("A", "B", "C")]
    fig = fig_batch.facet_figure(panels, title="t")
    assert fig.data[2].xaxis == "x3" and fig.data[2].yaxis == "y3"
    assert fig.layout.xaxis.domain[1] < fig.layout.xaxis2.domain[0]  # side by side
    assert [a.text for a in fig.layout.annotations] == ["A", "B", "C"]
    assert sum(bool(t.showlegend) for t in fig.data) == 1  # one legend entry for the shared series
    assert fig.layout.xaxis3.type == "log"


def test_empty_figure_message():
    fig = style.empty_figure("nothing here", "title")
    assert fig.layout.annotations[0].text == "nothing here"


def test_coinciding_predicted_curves_are_named():
    predicted = pd.DataFrame({"scheme": ["w8a8", "w8a8", "fp8", "fp8"], "M": [1, 2, 1, 2],
                              "time_s": [20e-6, 21e-6, 20e-6, 21e-6]})  # fmt: skip
    empty = pd.DataFrame(columns=["kernel", "scheme", "M", "time_s", "p10_s", "p90_s"])
    fig = fig_batch.time_figure(predicted, empty, title="t", tier="floor")
    names = {t.legendgroup: t.name for t in fig.data}
    assert names["fp8"] == "fp8 predicted (floor) = w8a8" and names["w8a8"] == "w8a8 predicted (floor)"


def test_rollup_per_layer_panel():
    frame = pd.DataFrame({"label": ["bf16"], "scheme": ["bf16"], "source": ["predicted"], "M": [1],
                          "time_per_token_s": [4e-3], "tokens_per_s": [250.0]})  # fmt: skip
    layers = pd.DataFrame({"scheme": ["bf16"] * 4, "source": ["predicted", "predicted", "measured", "measured"],
                           "layer": ["qkv", "o", "qkv", "o"], "time_s": [1e-3, 0.5e-3, 1.2e-3, 0.6e-3]})  # fmt: skip
    fig = fig_breakdown.rollup_figure(frame, title="t", layers=layers, batch=4)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [b.name for b in bars] == ["qkv", "o"] and list(bars[0].x) == pytest.approx([1.0, 1.2])
    assert set(bars[0].y) == {"bf16 predicted", "bf16 measured"} and fig.layout.barmode == "stack"


def test_attribution_bars_stack_with_a_distinct_negative_remainder():
    frame = pd.DataFrame({"label": ["w4a16 (best kernel)"] * 2, "kernel": ["gemv_w4a16"] * 2, "M": [1, 2],
                          "attr_fixed_s": [2e-6, 2e-6], "attr_memory_s": [10e-6, 10e-6], "attr_alu_s": [1e-6, 2e-6],
                          "attr_tensor_s": [0.0, 0.1e-6], "attr_fixup_s": [0.0, 0.0],
                          "attr_remainder_s": [3e-6, -1e-6]})  # fmt: skip
    fig = fig_breakdown.attribution_figure(frame, title="t")
    assert fig.layout.barmode == "relative" and len(fig.data) == 6
    rem = next(t for t in fig.data if "remainder" in t.name)
    assert list(rem.y) == pytest.approx([3.0, -1.0]) and rem.marker.pattern.shape == "/"
    assert all(t.marker.pattern.shape == "" for t in fig.data if t is not rem)


def test_error_heatmap_ticks_span_the_range_and_small_errors_show():
    frame = pd.DataFrame({"label": ["a", "a", "b"], "M": [1, 2, 1], "ratio": [0.7, 152.0, 1.0]})
    fig = fig_diagnostics.error_heatmap(frame, tier="floor", title="t")
    heat = fig.data[0]
    ticks = list(heat.colorbar.ticktext)
    assert ticks[-1].startswith("≥") or "128" in ticks[-1] or "152" in ticks[-1]
    z07 = float(np.log2(0.7))
    assert abs(z07) / max(abs(heat.zmin), abs(heat.zmax)) >= 0.15  # 0.7× is visibly coloured, not neutral


def test_clocks_figure_keeps_the_newest_points_and_says_so():
    n = fig_diagnostics.CLOCK_POINTS + 10
    frame = pd.DataFrame({
        "timestamp": [f"2026-12-02T10:{i // 60:02d}:{i % 60:02d}Z" for i in range(n)], "M": 1, "N": 1, "K": 1,
        "sm_clock_min_hz": 1.9e9, "sm_clock_median_hz": 1.98e9, "mem_clock_median_hz": 3.2e9, "power_median_w": 400.0,
        "temperature_max_c": 50.0, "clock_reasons": "", "throttled": False, "kernel": "k", "gpu_key": "g",
    })  # fmt: skip
    fig = fig_diagnostics.clocks_figure(frame, title="t")
    assert len(fig.data[0].x) == fig_diagnostics.CLOCK_POINTS
    assert f"newest {fig_diagnostics.CLOCK_POINTS} of {n} points" in fig.layout.title.text
