"""Uploads and downloads (issue 16): values refused naming column and row, uploads beside shipped points, the app's
own export refused with a sentence, spreadsheet formulas escaped in the CSV, one MB unit."""

from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dash")

from tests.dashboard_synthetic import synthetic_measurements, write_dataset  # noqa: E402
from workbench.interfaces.dashboard import callbacks, layout, table, uploads  # noqa: E402
from workbench.interfaces.dashboard.callbacks import AppState  # noqa: E402
from workbench.interfaces.dashboard.data import build_data  # noqa: E402
from workbench.interfaces.dashboard.queries import default_selection  # noqa: E402


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_dataset(root, synthetic_measurements(gpus=("h200-sxm",)))
    return AppState(build_data(root))


def _contents(raw: bytes) -> str:
    return "data:application/octet-stream;base64," + base64.b64encode(raw).decode()


def _controls(state, **over):
    d = default_selection(state.data)
    values = {"gpus": ["h200-sxm"], "primary": None, "schemes": list(d.schemes), "kernels": [], "kernel_view": "all",
              "shape": d.shape, "m_lo": 1, "m_hi": 256, "baseline": d.baseline, "tier": d.tier, "mode": d.mode}
    values.update(over)
    return tuple(values.values())


@pytest.mark.parametrize(
    ("column", "value", "what"),
    [
        ("time_median_s", np.nan, "nan"),
        ("time_median_s", np.inf, "inf"),
        ("time_p10_s", -np.inf, "-inf"),
        ("time_median_s", 0.0, "0.0"),
        ("time_p90_s", -1e-6, "-1e-06"),
        ("time_median_s", 1e308, "1e+308"),
        ("M", 2**62, str(2**62)),
        ("N", 10**15, str(10**15)),
        ("power_median_w", np.inf, "inf"),
    ],
)
def test_bad_values_are_refused_naming_column_and_row(state, column, value, what):
    frame = synthetic_measurements(gpus=("h100-sxm",), seed=1)
    frame[column] = frame[column].astype("float64") if column not in ("M", "N") else frame[column]
    frame.loc[6, column] = value
    tokens, message = callbacks.upload(state, _contents(frame.to_csv(index=False).encode()), "bad.csv", [])
    assert tokens is None, message
    assert f"column '{column}', data row 7" in message and what in message and "accepted" in message


def test_uploads_sit_beside_shipped_points_with_their_source_named(state):
    same = synthetic_measurements(gpus=("h200-sxm",), seed=9)  # the very points shipped, different times
    tokens, message = callbacks.upload(state, _contents(same.to_csv(index=False).encode()), "again.csv", [])
    assert tokens, message
    frames = state.frames(tokens)
    kernels = set(frames.latest["kernel"].astype(str))
    assert "gemv_bf16" in kernels and "gemv_bf16 @again.csv" in kernels
    assert len(frames.latest) == 2 * len(state.data.latest)  # nothing replaced
    records, _, _ = callbacks.grid_rows(state, _controls(state), tokens)
    assert {"gemv_bf16", "gemv_bf16 @again.csv"} <= {r["kernel"] for r in records}


def test_own_export_is_refused_with_a_sentence(state):
    csv = callbacks.download_csv(state, _controls(state), [], None, None)["content"]
    tokens, message = callbacks.upload(state, _contents(csv.encode()), "workbench-measured.csv", [])
    assert tokens is None
    assert "is a comparison exported by this dashboard" in message and "not a measurement file" in message


def test_download_escapes_spreadsheet_formulas(tmp_path):
    frame = synthetic_measurements(gpus=("h200-sxm",))
    evil = ["=cmd|' /C calc'!A0", '=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)"]
    frame.loc[: len(evil) - 1, "kernel"] = evil
    frame.loc[: len(evil) - 1, "scheme"] = "bf16"
    write_dataset(tmp_path, frame)
    local = AppState(build_data(tmp_path))
    controls = _controls(local, schemes=["bf16", "w8a16", "w4a16", "w8a8", "fp8", "fp32"], m_lo=1, m_hi=256)
    content = callbacks.download_csv(local, controls, [], None, None)["content"]
    cells = set(pd.read_csv(io.StringIO(content), dtype=str)["kernel"])
    assert {"'" + e for e in evil} <= cells
    assert not any(c.startswith(uploads.FORMULA_PREFIXES) for c in cells)
    negative = pd.Series([-1.5, 2.0])  # numbers stay numbers
    assert list(table.to_csv(table.TableRows(negative.to_frame("x"), negative.to_frame("x"), (), "measured"))
                .splitlines()[1:]) == ["-1.5", "2"]  # fmt: skip


def test_one_mb_unit_everywhere():
    assert uploads.UPLOAD_LIMIT_BYTES == 20 * 10**6 and layout.UPLOAD_LIMIT_BYTES == uploads.UPLOAD_LIMIT_BYTES
    assert "20 MB" in uploads.ACCEPTED
