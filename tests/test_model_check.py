"""`workbench model-check`, `model-fit` and `predict --tier kernel` on the shipped data: the kernel tier's numbers
reach the exports, held-out files are predicted with the shipped parameters only, and bad input gets one line and
exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.kernel_model import load_params
from workbench.analysis.kernel_tier import params_path
from workbench.interfaces.cli import main

ROOT = Path(__file__).resolve().parents[1]
COLD = ROOT / "data" / "measurements" / "h200-sxm" / "sweep-cold.parquet"


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_model_check_reports_every_view_and_tier(capsys, tmp_path):
    code, out, err = run(capsys, "model-check", "--json")
    assert code == 0, err
    rows = json.loads(out)
    views = {(r["view"], r["tier"]) for r in rows if r["group"] == "all"}
    assert {("in sample", t) for t in ("datasheet", "calibrated", "floor", "kernel")} <= views
    assert ("LOSO", "kernel") in views
    loso = next(r for r in rows if r["view"] == "LOSO" and r["group"] == "all")
    insample = next(r for r in rows if r["view"] == "in sample" and r["tier"] == "kernel" and r["group"] == "all")
    roof = next(r for r in rows if r["view"] == "in sample" and r["tier"] == "floor" and r["group"] == "all")
    # out of sample is never better than in sample by more than noise, and both beat the pure roofline
    assert loso["median_abs"] >= insample["median_abs"] - 0.005
    assert loso["median_abs"] < roof["median_abs"] / 2
    assert loso["n"] == insample["n"] > 100


def test_holdout_is_predicted_with_the_shipped_parameters(capsys, tmp_path):
    part = pd.read_parquet(COLD)
    held = tmp_path / "held.parquet"
    part[(part["N"] == 4096) & (part["K"] == 4096)].to_parquet(held)
    csv = tmp_path / "points.csv"
    code, out, err = run(capsys, "model-check", "--holdout", held, "--csv", csv)
    assert code == 0, err
    assert "holdout" in out and "Crossover" in out
    pts = pd.read_csv(csv)
    h = pts[pts["view"] == "holdout"]
    assert set(zip(h["N"], h["K"], strict=True)) == {(4096, 4096)}
    assert np.isfinite(h["time_kernel_s"]).all()


def test_bad_inputs_one_line_exit_2(capsys, tmp_path):
    for args in (("model-check", "--holdout", tmp_path / "missing.parquet"),
                 ("model-check", "--csv", tmp_path / "x.txt"),
                 ("model-check", "--data-dir", tmp_path / "nowhere"),
                 ("model-fit", "--out", tmp_path / "p.txt")):
        code, out, err = run(capsys, *args)
        assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), (args, err)
    assert list(tmp_path.iterdir()) == []


def test_model_fit_checks_its_output_before_fitting(capsys, tmp_path):
    """An --out it cannot write: one line before the fit (not a table, a notice and then the error)."""
    (tmp_path / "file").write_text("x")
    code, out, err = run(capsys, "model-fit", "--out", tmp_path / "file" / "params.json")
    assert code == 2 and out == "" and err.count("\n") == 1 and "not a writable folder" in err, err


def test_model_fit_writes_a_table_the_tier_reads(capsys, tmp_path):
    out = tmp_path / "model" / "params.json"
    code, _, err = run(capsys, "model-fit", "--out", out)
    assert code == 0 and f"to {out}" in err
    table = load_params(out)
    shipped = load_params(params_path())
    assert set(table.kernels) == set(shipped.kernels) and len(table.kernels) >= 25
    assert table.provenance["gpus"] == ["h200-sxm"]
    assert "left out" in err and "h100-sxm" in err  # measured, never calibrated: it checks the fit, never enters it


def test_a_gpu_without_calibration_is_held_out_of_every_fit(capsys, tmp_path):
    code, out, err = run(capsys, "model-check", "--json")
    assert code == 0, err
    rows = json.loads(out)
    held = [r for r in rows if r["view"] == "GPU held out"]
    assert held and {r["gpu"] for r in held} == {"h100-sxm"}
    assert {r["gpu"] for r in rows if r["view"] in ("in sample", "LOSO")} == {"h200-sxm"}
    kernel = next(r for r in held if r["tier"] == "kernel" and r["group"] == "all")
    datasheet = next(r for r in held if r["tier"] == "datasheet" and r["group"] == "all")
    assert kernel["n"] == datasheet["n"] > 500 and kernel["median_abs"] < datasheet["median_abs"] / 2
    # the roofline tiers that need a calibration have nothing to say about it
    assert next(r for r in held if r["tier"] == "calibrated" and r["group"] == "all")["n"] == 0


def test_without_the_uncalibrated_gpu_the_h200_views_do_not_change(capsys, tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(ROOT / "data" / "calibration", data / "calibration")
    shutil.copytree(ROOT / "data" / "measurements" / "h200-sxm", data / "measurements" / "h200-sxm")
    code, alone, err = run(capsys, "model-check", "--json", "--data-dir", data)
    assert code == 0, err
    code, both, err = run(capsys, "model-check", "--json")
    assert code == 0, err
    mine = [r for r in json.loads(both) if r["view"] != "GPU held out"]
    assert mine == json.loads(alone)


def test_predict_kernel_tier_names_the_kernel_and_its_terms(capsys, tmp_path):
    path = tmp_path / "k.csv"
    code, out, err = run(capsys, "predict", "--tier", "kernel", "--scheme", "w4a16", "--scheme", "bf16",
                         "--batch", "1,128", "--shape", "22016x4096", "--csv", path)
    assert code == 0, err
    df = pd.read_csv(path)
    assert df["kernel_predicted"].notna().all() and (df["time_kernel_s"] > 0).all()
    parts = df[["attr_fixed_s", "attr_fixup_s", "attr_memory_s", "attr_alu_s", "attr_tensor_s"]].sum(axis=1)
    assert np.allclose(parts, df["time_kernel_s"])
    assert (df["time_kernel_s"] >= df["time_calibrated_s"] * 0.9).all()  # never far below the speed of light
    code, _, err = run(capsys, "predict", "--tier", "kernel", "--model", "llama-2-7b", "--rollup")
    assert code == 2 and "kernel tier per layer" in err


def test_a_second_calibrated_gpu_is_fitted_and_left_out_in_turn(capsys, tmp_path):
    """With a calibration of the h100 (a test double: the h200's ceilings under the h100's key), its rows join the
    fits, and the view "GPU left out" predicts each GPU with parameters fitted on the other's rows alone."""
    import shutil

    data = tmp_path / "data"
    (data / "calibration").mkdir(parents=True)
    for src in (ROOT / "data" / "calibration").glob("*.json"):
        shutil.copy(src, data / "calibration" / src.name)
        doc = json.loads(src.read_text())
        doc["gpu_key"] = "h100-sxm"
        (data / "calibration" / "h100-sxm-test.json").write_text(json.dumps(doc))
    for gpu in ("h200-sxm", "h100-sxm"):
        (data / "measurements" / gpu).mkdir(parents=True)
        shutil.copy(ROOT / "data" / "measurements" / gpu / "sweep-cold.parquet", data / "measurements" / gpu)
    code, out, err = run(capsys, "model-check", "--json", "--data-dir", data)
    assert code == 0, err
    rows = json.loads(out)
    assert not [r for r in rows if r["view"] == "GPU held out"]
    left = {r["gpu"]: r for r in rows if r["view"] == "GPU left out" and r["group"] == "all"}
    loso = {r["gpu"]: r for r in rows if r["view"] == "LOSO" and r["group"] == "all"}
    assert set(left) == set(loso) == {"h100-sxm", "h200-sxm"}
    assert {r["tier"] for r in rows if r["view"] == "GPU left out"} == {"kernel"}
    for gpu, r in left.items():
        assert r["n"] == loso[gpu]["n"] > 100 and 0 < r["median_abs"] < 0.5


