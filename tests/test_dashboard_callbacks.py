"""Dashboard callbacks as plain functions over a synthetic measured-shaped dataset in a temp dir."""

from __future__ import annotations

import base64
import dataclasses
import io

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dash")

from tests.dashboard_synthetic import synthetic_measurements, write_dataset  # noqa: E402
from workbench.interfaces.dashboard import callbacks, table  # noqa: E402
from workbench.interfaces.dashboard.callbacks import AppState  # noqa: E402
from workbench.interfaces.dashboard.data import build_data  # noqa: E402
from workbench.interfaces.dashboard.queries import default_selection  # noqa: E402


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_dataset(root, synthetic_measurements(gpus=("h200-sxm",), modes=("cold",)))
    return AppState(build_data(root))


def _controls(state, **over):
    d = default_selection(state.data)
    values = {
        "gpus": list(d.gpus), "primary": None, "schemes": list(d.schemes), "kernels": [], "kernel_view": "all",
        "shape": d.shape, "m_lo": 1, "m_hi": 256, "baseline": d.baseline, "tier": d.tier, "mode": d.mode,
    }  # fmt: skip
    values.update(over)
    return tuple(values.values())


def _upload_contents(raw: bytes) -> str:
    return "data:application/octet-stream;base64," + base64.b64encode(raw).decode()


def test_defaults_start_on_the_measured_gpu_with_a_second_to_compare(state):
    d = default_selection(state.data)
    assert d.gpus[0] == "h200-sxm" and len(d.gpus) == 2
    assert d.shape == "22016x4096" and d.baseline == "cublas_bf16"


@pytest.mark.parametrize("view", ["roofline", "time", "speedup", "error", "clocks", "compare", "rollup"])
def test_every_view_draws_for_the_defaults(state, view):
    fig = callbacks.view_figure(state, view, _controls(state), [])
    assert len(fig.data) > 0
    assert "H200" in fig.layout.title.text or view == "compare"


def test_attribution_draws_the_kernel_tier_terms_of_the_shipped_data(state):
    fig = callbacks.view_figure(state, "attribution", _controls(state), [])
    names = " ".join(str(t.name) for t in fig.data)
    for term in ("memory", "remainder"):
        assert term in names, names


def test_selection_changes_the_figure(state):
    bf16 = callbacks.view_figure(state, "time", _controls(state, schemes=["bf16"]), [])
    both = callbacks.view_figure(state, "time", _controls(state, schemes=["bf16", "w4a16"]), [])
    names = {t.name for t in both.data} - {t.name for t in bf16.data}
    assert "gemv_w4a16" in names
    groups = {t.legendgroup for t in both.data} - {t.legendgroup for t in bf16.data}
    assert groups == {"w4a16"}
    assert all("w4a16" not in (t.name or "") + (t.legendgroup or "") for t in bf16.data)


def test_batch_range_limits_points(state):
    fig = callbacks.view_figure(state, "time", _controls(state, m_lo=4, m_hi=16), [])
    measured = [t for t in fig.data if (t.mode or "") == "lines+markers"]
    assert measured and all(set(t.x) <= {4, 8, 16} for t in measured)


@pytest.mark.parametrize("over", [{}, {"shape": "model:llama-2-7b", "mode": "hot"}, {"kernels": ["gemv_bf16"]},
                                  {"gpus": ["h200-sxm", "h100-sxm"], "m_lo": 4, "m_hi": 64, "schemes": ["w4a16"]}])
