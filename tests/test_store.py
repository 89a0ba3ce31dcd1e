import json

import pandas as pd
import pytest

from models.errors import InputError
from workbench.storage import store
from workbench.storage.schema import MEASUREMENT_COLUMNS, SCHEMA_VERSION


def row(**over):
    base = {}
    for col, dtype in MEASUREMENT_COLUMNS.items():
        base[col] = {"int64": 1, "float64": 1.5, "boolean": False}.get(dtype, "x")
    base["schema_version"] = SCHEMA_VERSION
    base.update(over)
    return base


def test_roundtrip_parquet_and_csv(tmp_path):
    rows = [row(M=1, throttled=None, time_median_s=float("nan")), row(M=2, throttled=True)]
    p = store.write_points(tmp_path / "m" / "a.parquet", rows)
    c = store.write_points(tmp_path / "m" / "b.csv", rows)
    for path in (p, c):
        df = store.read_measurement_file(path)
        assert list(df.columns) == list(MEASUREMENT_COLUMNS)
        assert df["M"].tolist() == [1, 2]
        assert str(df["throttled"].dtype) == "boolean"
        assert pd.isna(df["throttled"][0]) and bool(df["throttled"][1])
        assert pd.isna(df["time_median_s"][0])
    both = store.load_measurements(tmp_path)
    assert len(both) == 4
    assert len(store.load_measurements(tmp_path / "m" / "a.parquet")) == 2


def test_load_empty_dir(tmp_path):
    df = store.load_measurements(tmp_path)
    assert df.empty and list(df.columns) == list(MEASUREMENT_COLUMNS)


def test_foreign_file_rejected_with_its_name(tmp_path):
    path = tmp_path / "measurements" / "foreign.parquet"
    path.parent.mkdir()
    pd.DataFrame({"a": [1]}).to_parquet(path)
    with pytest.raises(InputError, match="foreign.parquet.*missing columns"):
        store.load_measurements(tmp_path)


def test_wrong_type_rejected(tmp_path):
    df = pd.DataFrame([row(), row()])
    df["M"] = ["one", "two"]
    path = tmp_path / "bad.parquet"
    df.to_parquet(path)
    with pytest.raises(InputError, match="bad.parquet: column 'M'"):
        store.read_measurement_file(path)


def test_newer_schema_rejected(tmp_path):
    path = tmp_path / "new.csv"
    pd.DataFrame([row(schema_version=SCHEMA_VERSION + 1)]).to_csv(path, index=False)
    with pytest.raises(InputError, match="newer"):
        store.read_measurement_file(path)


def test_corrupt_file_rejected(tmp_path):
    path = tmp_path / "x.parquet"
    path.write_bytes(b"not parquet")
    with pytest.raises(InputError, match="x.parquet"):
        store.read_measurement_file(path)


def test_upload_reader(tmp_path):
    content = pd.DataFrame([row()]).to_csv(index=False).encode()
    assert len(store.read_uploaded("up.csv", content)) == 1
    with pytest.raises(InputError):
        store.read_uploaded("up.txt", content)


def test_journal_append_fold_and_torn_line(tmp_path):
    out = tmp_path / "sweep.parquet"
    j = store.journal_path(out)
    store.append_journal(j, row(M=1))
    store.append_journal(j, row(M=2))
    with open(j, "a") as fh:
        fh.write('{"schema_version": 1, "M"')  # a kill in the middle of a write
    frame = store.fold_journal(out)
    assert frame["M"].tolist() == [1, 2]
    assert not j.exists() and out.exists()
    store.append_journal(j, row(M=2, time_median_s=9.0))  # the same point again: the latest wins
    frame = store.fold_journal(out)
    assert frame["M"].tolist() == [1, 2] and frame["time_median_s"].tolist() == [1.5, 9.0]


