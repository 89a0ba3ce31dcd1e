"""`workbench quant-error` and `workbench recommend` through the CLI entry point: tables, CSV in SI units, and one-line
errors with exit code 2 on bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.interfaces.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_quant_error_table_and_csv(capsys, tmp_path):
    out_csv = tmp_path / "q.csv"
    code, out, err = _run(capsys, "quant-error", "--shape", "128x512", "--format", "int4,fp8", "--group-size", "128",
                          "--dist", "outliers", "--csv", str(out_csv))
    assert code == 0, err
    assert "int4 g128 zero int4" in out and "4.156" in out and "fp8 128x128 sym" in out
    df = pd.read_csv(out_csv)
    assert set(df["format"]) == {"int4", "fp8"} and (df["weight_error_rel"] > 0).all()
    errors = df.set_index("label")["weight_error_rel"]
    assert errors["int4 g128 zero int4"] < errors["int4 channel zero int4"] < errors["int4 tensor zero int4"]
    assert df.loc[df["label"] == "int4 g128 sym", "bytes_per_weight"].iloc[0] == pytest.approx(0.5 + 2 / 128)


def test_quant_error_real_matrix_to_stdout(capsys, tmp_path):
    np.save(tmp_path / "w.npy", np.random.default_rng(0).standard_normal((64, 256)).astype(np.float16))
    code, out, err = _run(capsys, "quant-error", "--weights", str(tmp_path / "w.npy"), "--format", "int8",
                          "--csv", "-")
    assert code == 0, err
    assert out.startswith("label,format,granularity") and len(out.strip().splitlines()) == 1 + 3 * 7


@pytest.mark.parametrize("argv", [
    ("quant-error", "--dist", "uniform"),
    ("quant-error", "--shape", "0x512"),
    ("quant-error", "--shape", "abc"),
    ("quant-error", "--format", "int3"),
    ("quant-error", "--group-size", "x"),
    ("quant-error", "--group-size", "-4"),
    ("quant-error", "--weights", "/nonexistent/w.npy"),
    ("quant-error", "--tensor", "a.weight"),
    ("quant-error", "--dist", "outliers", "--rate", "2"),
    ("quant-error", "--shape", "64x200", "--group-size", "128", "--format", "int4"),
    ("quant-error", "--tokens", "0", "--shape", "64x256"),
    ("recommend", "--gpu", "nope"),
    ("recommend", "--gpu", "a100-sxm4-80gb"),
    ("recommend", "--shape", "123x456"),
    ("recommend", "--shape", "4096x4096", "--model", "llama-2-7b"),
    ("recommend", "--model", "no-such-model"),
    ("recommend", "--scheme", "int3"),
    ("recommend", "--mode", "warm"),
    ("recommend", "--max-error", "-1", "--error-shape", "64x256"),
    ("recommend", "--weights", "/nonexistent/w.npy"),
    ("recommend", "--data", "/nonexistent"),
    ("recommend", "--model", "llama-2-7b", "--batch", "0"),
    # the shared parsers of cli_args: limits, digit counts, empty items (these gave tracebacks or were ignored)
    ("quant-error", "--shape", "9999999999x4096"),
    ("quant-error", "--shape", "100000x100000"),
    ("quant-error", "--shape", "1" * 5000 + "x4"),
    ("quant-error", "--shape", "64x256", "--seed", "-1"),
    ("quant-error", "--shape", "64x256", "--tokens", "100000000"),
    ("quant-error", "--shape", "64x256", "--tokens", "9" * 20),
    ("quant-error", "--shape", "64x256", "--format", ""),
    ("quant-error", "--shape", "64x256", "--format", "int4,"),
    ("quant-error", "--shape", "64x256", "--group-size", "9" * 5000),
    ("recommend", "--model", "llama-2-7b", "--batch", "9" * 20),
    ("recommend", "--model", "llama-2-7b", "--batch", "100000"),
    ("recommend", "--model", "llama-2-7b", "--batch", "1,,2"),
    ("recommend", "--model", ""),
    ("recommend", "--shape", ""),
    ("recommend", "--shape", "1" * 5000 + "x4"),
    ("recommend", "--scheme", "bf16,,fp16"),
    ("recommend", "--shape", "4096x4096", "--max-error", "0.05", "--error-shape", "64x256", "--seed", "-1"),
    ("recommend", "--shape", "4096x4096", "--max-error", "0.05", "--error-shape", "100000x100000"),
    ("recommend", "--gpu", "h100-sxm", "--scheme", "nvfp4"),  # a scheme never measured: was an IndexError
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv):
    code, out, err = _run(capsys, *argv)
    assert code == 2, (argv, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err


def test_a_csv_not_ending_in_csv_is_refused_and_nothing_written(capsys, tmp_path):
    """--csv took any path (x.txt, '', a device: the atomic rename replaced /dev/full with a regular file)."""
    for argv in (("quant-error", "--shape", "64x256"), ("recommend", "--shape", "4096x4096", "--gpu", "h100-sxm")):
        for bad in (str(tmp_path / "rows.txt"), str(tmp_path / "rows.csv.bak"), "", " "):
            code, out, err = _run(capsys, *argv, "--csv", bad)
            assert code == 2 and err.count("\n") == 1 and "ending in .csv" in err, (argv, bad, err)
    assert list(tmp_path.iterdir()) == []


def test_unreadable_weights_and_overflowing_synthetic_weights_are_one_line(capsys, tmp_path):
    (tmp_path / "empty.npy").write_bytes(b"")
    np.save(tmp_path / "w.npy", np.ones((8, 128)))
    (tmp_path / "cut.npy").write_bytes((tmp_path / "w.npy").read_bytes()[:100])
    for argv, says in ((("--weights", tmp_path / "empty.npy"), "not a readable .npy array"),
                       (("--weights", tmp_path / "cut.npy"), "not a readable .npy array"),
                       (("--shape", "64x256", "--std", "1e308"), "overflow float64"),
                       (("--shape", "64x256", "--dist", "student-t", "--std", "1e308"), "overflow float64"),
                       (("--shape", "64x256", "--dist", "outliers", "--std", "1e300", "--magnitude", "1e300"),
                        "overflow float64")):
        code, out, err = _run(capsys, "quant-error", *map(str, argv))
        assert code == 2 and err.count("\n") == 1 and says in err and "Traceback" not in err, (argv, err)


def test_recommend_shape_and_model(capsys, tmp_path):
    out_csv = tmp_path / "r.csv"
    code, out, err = _run(capsys, "recommend", "--shape", "22016x4096", "--csv", str(out_csv))
    assert code == 0, err
    assert "measured: w4a16 up to " in out and "predicted:" in out
    df = pd.read_csv(out_csv)
    assert set(df["gpu_key"]) == {"h100-sxm", "h200-sxm"}  # no --gpu: every GPU measured
    for _, g in df.groupby("gpu_key"):
        assert list(g["M"]) == [1, 2, 4, 8, 16, 32, 64, 128, 256] and (g["time_s"] < 1e-3).all()
    code, out, err = _run(capsys, "recommend", "--model", "llama-2-7b", "--batch", "1,64")
    assert code == 0, err
    assert "llama-2-7b on h200-sxm" in out and "llama-2-7b on h100-sxm" in out and "qkv=" in out


def test_recommend_a_shape_one_gpu_measured_and_one_gpu_asked(capsys):
    code, out, err = _run(capsys, "recommend", "--shape", "6144x4096")  # measured on the H200 only
    assert code == 0, err
    assert "h200-sxm 6144x4096" in out and "h100-sxm" not in out
    code, out, err = _run(capsys, "recommend", "--shape", "6144x4096", "--gpu", "h100-sxm")
    assert code == 2 and err.startswith("error: no cold measurements of 6144x4096 on h100-sxm")
    assert "4096x14336" not in err  # the shapes listed are the H100's own (4096x14336: H200 only)


def test_recommend_accuracy_bound_excludes(capsys):
    code, out, err = _run(capsys, "recommend", "--shape", "22016x4096", "--max-error", "0.05", "--error-shape",
                          "256x1024", "--dist", "outliers")
    assert code == 0, err
    assert "w4a16" in out.splitlines()[0] and "(excluded)" in out.splitlines()[0]
    table = out.split("\n\n", 1)[1]
    assert " w4a16 " not in table.split("\n", 2)[2]