def test_indexed_selections_are_the_full_scans(state, over):
    """A selection read through a row index (data.row_index), and the best kernels read from Frames.best, are the rows
    a test of every row gives (views.measured_rows against shown_measured over the whole frame)."""
    from workbench.interfaces.dashboard import queries, views

    data, frames = state.data, state.frames([])
    sel = state.selection(*_controls(state, **over))
    for name in ("latest", "comparison", "measurements"):
        frame = getattr(frames, name)
        scanned = queries.select_measured(frame, data, sel, sel.gpus)
        pd.testing.assert_frame_equal(queries.select_measured(frame, data, sel, sel.gpus, frames.rows(name)), scanned)
    for best in (True, False):
        pick = dataclasses.replace(sel, best=best)
        scanned = views.shown_measured(queries.select_measured(frames.latest, data, pick, (pick.primary,)), pick)
        shown = views.measured_rows(data, frames, pick, pick.primary)
        pd.testing.assert_frame_equal(shown.reset_index(drop=True), scanned.reset_index(drop=True))
    full = data.predictions  # select_predicted reads its index (DashboardData.prediction_rows): against a full scan
    mask = (np.array(full["gpu_key"] == sel.primary, dtype=bool)
            & np.array(full["scheme"].isin(sel.schemes), dtype=bool) & full["M"].between(sel.m_lo, sel.m_hi).to_numpy()
            & np.isin(full["N"].to_numpy() * (1 << 31) + full["K"].to_numpy(),
                      [n * (1 << 31) + k for n, k in queries.shape_pairs(data, sel)]))  # fmt: skip
    pd.testing.assert_frame_equal(queries.select_predicted(data, sel, sel.primary), full[mask])


def test_gpu_without_measurements_shows_predictions_and_says_so(state):
    controls = _controls(state, gpus=["a100-sxm-80gb"])
    fig = callbacks.view_figure(state, "time", controls, [])
    assert fig.data and all("predicted" in t.name for t in fig.data)
    lines = [div.children for div in callbacks.status(state, controls, [])]
    assert any("No measurements" in line and "predictions only" in line for line in lines)
    records, columns, note = callbacks.grid_rows(state, controls, [])
    assert records and "predicted points" in note
    assert {c["field"] for c in columns} >= {"t_sheet_us", "traffic_mb"}


def test_speedup_marks_measured_and_predicted_crossovers(state):
    fig = callbacks.view_figure(state, "speedup", _controls(state, schemes=["bf16", "w4a16"]), [])
    marks = next(t for t in fig.data if t.name.startswith("crossover"))
    kinds = {label.rsplit("(", 1)[1].rstrip(")") for label in marks.text}
    assert kinds == {"measured", "predicted"}
    measured_labels = {label.rsplit(" (", 1)[0] for label in marks.text if label.endswith("(measured)")}
    assert measured_labels <= {"gemv_w4a16", "gemv_bf16"} and measured_labels  # the crossover names its kernel
    assert any("ideal" in t.name for t in fig.data)


def test_model_selection_rolls_up(state):
    fig = callbacks.view_figure(state, "time", _controls(state, shape="model:llama-2-7b"), [])
    assert "model llama-2-7b" in fig.layout.title.text and "ms" in fig.layout.yaxis.title.text
    roll = callbacks.view_figure(state, "rollup", _controls(state), [])
    assert "llama-2-7b" in roll.layout.title.text and len(roll.data) >= 2


def test_grid_filter_sort_and_csv_are_the_same_rows(state):
    controls = _controls(state)
    column_state = [{"colId": "t_meas_us", "sort": "desc", "sortIndex": 0}, {"colId": "M", "sort": None}]
    filter_model = {"M": {"filterType": "number", "type": "greaterThanOrEqual", "filter": 16},
                    "kernel": {"filterType": "text", "type": "contains", "filter": "w4"}}  # fmt: skip
    records, columns, note = callbacks.grid_rows(state, controls, [])
    assert records and "rows" in note and {"t_meas_us", "kernel"} <= {c["field"] for c in columns}
    payload = callbacks.download_csv(state, controls, [], filter_model, column_state)
    csv = pd.read_csv(io.StringIO(payload["content"]))
    assert len(csv) == 5 and list(csv["M"]) == [256, 128, 64, 32, 16] and set(csv["kernel"]) == {"gemv_w4a16"}
    assert csv["time_measured_s"].max() < 1e-2  # raw seconds, not µs
    assert "time_measured_s" in csv.columns and "achieved_bytes_per_s" in csv.columns