def test_a_point_whose_fastest_kernel_ran_throttled_is_marked():
    """The next unthrottled kernel stands for the point, and the speedup built on it says so (the W4A16 / BF16
    table of the H100 read 0.09x at 22016x4096, M = 128, from tinygemm, because wg_w4a16 and tc_w4a16 ran throttled)."""
    from workbench.analysis.model_check import speedup_table, throttled_best

    rows = pd.DataFrame({"gpu_key": "g", "scheme": ["w4a16", "w4a16", "bf16", "w4a16", "bf16", "bf16"],
                         "kernel": ["fast", "slow", "cublas", "fast", "cublas", "moe"],
                         "N": 64, "K": 64, "M": [1, 1, 1, 2, 2, 2], "mode": "cold",
                         "time_median_s": [1e-6, 9e-6, 3e-6, 1e-6, 3e-6, 1e-7],
                         "throttled": [True, False, False, False, False, True], "ref_error_rel": 1e-4,
                         "experts": [1, 1, 1, 1, 1, 8]})
    marked = throttled_best(rows)
    assert marked.to_dict("records") == [{"gpu_key": "g", "scheme": "w4a16", "N": 64, "K": 64, "M": 1}]
    pts = pd.DataFrame({"view": "in sample", "gpu_key": "g", "scheme": ["w4a16", "bf16", "w4a16", "bf16"],
                        "N": 64, "K": 64, "M": [1, 1, 2, 2], "time_measured_s": [9e-6, 3e-6, 1e-6, 3e-6],
                        "time_kernel_s": [8e-6, 3e-6, 1e-6, 3e-6], "best_throttled": [True, False, False, False]})
    sp = speedup_table(pts).set_index("M")
    assert bool(sp.at[1, "best_throttled"]) and not bool(sp.at[2, "best_throttled"])
    assert sp.at[1, "speedup_measured"] == pytest.approx(1 / 3) and sp.at[2, "speedup_measured"] == pytest.approx(3)


def test_a_point_flagged_for_the_power_cap_alone_at_full_clock_is_fitted():
    """fit_rows keeps a throttled point whose only reason is sw_power_cap and whose lowest SM clock stayed within 3 %
    of the calibration clock; another reason, a lower clock, or no calibration clock keeps it out."""
    from workbench.analysis.kernel_tier import fit_rows, held_clock

    cal = 1.98e9
    rows = pd.DataFrame({"gpu_key": "g", "kernel": "k", "N": 64, "K": 64, "M": range(1, 8), "mode": "cold",
                         "time_median_s": 1e-6, "ref_error_rel": 1e-4,
                         "throttled": [False, True, True, True, True, True, True],
                         "clock_reasons": ["", "sw_power_cap", "sw_power_cap", "sw_power_cap,hw_slowdown",
                                           "sw_thermal_slowdown", "sw_power_cap", ""],
                         "sm_clock_min_hz": [cal, 0.97 * cal, 0.96 * cal, cal, cal, cal, 0.5 * cal],
                         "calibration_sm_clock_hz": [cal, cal, cal, cal, cal, float("nan"), cal]})
    assert held_clock(rows).tolist() == [False, True, False, False, False, False, False]
    assert fit_rows(rows)["M"].tolist() == [1, 2]
    assert fit_rows(rows, keep_throttled=True)["M"].tolist() == list(range(1, 8))
    assert not held_clock(rows.drop(columns="clock_reasons")).any()  # files without NVML columns: flag as recorded