def test_fold_supersede_replaces_the_points_on_any_gpu_of_the_kind(tmp_path):
    out = tmp_path / "sweep.parquet"
    old = [row(M=m, gpu_uuid="GPU-a", gpu_key="h200-sxm", kernel=k, time_median_s=1.0) for m in (1, 2) for k in "pq"]
    other_kind = row(M=1, gpu_uuid="GPU-c", gpu_key="h100-sxm", kernel="p", time_median_s=3.0)
    store.write_points(out, old + [other_kind])
    j = store.journal_path(out)
    store.append_journal(j, row(M=1, gpu_uuid="GPU-b", gpu_key="h200-sxm", kernel="p", time_median_s=2.0))
    frame = store.fold_journal(out, supersede=True)
    got = sorted(zip(frame["gpu_uuid"], frame["kernel"], frame["M"], frame["time_median_s"], strict=True))
    assert got == [("GPU-a", "p", 2, 1.0), ("GPU-a", "q", 1, 1.0), ("GPU-a", "q", 2, 1.0), ("GPU-b", "p", 1, 2.0),
                   ("GPU-c", "p", 1, 3.0)]  # kernel p at M = 1 of GPU-a replaced; the H100's row kept
    store.append_journal(j, row(M=2, gpu_uuid="GPU-b", gpu_key="h200-sxm", kernel="q", time_median_s=4.0))
    frame = store.fold_journal(out)  # without supersede another GPU's rows stay beside the new one
    assert len(frame) == 6 and sorted(frame[frame["kernel"] == "q"]["time_median_s"]) == [1.0, 1.0, 4.0]
    uncatalogued = [row(M=1, gpu_uuid=u, gpu_key="", kernel="p") for u in ("GPU-x", "GPU-y")]
    store.write_points(out, uncatalogued)
    store.append_journal(j, row(M=1, gpu_uuid="GPU-x", gpu_key="", kernel="p", time_median_s=5.0))
    frame = store.fold_journal(out, supersede=True)  # outside the catalogue the kind is the GPU itself
    assert sorted(zip(frame["gpu_uuid"], frame["time_median_s"], strict=True)) == [("GPU-x", 5.0), ("GPU-y", 1.5)]


def test_atomic_write_leaves_no_temp_files(tmp_path):
    store.write_points(tmp_path / "a.parquet", [row()])
    assert [p.name for p in tmp_path.iterdir()] == ["a.parquet"]


def test_unwritable_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="cannot write"):
        store.check_writable(blocker / "out.parquet")
    with pytest.raises(InputError, match="directory"):
        store.check_writable(tmp_path)


def calibration(**over):
    doc = {"schema_version": 1, "gpu_name": "NVIDIA H200", "gpu_key": "h200-sxm", "gpu_uuid": "GPU-12345678-aaaa",
           "timestamp": "2026-12-02T10:00:00+00:00", "sm_clock_hz": 1.98e9,
           "ceilings": {"read_bytes_per_s": 4.4e12, "fp8_mma_emulated": True}}
    doc.update(over)
    return doc


def test_calibration_roundtrip_and_latest_wins(tmp_path):
    p1 = store.write_calibration(tmp_path / "calibration", calibration())
    assert p1.name == "h200-sxm-12345678.json"
    store.write_calibration(tmp_path / "calibration" / "other.json", calibration(timestamp="2026-12-03T00:00:00+00:00",
                                                                              sm_clock_hz=1.9e9))
    assert store.read_calibration(p1)["ceilings"]["read_bytes_per_s"] == 4.4e12
    docs = store.load_calibrations(tmp_path)
    assert docs["h200-sxm"]["sm_clock_hz"] == 1.9e9


@pytest.mark.parametrize(
    "bad, match",
    [({"schema_version": 99}, "newer"), ({"ceilings": {"read_bytes_per_s": "fast"}}, "must be a number"),
     ({"ceilings": []}, "object")],
)
def test_calibration_rejects(tmp_path, bad, match):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(calibration(**bad)))
    with pytest.raises(InputError, match=match):
        store.read_calibration(path)
    path.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        store.read_calibration(path)
