"""`workbench merge`: three machines' datasets as one, idempotent, provenance kept; validate per GPU on the result."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from models.errors import InputError
from tests.compare_fixtures import calibration, frame, point
from workbench.interfaces.cli import main
from workbench.storage import store
from workbench.storage.merge import merge, merge_frames

MACHINES = {  # host: (gpu_key, gpu_name, uuid, W4A16 speedup over BF16 at batch 1 and 4)
    "node-a": ("h200-sxm", "NVIDIA H200", "GPU-aaaa0000-0000", 3.5),
    "node-b": ("h100-sxm", "NVIDIA H100 80GB HBM3", "GPU-bbbb0000-0000", 3.4),
    "node-c": ("a100-sxm-80gb", "NVIDIA A100-SXM4-80GB", "GPU-cccc0000-0000", 2.0),
}
HYPOTHESIS = """
[[hypothesis]]
id = "w4a16-3to4x"
claim = "W4A16 is 3-4x faster than BF16 at batch 1 and 4"
kind = "speedup"
a = "w4a16"
b = "bf16"
batch = [1, 4]
op = "within"
value = [3.0, 4.0]
"""


def machine_rows(host: str, *, run: str = "r1", timestamp: str = "2026-12-02T12:00:00Z", scale: float = 1.0):
    key, name, uuid, speedup = MACHINES[host]
    rows = []
    for m in (1, 4):
        t_bf16 = 30e-6 * scale
        for kernel, scheme, t in (("cublas_bf16", "bf16", t_bf16), ("w4a16_gemv", "w4a16", t_bf16 / speedup)):
            rows.append(point(kernel, scheme, m, t, gpu=key, gpu_name=name, gpu_uuid=uuid, run_id=f"{host}-{run}",
                              timestamp=timestamp, host=host, git_commit=f"c-{host}"))
    return frame(rows)


@pytest.fixture()
def three(tmp_path):
    """node-a as a data dir (measurements + calibration), node-b as a folder, node-c as one CSV file."""
    a = tmp_path / "a"
    store.write_points(a / "measurements" / "h200-sxm" / "sweep-cold.parquet", machine_rows("node-a"))
    store.write_calibration(a / "calibration", calibration())
    b = tmp_path / "b"
    store.write_points(b / "x.gpu-bbbb0000.parquet", machine_rows("node-b"))
    c = tmp_path / "c.csv"
    store.write_points(c, machine_rows("node-c"))
    return [a, b, c]


def test_merge_of_three_datasets_keeps_every_gpu_and_its_provenance(three, tmp_path):
    res = merge(three, tmp_path / "m.parquet")
    df = store.read_measurement_file(tmp_path / "m.parquet")
    assert len(df) == res.rows_in == 12 and res.duplicates == 0
    by = res.by_gpu().set_index("host")
    assert list(by.index) == ["node-a", "node-b", "node-c"]
    assert by.loc["node-b", "gpu_uuid"] == "GPU-bbbb0000-0000" and by.loc["node-c", "gpu_key"] == "a100-sxm-80gb"
    assert set(df["run_id"]) == {"node-a-r1", "node-b-r1", "node-c-r1"}
    assert set(df["git_commit"]) == {"c-node-a", "c-node-b", "c-node-c"}


def test_merge_is_idempotent_and_independent_of_input_order(three, tmp_path):
    first = merge(three, tmp_path / "m1.parquet").frame
    again = merge([tmp_path / "m1.parquet", *three], tmp_path / "m2.parquet")
    assert again.duplicates == 12
    pd.testing.assert_frame_equal(store.read_measurement_file(tmp_path / "m1.parquet"),
                                  store.read_measurement_file(tmp_path / "m2.parquet"))
    pd.testing.assert_frame_equal(first, merge(list(reversed(three))).frame)
    pd.testing.assert_frame_equal(first, merge([tmp_path / "m1.parquet"]).frame)


def test_duplicate_points_keep_the_newest_and_old_files_without_host_merge(tmp_path):
    old = machine_rows("node-a", run="r1", timestamp="2026-12-01T00:00:00Z").drop(columns=["host"])
    new = machine_rows("node-a", run="r2", timestamp="2026-12-02T00:00:00Z", scale=1.1)
    store.write_points(tmp_path / "old.parquet", old)
    store.write_points(tmp_path / "new.parquet", new)
    for order in ([tmp_path / "old.parquet", tmp_path / "new.parquet"],
                  [tmp_path / "new.parquet", tmp_path / "old.parquet"]):
        res = merge(order)
        assert res.duplicates == 4 and set(res.frame["run_id"]) == {"node-a-r2"}
        assert set(res.frame["host"]) == {"node-a"}
    res = merge([tmp_path / "old.parquet"])
    assert set(res.frame["host"]) == {""}  # a file from before the host column: kept, host unknown


def test_merge_rejects_newer_schema_foreign_files_and_rows_without_a_gpu(tmp_path):
    newer = machine_rows("node-a").assign(schema_version=99)
    newer.to_parquet(tmp_path / "newer.parquet", index=False)
    with pytest.raises(InputError, match="schema_version 99 is newer"):
        merge([tmp_path / "newer.parquet"], tmp_path / "out.parquet")
    assert not (tmp_path / "out.parquet").exists()
    pd.DataFrame({"a": [1]}).to_csv(tmp_path / "foreign.csv", index=False)
    with pytest.raises(InputError, match="not a workbench measurement file"):
        merge([tmp_path / "foreign.csv"])
    store.write_points(tmp_path / "nouuid.parquet", machine_rows("node-a").assign(gpu_uuid=""))
    with pytest.raises(InputError, match="no gpu_uuid"):
        merge([tmp_path / "nouuid.parquet"])
    with pytest.raises(InputError, match="folder"):
        merge([tmp_path / "nouuid.parquet"], tmp_path / "out.json")


def test_merge_frames_of_nothing_is_an_empty_typed_frame():
    df, dups = merge_frames([])
    assert df.empty and dups == 0 and "host" in df.columns


def test_cli_merge_to_a_data_dir_then_validate_gives_a_verdict_per_gpu(three, tmp_path, capsys):
    dest = tmp_path / "merged"
    assert main(["merge", *map(str, three), "--out", str(dest)]) == 0
    text = capsys.readouterr().out
    assert "12 rows" in text and "node-c" in text
    assert (dest / "measurements" / "merged.parquet").exists()
    assert [p.name for p in (dest / "calibration").glob("*.json")] == ["h200-sxm-0000.json"]
    hyp = tmp_path / "h.toml"
    hyp.write_text(HYPOTHESIS)
    csv = tmp_path / "verdicts.csv"
    rc = main(["validate", "--data", str(dest), "--hypotheses", str(hyp), "--source", "measured", "--csv", str(csv)])
    assert rc == 1  # the A100 fails the claim
    verdicts = pd.read_csv(csv).set_index("gpu_key")["verdict"].to_dict()
    assert verdicts == {"a100-sxm-80gb": "fail", "h100-sxm": "pass", "h200-sxm": "pass"}
    assert main(["merge", str(tmp_path / "nothing"), "--out", str(dest)]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    from workbench.interfaces.dashboard.data import build_data

    data = build_data(dest)  # the dashboard's GPU comparison reads the merged data dir
    assert data.measured_gpus == ["a100-sxm-80gb", "h100-sxm", "h200-sxm"]


def test_a_bad_input_creates_no_output_folder_and_empty_arguments_are_refused(three, tmp_path, capsys,
                                                                               monkeypatch):
    bad = tmp_path / "bad"
    (bad / "calibration").mkdir(parents=True)
    (bad / "calibration" / "x.json").write_text("{not json")
    dest = tmp_path / "new" / "merged"
    assert main(["merge", *map(str, three), str(bad), "--out", str(dest)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()  # the output folder was made before the inputs were read
    monkeypatch.chdir(tmp_path / "b")  # '' was Path('.'): the working folder read, or made a data dir
    for argv in (["merge", "", "--out", str(dest)], ["merge", str(three[0]), "--out", ""]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is empty" in err, (argv, err)
    assert not (tmp_path / "new").exists() and sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "x.gpu-bbbb0000.parquet"]


def test_merged_calibrations_keep_the_newest_per_gpu(tmp_path):
    for i, stamp in enumerate(("2026-12-01T00:00:00Z", "2026-12-03T00:00:00Z")):
        d = tmp_path / f"d{i}"
        store.write_points(d / "measurements" / "x.parquet", machine_rows("node-a"))
        store.write_calibration(d / "calibration", {**calibration(), "timestamp": stamp})
    res = merge([tmp_path / "d1", tmp_path / "d0"], tmp_path / "out")
    assert len(res.calibrations) == 1
    assert json.loads(Path(res.calibrations[0]).read_text())["timestamp"] == "2026-12-03T00:00:00Z"
