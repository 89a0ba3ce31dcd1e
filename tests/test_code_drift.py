"""Rows against the code they measured, on the analysis side (workbench.analysis.code_drift): the fingerprints the
kernel catalogue publishes against the rows' `kernel_fingerprint`, and the dashboard's status lines built from them."""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest

from models import kernel_catalogue as kc
from models.errors import InputError
from workbench.analysis.code_drift import DRIFT_COLUMNS, code_drift

A, B = "a" * 16, "b" * 16


def _entries():
    base = next(iter(kc.shipped().values()))
    return {"k1": replace(base, name="k1", fingerprint=A), "k2": replace(base, name="k2", fingerprint=B),
            "k3": replace(base, name="k3", fingerprint="")}


def _rows(items):
    return pd.DataFrame(items, columns=["gpu_key", "kernel", "kernel_fingerprint"])


def test_rows_are_changed_current_or_unrecorded_per_gpu():
    rows = _rows([("g1", "k1", A), ("g1", "k1", "c" * 16), ("g1", "k2", "c" * 16), ("g1", "k2", ""),
                  ("g1", "k2", None), ("g2", "k1", A), ("g2", "k3", "c" * 16), ("g2", "upload_kernel", "d" * 16)])
    out = code_drift(rows, _entries())
    assert list(out.columns) == DRIFT_COLUMNS
    g1, g2 = (out[out["gpu_key"] == g].iloc[0] for g in ("g1", "g2"))
    assert (g1["rows"], g1["changed"], g1["unrecorded"], g1["changed_kernels"]) == (5, 2, 2, "k1, k2")
    # a kernel the catalogue holds no code for (k3) and one it does not hold (an upload's) are not counted
    assert (g2["rows"], g2["changed"], g2["unrecorded"], g2["changed_kernels"]) == (1, 0, 0, "")


def test_rows_without_the_column_and_no_rows():
    assert code_drift(pd.DataFrame({"gpu_key": ["g"], "kernel": ["k1"]}), _entries())["unrecorded"].tolist() == [1]
    assert code_drift(_rows([]), _entries()).empty


def test_shipped_catalogue_carries_every_registered_kernels_fingerprint():
    from kernels import fingerprint, registry

    entries = kc.shipped()
    assert set(entries) == set(registry.catalogue())
    assert {n: e.fingerprint for n, e in entries.items()} == {n: fingerprint.current(n) for n in entries}
    assert all(kc.FINGERPRINT.fullmatch(e.fingerprint) and e.fingerprint for e in entries.values())


@pytest.mark.parametrize("value", ["ABCDEF0123456789", "abc", 7, None, "g" * 16])
def test_catalogue_refuses_a_malformed_fingerprint(value):
    doc = json.loads(kc.catalogue_path().read_text())
    next(iter(doc["kernels"].values()))["fingerprint"] = value
    with pytest.raises(InputError, match=r"fingerprint must be 16 lower-case hex digits"):
        kc.parse(json.dumps(doc), "x.json")


def test_catalogue_of_the_first_schema_is_refused_in_one_line():
    doc = json.loads(kc.catalogue_path().read_text())
    doc["schema_version"] = 1
    with pytest.raises(InputError, match=r"^x.json: schema_version 1 not understood \(this workbench reads 2\)$"):
        kc.parse(json.dumps(doc), "x.json")


def test_dashboard_status_names_changed_and_unrecorded_rows(tmp_path):
    pytest.importorskip("dash")
    from tests.dashboard_synthetic import synthetic_measurements, write_dataset
    from workbench.interfaces.dashboard.callbacks import AppState
    from workbench.interfaces.dashboard.data import build_data
    from workbench.interfaces.dashboard.queries import default_selection, status_lines

    frame = synthetic_measurements(gpus=("h200-sxm",), modes=("cold",))
    cublas = frame.index[frame["kernel"] == "cublas_bf16"]
    now = kc.shipped()["cublas_bf16"].fingerprint
    frame.loc[cublas, "kernel_fingerprint"] = now
    frame.loc[cublas[:5], "kernel_fingerprint"] = "0" * 16  # measured with other code
    frame.loc[cublas[5:8], "kernel_fingerprint"] = ""  # recorded before rows had one
    write_dataset(tmp_path, frame)
    state = AppState(build_data(tmp_path))
    lines = "\n".join(status_lines(state.data, state.frames([]), default_selection(state.data)))
    assert "NVIDIA H200" in lines
    assert "5 rows of the data directory measure kernel code changed since they were recorded (cublas_bf16)" in lines
    assert "3 rows of the data directory were recorded before rows carried their code's fingerprint" in lines
    frame.loc[cublas, "kernel_fingerprint"] = now
    write_dataset(tmp_path, frame)
    state = AppState(build_data(tmp_path))
    lines = "\n".join(status_lines(state.data, state.frames([]), default_selection(state.data)))
    assert "changed since" not in lines and "before rows carried" not in lines
