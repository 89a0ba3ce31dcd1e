"""`workbench export / validate / report` through the real CLI entry point, on a data directory built in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.compare_fixtures import calibration, frame, point
from workbench.analysis.compare import ALL_COLUMNS, ROLLUP_COLUMNS
from workbench.interfaces.cli import main
from workbench.storage.store import write_calibration, write_points

PASSING = (
    '[[hypothesis]]\nid = "ok"\nkind = "speedup"\na = "w4a16"\nb = "bf16"\nbatch = [1, 4]\nop = ">="\nvalue = 2.5\n'
)
FAILING = PASSING.replace('"ok"', '"no"').replace("value = 2.5", "value = 5")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    rows = []
    for m, tb, tw in [(1, 13e-6, 4e-6), (4, 13.2e-6, 4.4e-6), (32, 14e-6, 9e-6), (128, 20e-6, 25e-6)]:
        rows.append(point("cublas_bf16", "bf16", m, tb, spread=0.01, role="peer"))
        rows.append(point("w4a16_gemv", "w4a16", m, tw, spread=0.01))
    rows.append(point("cublas_bf16", "bf16", 1, 46.3e-6, N=22016, role="peer"))
    root = tmp_path / "data"
    write_points(root / "measurements" / "h200-sxm" / "sweep.parquet", frame(rows))
    write_calibration(root / "calibration", calibration())
    (root / "hypotheses").mkdir()
    (root / "hypotheses" / "mine.toml").write_text(PASSING)
    return root


def test_export_comparison_csv_full_precision_and_documented_columns(data_dir, tmp_path):
    out = tmp_path / "cmp.csv"
    assert main(["export", str(out), "--data", str(data_dir)]) == 0
    df = pd.read_csv(out)
    assert list(df.columns) == list(ALL_COLUMNS) and len(df) == 9
    row = df[(df["kernel"] == "cublas_bf16") & (df["M"] == 1) & (df["N"] == 4096)].iloc[0]
    assert row["time_measured_s"] == 13e-6  # SI seconds, written at full precision (exact round trip)
    assert row["time_datasheet_s"] == 33570816 / 4.8e12
    documented = (Path(__file__).resolve().parents[1] / "docs" / "columns.md").read_text()
    for col in list(ALL_COLUMNS) + list(ROLLUP_COLUMNS):
        assert f"`{col}`" in documented, col
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # atomic: no temp file left


def test_export_filters(data_dir, tmp_path):
    out = tmp_path / "f.csv"
    args = ["export", str(out), "--data", str(data_dir), "--kernel", "w4a16_gemv", "--batch", "1", "--batch", "4"]
    assert main(args) == 0
    df = pd.read_csv(out)
    assert set(df["kernel"]) == {"w4a16_gemv"} and sorted(df["M"]) == [1, 4]
    assert main(["export", str(out), "--data", str(data_dir), "--shape", "22016x4096", "--gpu", "h200-sxm"]) == 0
    assert pd.read_csv(out)[["N", "K"]].drop_duplicates().values.tolist() == [[22016, 4096]]
    assert main(["export", str(out), "--data", str(data_dir), "--scheme", "w4a16", "--table", "speedups"]) == 0
    sp = pd.read_csv(out)
    assert set(sp["kernel"]) == {"w4a16_gemv"} and sp.loc[sp["M"] == 1, "speedup_measured"].iloc[0] == 13 / 4


def test_export_other_tables_and_rollup(data_dir, tmp_path):
    out = tmp_path / "t.csv"
    assert main(["export", str(out), "--data", str(data_dir), "--table", "crossovers"]) == 0
    assert pd.read_csv(out)["crossover_measured"].tolist() == [128]
    assert main(["export", str(out), "--data", str(data_dir), "--table", "errors"]) == 0
    assert set(pd.read_csv(out)["tier"]) == {"datasheet", "calibrated", "floor", "kernel"}
    assert main(["export", str(out), "--data", str(data_dir), "--rollup", "chapter-4096", "--scheme", "bf16"]) == 0
    roll = pd.read_csv(out)
    assert list(roll.columns) == list(ROLLUP_COLUMNS) and sorted(roll["M"]) == [1, 4, 32, 128]
    assert roll.loc[roll["M"] == 1, "time_step_measured_s"].iloc[0] == 13e-6


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["export", "o.csv", "--kernel", "nope"], "unknown --kernel 'nope'"),
        (["export", "o.csv", "--scheme", "int3"], "unknown --scheme 'int3'"),
        (["export", "o.csv", "--gpu", "h900"], "unknown --gpu 'h900'"),
        (["export", "o.csv", "--shape", "4096by4096"], "malformed shape"),
        (["export", "o.csv", "--table", "nope"], "unknown --table"),
        (["export", "o.txt"], "must be a file name ending in .csv"),
        (["export", "o.csv", "--rollup", "gpt-9"], "unknown model"),
        (["validate", "--source", "guess"], "unknown --source"),
        (["validate", "--hypotheses", "missing.toml"], "missing.toml': no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(data_dir, tmp_path, capsys, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    assert main([*args, "--data", str(data_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err
    assert not (tmp_path / "o.csv").exists()


def test_validate_exit_codes_and_csv(data_dir, tmp_path, capsys):
    assert main(["validate", "--data", str(data_dir), "--source", "measured"]) == 0
    assert "1 pass" in capsys.readouterr().out
    bad = tmp_path / "fail.toml"
    bad.write_text(FAILING)
    out = tmp_path / "v.csv"
    assert main(["validate", "--data", str(data_dir), "--hypotheses", str(bad), "--csv", str(out)]) == 1
    verdicts = pd.read_csv(out)
    assert set(verdicts["verdict"]) == {"fail"} and set(verdicts["source"]) == {"measured", "predicted"}


def test_validate_malformed_hypotheses_exit_2_naming_file_line_field(data_dir, tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(PASSING.replace('op = ">="', 'op = "=="'))
    assert main(["validate", "--data", str(data_dir), "--hypotheses", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    accepted = "one of '>=', '<=', 'within'"
    assert err == f"error: {bad}: line 7: hypothesis 'ok': field 'op': '==' is not accepted; {accepted}"
    bad.write_text(PASSING.replace("batch = [1, 4]", "batch = [1, 2]"))
    assert main(["validate", "--data", str(data_dir), "--hypotheses", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "line 6" in err and "field 'batch': batch 2 was not measured" in err


def test_validate_html_and_report(data_dir, tmp_path):
    page = tmp_path / "r.html"
    assert main(["validate", "--data", str(data_dir), "--html", str(page)]) == 1  # the prediction fails
    assert main(["validate", "--data", str(data_dir), "--source", "measured", "--html", str(page)]) == 0
    assert "<table>" in page.read_text()
    other = tmp_path / "r2.html"
    bad = tmp_path / "fail.toml"
    bad.write_text(FAILING)
    assert main(["report", str(other), "--data", str(data_dir), "--hypotheses", str(bad)]) == 0
    assert ">fail<" in other.read_text()
    assert main(["report", str(tmp_path / "r.pdf"), "--data", str(data_dir)]) == 2


def test_shipped_chapter_hypotheses_validate_on_the_shipped_data():
    """The default files against the repo's data/: runs whatever is shipped; bad input would exit 2."""
    from models.paths import checkout_data_dir
    from workbench.interfaces.cli_compare import _verdicts

    DATA_DIR = checkout_data_dir()

    failed = bool((_verdicts(DATA_DIR, None, "measured", None)[2]["verdict"] == "fail").any())
    assert main(["validate", "--source", "measured"]) == (1 if failed else 0)  # exactly: 1 iff a verdict fails


def test_validate_table_fits_100_columns_and_never_splits_an_id(capsys, monkeypatch):
    import re

    from workbench.analysis.hypotheses import default_files, load_hypotheses

    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["validate", "--source", "measured"]) in (0, 1)
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert max(len(line) for line in out.splitlines()) <= 100
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert rows and all(line.rstrip().endswith("│") for line in rows)  # not cropped at the right edge
    from models.paths import checkout_data_dir

    DATA_DIR = checkout_data_dir()

    for h in load_hypotheses(default_files(DATA_DIR)):
        if len(h.id) <= 40:
            assert h.id in out, h.id  # whole, on one line