def test_grid_filter_translation_refuses_what_it_cannot_express():
    query, ignored = table.grid_filter({"M": {"filterType": "number", "type": "inRange", "filter": 1, "filterTo": 4},
                                        "kernel": {"filterType": "text", "type": "equals", "filter": "a"},
                                        "bad col": {"type": "equals", "filter": 1}, "N": "x"})  # fmt: skip
    assert query == '{kernel} = "a"' and set(ignored) == {"M", "bad col", "N"}
    assert table.grid_filter(None) == ("", ()) and table.grid_sort("nope") == []


def test_table_filter_ignores_what_it_cannot_read():
    shown = pd.DataFrame({"M": [1, 2, 3], "kernel": ["a", "b", "c"]})
    out, ignored = table.apply_filter(shown, "{M} > 1 && {nope} = 3 && garbage")
    assert list(out["M"]) == [2, 3] and len(ignored) == 2
    out, _ = table.apply_filter(shown, '{kernel} = "B"')
    assert list(out["kernel"]) == ["b"]


def test_upload_rejects_bad_files_with_a_message(state):
    tokens, message = callbacks.upload(state, _upload_contents(b"not,a\nmeasurement,file\n"), "bad.csv", [])
    assert tokens is None and "rejected" in message and "bad.csv" in message
    tokens, message = callbacks.upload(state, _upload_contents(b"\x80\x04pickle"), "evil.pkl", [])
    assert tokens is None and ".parquet or .csv" in message and "unsupported file type (.pkl)" in message
    tokens, message = callbacks.upload(state, _upload_contents(b"hello"), "notes.txt", [])
    assert tokens is None and "unsupported file type (.txt)" in message
    tokens, message = callbacks.upload(state, "data:;base64,@@@", "x.csv", [])
    assert tokens is None and "decoded" in message
    big = _upload_contents(b"0" * (callbacks.UPLOAD_LIMIT_BYTES + 4096))
    tokens, message = callbacks.upload(state, big, "big.csv", [])
    assert tokens is None and "over the 20 MB upload limit" in message and "20.0 MB" in message


def test_upload_of_a_profiler_file_joins_the_session(state):
    frame = synthetic_measurements(gpus=("h100-sxm",), seed=3)
    raw = frame.to_csv(index=False).encode()
    tokens, message = callbacks.upload(state, _upload_contents(raw), "h100.csv", [])
    assert tokens and "Added h100.csv" in message and "beside the shipped data" in message
    controls = _controls(state, gpus=["h100-sxm"])
    lines = [div.children for div in callbacks.status(state, controls, tokens)]
    assert any("measured points" in line for line in lines) and any("h100.csv" in line for line in lines)
    fig = callbacks.view_figure(state, "time", controls, tokens)
    assert any((t.name or "").endswith("@h100.csv") for t in fig.data)  # the source is named on the chart
    gpus, kernels, _, _ = callbacks.options(state, tokens)
    assert any(o["value"] == "h100-sxm" and "measured" in o["label"] for o in gpus)
    # another session (no tokens) does not see it
    lines = [div.children for div in callbacks.status(state, controls, [])]
    assert any("predictions only" in line for line in lines)


def test_hypotheses_table_without_files_shows_the_shipped_ones_and_says_when_there_are_none(state):
    # a data directory without hypotheses/ is judged against the shipped catalogue's (models.paths.catalogue_dir)
    records, _ = callbacks.hypotheses_table(state, ["h200-sxm"], [])
    assert records and "No hypotheses" not in records[0]["claim"] and records[0]["id"]
    assert callbacks.hypotheses_table(state, "not a list", 7)[0] == records  # wrong types: the same answer
    none = AppState(dataclasses.replace(state.data, hypotheses=state.data.hypotheses.iloc[:0]))
    records, _ = callbacks.hypotheses_table(none, ["h200-sxm"], [])
    assert records and "No hypotheses" in records[0]["claim"]


