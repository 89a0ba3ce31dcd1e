"""`workbench predict`, `gpus`, `schemes`: tables, CSV in SI units, and one-line errors with exit code 2."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from models.roofline import predict
from workbench.interfaces.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_default_table(capsys):
    code, out, err = run(capsys, "predict", "--batch", "1", "--batch", "256")
    assert code == 0 and err == ""
    assert "22016x4096" in out and "h200-sxm" in out
    for scheme in ("fp32", "fp16", "bf16", "w8a16", "w4a16", "w8a8", "fp8"):
        assert f" {scheme} " in out
    assert "nvfp4" not in out  # modeled-only schemes need --scheme all
    assert "3.85×" in out and "µs" in out and "TB/s" in out and "TFLOP/s" in out
    assert "memory" in out and "compute" in out


def test_predict_csv_is_si_and_matches_the_model(capsys, tmp_path):
    path = tmp_path / "pred.csv"
    code, _, _ = run(capsys, "predict", "--gpu", "h100-sxm,a100-sxm-80gb", "--scheme", "bf16", "--scheme", "w4a16",
                     "--batch", "1,16,256", "--shape", "4096x4096", "--csv", str(path))
    assert code == 0
    assert [p.name for p in tmp_path.iterdir()] == ["pred.csv"]  # no temporary file left behind
    df = pd.read_csv(path)
    assert len(df) == 2 * 2 * 3
    expect = predict(df[["gpu", "scheme", "M", "N", "K"]])
    assert (df["time_datasheet_s"] - expect["time_datasheet_s"]).abs().max() < 1e-15
    assert df["time_datasheet_s"].max() < 1e-3  # seconds, not microseconds
    w4 = df[(df.scheme == "w4a16") & (df.M == 1)]
    assert w4["speedup"].between(3.8, 3.9).all() and (w4["baseline"] == "bf16").all()


def test_predict_model_layers_and_rollup(capsys, tmp_path):
    code, out, _ = run(capsys, "predict", "--model", "llama-2-7b", "--scheme", "w4a16", "--batch", "1")
    assert code == 0 and "gate_up" in out and "lm_head" in out
    path = tmp_path / "roll.csv"
    code, out, _ = run(capsys, "predict", "--model", "llama-2-7b", "--rollup", "--gpu", "h100-sxm", "--scheme",
                       "bf16,w4a16", "--batch", "1,64", "--csv", str(path))
    assert code == 0 and "ms" in out and "tokens/s" in out
    roll = pd.read_csv(path)
    assert set(roll.columns) >= {"time_step_s", "tokens_per_s", "speedup", "bytes_step"}
    bf16 = roll[(roll.scheme == "bf16") & (roll.batch == 1)].iloc[0]
    assert bf16["time_step_s"] == pytest.approx(4.0e-3, rel=0.02)


def test_gpus_and_schemes_commands(capsys):
    code, out, _ = run(capsys, "gpus")
    assert code == 0 and "h200-sxm" in out and "b200" in out and "4.80 TB/s" in out
    code, out, _ = run(capsys, "schemes")
    assert code == 0 and "nvfp4" in out and "4.156" in out and "modeled" in out


@pytest.mark.parametrize("args,message", [
    (["--gpu", "h300"], "unknown GPU 'h300'; valid: "),
    (["--scheme", "int3"], "unknown scheme 'int3'; valid: "),
    (["--model", "gpt-5"], "unknown model 'gpt-5'; valid: "),
    (["--shape", "4096x4100", "--scheme", "w4a16"], "not divisible by the group size 128"),
    (["--shape", "4096x4096", "--scheme", "w4a16", "--group-size", "100"], "not divisible by the group size 100"),
    (["--batch", "0"], "--batch 0 is out of range; give an integer in 1..65,536"),
    (["--batch", "-4"], "--batch -4 is out of range"),
    (["--batch", "one"], "is not an integer"),
    (["--shape", "4096by4096"], "malformed shape"),
    (["--shape", "0x4096"], "malformed shape"),
    (["--rollup"], "--rollup needs --model"),
    (["--shape", "4096x4096", "--model", "llama-2-7b"], "either --shape or --model"),
    (["--baseline", "bf17"], "unknown scheme 'bf17'"),
    (["--tier", "calibrated", "--gpu", "t4"], "no calibration for t4"),
])
def test_bad_input_gives_one_line_and_exit_2(capsys, tmp_path, args, message):
    code, out, err = run(capsys, "predict", "--data-dir", str(tmp_path), *args)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_csv_into_a_missing_folder_is_created_and_bad_paths_fail_cleanly(capsys, tmp_path):
    code, _, _ = run(capsys, "predict", "--batch", "1", "--csv", str(tmp_path / "new" / "x.csv"))
    assert code == 0 and (tmp_path / "new" / "x.csv").stat().st_size > 0  # like export and profile --out
    (tmp_path / "afile").write_text("")
    code, _, err = run(capsys, "predict", "--batch", "1", "--csv", str(tmp_path / "afile" / "x.csv"))
    assert code == 2 and "cannot write" in err and err.count("\n") == 1 and "Traceback" not in err
    (tmp_path / "d.csv").mkdir()
    code, _, err = run(capsys, "predict", "--batch", "1", "--csv", str(tmp_path / "d.csv"))
    assert code == 2 and "is a folder" in err


def test_python_m_workbench_subprocess():
    ok = subprocess.run([sys.executable, "-m", "workbench", "predict", "--batch", "1", "--scheme", "w4a16"],
                        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "w4a16" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "workbench", "predict", "--shape", "22016x"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("error: --shape: malformed shape") and bad.stderr.count("\n") == 1
    assert "Traceback" not in bad.stderr


def test_format_helpers():
    from workbench.interfaces.format import fmt_bandwidth, fmt_bytes, fmt_clock, fmt_flops_rate, fmt_ratio, fmt_time

    assert fmt_time(4.63e-5) == "46.3 µs" and fmt_time(3.95e-3) == "3.95 ms" and fmt_time(9.996e-6) == "10.0 µs"
    assert fmt_time(float("nan")) == "—" and fmt_time(None) == "—"
    assert fmt_bytes(1.8e8) == "180 MB" and fmt_bandwidth(4.8e12) == "4.80 TB/s" and fmt_bandwidth(9e11) == "900 GB/s"
    assert fmt_flops_rate(9.894e14) == "989 TFLOP/s" and fmt_clock(1.98e9) == "1980 MHz"
    assert fmt_ratio(16 / 4.15625) == "3.85×"


def test_model_and_predict_cli_import_no_gpu_or_ui_libraries():
    code = ("import sys, models.roofline, models.rollup, workbench.interfaces.cli_predict; "
            "bad = [m for m in ('cupy', 'pynvml', 'dash', 'plotly', 'torch') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=120).returncode == 0


ANSI = __import__("re").compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize("args", [
    ["predict", "--model", "llama-2-7b", "--batch", "1,256"],
    ["predict", "--gpu", "h200-sxm,a100-sxm-80gb", "--batch", "1"],
    ["gpus"],
    ["schemes"],
])
def test_tables_fit_a_100_column_terminal_without_breaking_names_or_numbers(capsys, monkeypatch, args):
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats the capture as a terminal of COLUMNS columns
    monkeypatch.setenv("COLUMNS", "100")
    assert main(args) == 0
    out = ANSI.sub("", capsys.readouterr().out)
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "…" not in out  # nothing cut short
    if args[0] == "predict":
        assert "22016×4096" in out and "3.85×" in out and "µs" in out
        assert "gate_up" in out or "--model" not in args
    if args[0] == "gpus":
        assert "a100-pcie-40gb" in out and "1,979" in out


def test_predict_named_kernels_on_a_gpu_never_calibrated(capsys, tmp_path):
    csv = tmp_path / "k.csv"
    code, out, err = run(capsys, "predict", "--tier", "kernel", "--kernel", "cublas_bf16,trtllm_wo_int4",
                         "--kernel", "wg_w4a16", "--gpu", "a100-sxm-80gb", "-M", "1,256", "--csv", str(csv))
    assert code == 0, err
    df = pd.read_csv(csv)
    assert set(df["kernel"]) == {"cublas_bf16", "trtllm_wo_int4", "wg_w4a16"} and len(df) == 6
    lib = df[df["kernel"] != "wg_w4a16"]
    assert lib["time_kernel_s"].gt(0).all() and set(lib["kernel_terms_source"]) == {"transferred"}
    assert (df.loc[df["kernel"] == "cublas_bf16", "speedup"] == 1.0).all()
    w4 = df[df["kernel"] == "trtllm_wo_int4"].set_index("M")
    assert w4.at[1, "speedup"] > 1.5 and w4.at[1, "speedup"] > w4.at[256, "speedup"]
    wg = df[df["kernel"] == "wg_w4a16"]  # wgmma runs on sm_90 only: said, not predicted
    assert wg["time_kernel_s"].isna().all() and wg["kernel_params_source"].str.contains("needs sm_90").all()
    assert "wg_w4a16 needs sm_90" in out


@pytest.mark.parametrize("args, message", [
    (["--tier", "kernel", "--kernel", "nope"], "unknown kernel 'nope' for --kernel; modeled kernels: "),
    (["--kernel", "cublas_bf16"], "--kernel needs --tier kernel"),
    (["--tier", "kernel", "--kernel", "cublas_bf16", "--scheme", "bf16"], "without --scheme and --rollup"),
])
def test_predict_named_kernels_refusals(capsys, args, message):
    code, out, err = run(capsys, "predict", *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
