"""The GPU comparison's "predicted vs public" view: the pure figure builder, the callback on a data dir with imported
public rows, and those rows kept out of the measured frames and the hypotheses."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dash")

from tests.dashboard_synthetic import synthetic_measurements, write_dataset  # noqa: E402
from tests.test_public_import import csv_rows, write_csv  # noqa: E402
from workbench.interfaces.dashboard import callbacks, fig_public, urlstate  # noqa: E402
from workbench.interfaces.dashboard.callbacks import AppState  # noqa: E402
from workbench.interfaces.dashboard.data import build_data  # noqa: E402
from workbench.interfaces.dashboard.queries import default_selection  # noqa: E402
from workbench.storage.public import import_file  # noqa: E402


def rows() -> pd.DataFrame:
    return pd.DataFrame({
        "scheme": ["bf16", "bf16", "w4a16", "fp8"],
        "kernel": ["cublas_bf16", "cublas_bf16", "trtllm_wo_int4", "fp8_scaled_mm_actq"],
        "M": [1, 16, 1, 8], "N": [4096] * 4, "K": [4096] * 4,
        "time_s": [20e-6, 25e-6, 10e-6, 40e-6],
        "predicted_s": [18e-6, 30e-6, 12e-6, np.nan],
        "source": ["a/b@1:x.parquet", "a/b@1:x.parquet", "<script>x</script>", "c"],
        "framework": ["vLLM", "SGLang", "TRT-LLM", "SGLang"], "framework_version": ["0.9", "0.5", "1.0.0", "0.5"],
        "timing": ["CUDA graph"] * 4,
    })  # fmt: skip


def test_public_panel_one_trace_per_kernel_marked_public_with_the_diagonal():
    panel = fig_public.public_panel(rows(), tier="kernel", title="A100")
    names = [t["name"] for t in panel.traces]
    assert names == ["cublas_bf16 (bf16) · public", "trtllm_wo_int4 (w4a16) · public",
                     "fp8_scaled_mm_actq (fp8) · public", "predicted = public"]
    bf16 = panel.traces[0]
    assert bf16["x"].tolist() == pytest.approx([20.0, 25.0]) and bf16["y"].tolist() == pytest.approx([18.0, 30.0])
    assert bf16["customdata"][:, 6].astype(float).tolist() == pytest.approx([0.9, 1.2])  # predicted / public
    assert "public timing, not measured here" in bf16["hovertemplate"] and "source" in bf16["hovertemplate"]
    assert panel.traces[1]["customdata"][0, 5] == "&lt;script&gt;x&lt;/script&gt;"  # imported text is escaped
    diagonal = panel.traces[-1]
    assert diagonal["x"] == diagonal["y"] and diagonal["x"][0] < 10.0 and diagonal["x"][1] > 40.0
    assert panel.xaxis["type"] == "log" and "public time" in panel.xaxis["title"]["text"]
    assert "kernel tier" in panel.yaxis["title"]["text"]


def test_median_error_ignores_rows_without_a_prediction():
    assert fig_public.median_error(rows()) == pytest.approx(0.2)  # |0.9-1|, |1.2-1|, |1.2-1| -> median 0.2
    assert np.isnan(fig_public.median_error(rows().iloc[3:]))


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_dataset(root, synthetic_measurements(gpus=("h200-sxm",), modes=("cold",)))
    import_file(write_csv(tmp_path_factory.mktemp("src") / "mine.csv", csv_rows()), root)
    return AppState(build_data(root))


def _controls(state, gpus, schemes=("bf16", "w4a16", "w8a8", "fp8")):
    d = default_selection(state.data)
    return (list(gpus), None, list(schemes), [], "best", d.shape, 1, 256, d.baseline, "datasheet", "cold")


def test_compare_public_draws_the_public_rows_of_the_selected_gpus(state):
    fig = callbacks.view_figure(state, "compare", _controls(state, ["h200-sxm", "l40s"]), [], "public")
    names = {t.name for t in fig.data}
    assert {"trtllm_wo_int4 (w4a16) · public", "fp8_block_actq (fp8) · public", "cublas_bf16 (bf16) · public"} <= names
    panels = [a.text for a in fig.layout.annotations]
    assert panels == [next(p for p in panels if p.startswith("NVIDIA L40S — 5 public rows"))]  # h200: none public
    assert "(datasheet)" in panels[0] and "Predicted vs public" in fig.layout.title.text
    public = state.data.public
    l40s = public[(public["gpu"] == "l40s") & (public["scheme"] == "w4a16")].iloc[0]
    trace = next(t for t in fig.data if t.name == "trtllm_wo_int4 (w4a16) · public")
    assert trace.y[0] == pytest.approx(l40s["time_datasheet_s"] * 1e6)  # predict_tiers' value for that row
    assert trace.x[0] == pytest.approx(2.0e-5 * 1e6)


def test_compare_public_without_selected_public_gpus_shows_every_gpu_that_has_some(state):
    fig = callbacks.view_figure(state, "compare", _controls(state, ["h200-sxm"]), [], "public")
    assert "every GPU that has some" in fig.layout.title.text
    assert len(fig.layout.annotations) == 2  # A100 and L40S panels


def test_compare_public_filters_schemes_and_says_when_nothing_is_left(state):
    fig = callbacks.view_figure(state, "compare", _controls(state, ["l40s"], ("w8a16",)), [], "public")
    assert len(fig.data) == 0 and "No public rows" in fig.layout.annotations[0].text


def test_public_rows_never_reach_measured_frames_or_hypotheses(state):
    data = state.data
    assert len(data.public) == 7 and set(data.public["origin"]) == {"public"}
    assert set(data.measurements["gpu_key"].astype(str)) == {"h200-sxm"}
    assert set(data.comparison["gpu_key"].astype(str)) == {"h200-sxm"}
    assert "origin" not in data.comparison.columns
    if not data.hypotheses.empty:
        assert set(data.hypotheses["gpu_key"].astype(str)) <= {"h200-sxm", ""}


def test_no_public_rows_a_message_not_an_error(tmp_path):
    write_dataset(tmp_path, synthetic_measurements(gpus=("h200-sxm",), modes=("cold",)))
    st = AppState(build_data(tmp_path))
    fig = callbacks.view_figure(st, "compare", _controls(st, ["h200-sxm"]), [], "public")
    assert "No public timings imported" in fig.layout.annotations[0].text


def test_url_keeps_the_public_comparison(state):
    assert urlstate.decode("?compare=public", state.data)["compare"] == "public"