def test_app_py_flags_and_environment(monkeypatch):
    import app

    monkeypatch.setenv("WORKBENCH_PORT", "9001")
    monkeypatch.setenv("WORKBENCH_HOST", "0.0.0.0")
    args = app.parse_args([])
    assert (args.host, args.port, args.data_dir) == ("0.0.0.0", 9001, None)
    args = app.parse_args(["--port", "8123", "--data-dir", "/x"])
    assert (args.port, args.data_dir) == (8123, "/x")
    monkeypatch.delenv("WORKBENCH_PORT")
    monkeypatch.delenv("WORKBENCH_HOST")
    assert (app.parse_args([]).host, app.parse_args([]).port) == ("127.0.0.1", 8050)


def test_serve_command_is_registered_and_rejects_bad_ports(monkeypatch, capsys):
    from workbench.interfaces.cli import build_app, main

    assert any(c.name == "serve" for c in build_app().registered_commands)
    monkeypatch.setenv("WORKBENCH_PORT", "eighty")
    assert main(["serve"]) == 2
    assert "WORKBENCH_PORT" in capsys.readouterr().err


def test_hypotheses_verdicts_for_the_selected_gpu(tmp_path):
    import shutil
    from pathlib import Path

    shipped = sorted((Path(__file__).resolve().parents[1] / "data" / "hypotheses").glob("*.toml"))
    if not shipped:
        pytest.skip("no shipped hypotheses in data/hypotheses")
    write_dataset(tmp_path, synthetic_measurements(gpus=("h200-sxm", "h100-sxm")))
    for toml in shipped:
        shutil.copy(toml, tmp_path / "hypotheses" / toml.name)
    state = AppState(build_data(tmp_path))
    records, columns = callbacks.hypotheses_table(state, ["h200-sxm"], [])
    assert records and {r["gpu_key"] for r in records} <= {"h200-sxm", ""}
    assert {r["verdict"] for r in records} <= {"pass", "fail", "inconclusive"}
    assert {"claim", "verdict", "value"} <= {c["field"] for c in columns}
    assert all("/" not in str(r.get("file", "")) for r in records)  # the file by name, not the server's path
    for field in (c["field"] for c in columns):  # no column that is empty in every row
        assert any(r.get(field) not in (None, "") for r in records), field


def test_scheme_per_batch_view_names_the_switch_points(state):
    fig = callbacks.view_figure(state, "recommend", _controls(state), [])
    assert fig.data and "w4a16 up to" in fig.layout.title.text
    model = callbacks.view_figure(state, "recommend", _controls(state, shape="model:llama-2-7b"), [])
    assert not model.data and "pick a shape" in model.layout.annotations[0].text


def test_quantization_error_view_orders_granularities(state):
    fig = callbacks.view_figure(state, "quant", _controls(state), [])
    assert len(fig.data) >= 6 and "outlier channels" in fig.layout.title.text


def test_a_figure_that_fails_to_build_says_so_in_one_line(state, monkeypatch, caplog):
    # before: the exception escaped to guard.safe, which kept the old figure with no word to the user
    def broken(*_args):
        raise ValueError("\n    Invalid value of type 'builtins.float' received for the 'domain[0]' property\n   more")

    monkeypatch.setitem(callbacks.BUILDERS, "time", broken)
    fresh = AppState(state.data)  # no figure cached for these controls
    fig = callbacks.view_figure(fresh, "time", _controls(state), [])
    assert not fig.data
    (note,) = [a.text for a in fig.layout.annotations]
    assert note.startswith("This figure could not be drawn for this selection")
    assert "Invalid value of type 'builtins.float'" in note and "\n" not in note and "more" not in note
    assert "could not be drawn" in caplog.text and "domain[0]" in caplog.text
    assert callbacks.view_json(fresh, "time", _controls(state), [])["layout"]["annotations"][0]["text"] == note
