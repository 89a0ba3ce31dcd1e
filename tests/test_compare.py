"""workbench.analysis.compare and workbench.analysis.speedup against hand-computed numbers (H200 datasheet 4.8 TB/s;
the fixture calibration reads 4.4 TB/s, bf16/fp16 mma 640 TFLOP/s at 1.98 GHz, graph launch floor 2 µs)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests.compare_fixtures import CAL_CLOCK, GPU, calibration, frame, point
from workbench.analysis.compare import (
    ALL_COLUMNS,
    best_per_scheme,
    compare_points,
    error_summary,
    latest_points,
    rollup_measured,
)
from workbench.analysis.speedup import crossovers, first_at_or_below_one, pair_speedups, speedups
from workbench.storage.schema import COMPARISON_COLUMNS

BF16_BYTES_M1 = 4096 * 4096 * 2 + 4096 * 2 + 4096 * 2  # weights + activations + outputs = 33_570_816
W4_BYTES_M1 = 4096 * 4096 // 2 + 4096 * 32 * (2 + 0.5) + 4096 * 2 + 4096 * 2  # + fp16 scale, 4-bit zero per group
CAL = {GPU: calibration()}


def test_columns_are_the_contract_plus_extras():
    cmp = compare_points(frame([point("cublas_bf16", "bf16", 1, 14e-6)]), calibrations=CAL)
    assert list(cmp.columns)[: len(COMPARISON_COLUMNS)] == list(COMPARISON_COLUMNS)
    assert list(cmp.columns) == list(ALL_COLUMNS)
    assert str(cmp["M"].dtype) == "int64" and str(cmp["throttled"].dtype) == "boolean"


def test_ratio_error_and_achieved_rates_by_hand():
    cmp = compare_points(frame([point("cublas_bf16", "bf16", 1, 14e-6, spread=0.01)]), calibrations=CAL)
    r = cmp.iloc[0]
    assert r["bytes"] == BF16_BYTES_M1 and r["flops"] == 2 * 4096 * 4096
    t_sheet = BF16_BYTES_M1 / 4.8e12
    t_cal = BF16_BYTES_M1 / 4.4e12
    assert r["time_datasheet_s"] == pytest.approx(t_sheet, rel=1e-12)
    assert r["time_calibrated_s"] == pytest.approx(t_cal, rel=1e-12)
    assert r["time_floor_s"] == pytest.approx(t_cal + 2e-6, rel=1e-12)
    assert r["ratio_datasheet"] == pytest.approx(t_sheet / 14e-6, rel=1e-12)
    assert r["error_datasheet"] == pytest.approx(t_sheet / 14e-6 - 1, rel=1e-12)
    assert r["ratio_floor"] == pytest.approx((t_cal + 2e-6) / 14e-6, rel=1e-12)
    assert r["achieved_bytes_per_s"] == pytest.approx(BF16_BYTES_M1 / 14e-6, rel=1e-12)
    assert r["achieved_flops_per_s"] == pytest.approx(2 * 4096 * 4096 / 14e-6, rel=1e-12)
    assert r["roofline_fraction"] == pytest.approx(t_cal / 14e-6, rel=1e-12)
    assert r["bandwidth_fraction"] == pytest.approx(BF16_BYTES_M1 / 14e-6 / 4.4e12, rel=1e-12)
    assert r["bandwidth_ceiling_source"] == "calibrated"
    assert r["bound_datasheet"] == "memory" and r["bound_calibrated"] == "memory"
    assert r["time_p10_s"] == pytest.approx(14e-6 * 0.99) and r["time_p90_s"] == pytest.approx(14e-6 * 1.01)


def test_without_calibration_calibrated_tiers_are_nan_and_fraction_uses_datasheet():
    cmp = compare_points(frame([point("cublas_bf16", "bf16", 1, 14e-6)]))
    r = cmp.iloc[0]
    assert math.isnan(r["time_calibrated_s"]) and math.isnan(r["ratio_floor"])
    assert r["roofline_fraction"] == pytest.approx(BF16_BYTES_M1 / 4.8e12 / 14e-6, rel=1e-12)
    assert r["bandwidth_ceiling_source"] == "datasheet"


def test_calibrated_compute_ceiling_scales_with_the_rows_sm_clock():
    rows = [point("tc_bf16", "bf16", 256, 30e-6), point("tc_bf16", "bf16", 256, 60e-6, clock=CAL_CLOCK / 2, N=4097)]
    cmp = compare_points(frame(rows), calibrations=CAL)
    flops_full = 2 * 256 * 4096 * 4096
    assert cmp.iloc[0]["bound_calibrated"] == "compute"
    assert cmp.iloc[0]["time_calibrated_s"] == pytest.approx(flops_full / 640e12, rel=1e-12)
    assert cmp.iloc[1]["time_calibrated_s"] == pytest.approx(2 * 256 * 4097 * 4096 / 320e12, rel=1e-12)
    # the datasheet tier is not clock-scaled
    assert cmp.iloc[0]["time_datasheet_s"] == pytest.approx(max(flops_full / 989.4e12, cmp.iloc[0]["bytes"] / 4.8e12))


def test_rows_outside_the_catalogue_are_dropped():
    cmp = compare_points(frame([point("k", "bf16", 1, 1e-5, gpu="")]), calibrations=CAL)
    assert cmp.empty and list(cmp.columns) == list(ALL_COLUMNS)


def test_error_summary_by_hand_with_throttled_excluded_and_counted():
    cmp = pd.DataFrame(
        {
            "gpu_key": [GPU] * 5,
            "error_datasheet": [-0.1, 0.2, -0.3, 0.4, 5.0],
            "error_calibrated": [np.nan] * 5,
            "error_floor": [0.0, 0.0, 0.0, 0.0, 0.0],
            "throttled": pd.array([False, False, None, False, True], dtype="boolean"),
        }
    )
    s = error_summary(cmp).set_index("tier")
    sheet = s.loc["datasheet"]
    assert sheet["n"] == 4 and sheet["n_throttled"] == 1
    assert sheet["median_abs_error"] == pytest.approx(0.25)
    assert sheet["p90_abs_error"] == pytest.approx(0.37)  # linear interpolation: 0.3 + 0.7 * 0.1
    assert sheet["max_abs_error"] == pytest.approx(0.4)
    assert sheet["median_error"] == pytest.approx(0.05)
    assert s.loc["calibrated"]["n"] == 0 and math.isnan(s.loc["calibrated"]["median_abs_error"])


def test_latest_and_best_kernel_per_scheme():
    rows = [
        point("w4a16_gemv", "w4a16", 1, 9e-6, timestamp="2026-12-01T00:00:00Z"),
        point("w4a16_gemv", "w4a16", 1, 5e-6, timestamp="2026-12-02T00:00:00Z"),  # newer: replaces the 9 µs
        point("tc_w4a16", "w4a16", 1, 6e-6),
        point("tc_w4a16", "w4a16", 64, 20e-6),
        point("w4a16_gemv", "w4a16", 64, 40e-6),
    ]
    cmp = compare_points(frame(rows), calibrations=CAL)
    assert len(latest_points(cmp)) == 4
    best = best_per_scheme(cmp).set_index("M")
    assert best.loc[1, "kernel"] == "w4a16_gemv" and best.loc[1, "time_measured_s"] == pytest.approx(5e-6)
    assert best.loc[64, "kernel"] == "tc_w4a16"


def _pair_rows(spread: float = 0.01) -> list[dict]:
    rows = []
    for m, tb, tw in [(1, 13e-6, 4e-6), (4, 13.2e-6, 4.4e-6), (32, 14e-6, 9e-6), (128, 20e-6, 25e-6)]:
        rows.append(point("cublas_bf16", "bf16", m, tb, spread=spread, role="peer"))
        rows.append(point("w4a16_gemv", "w4a16", m, tw, spread=spread))
    return rows


def test_speedup_measured_interval_ideal_and_predicted_by_hand():
    cmp = compare_points(frame(_pair_rows()), calibrations=CAL)
    sp = speedups(cmp)  # default baseline: the cublas_bf16 kernel
    r = sp[(sp["kernel"] == "w4a16_gemv") & (sp["M"] == 1)].iloc[0]
    assert r["speedup_measured"] == pytest.approx(13 / 4)
    assert r["speedup_low"] == pytest.approx(13 * 0.99 / (4 * 1.01))
    assert r["speedup_high"] == pytest.approx(13 * 1.01 / (4 * 0.99))
    assert r["speedup_ideal"] == pytest.approx(BF16_BYTES_M1 / W4_BYTES_M1)  # 3.844
    floor_bf16 = BF16_BYTES_M1 / 4.4e12 + 2e-6
    floor_w4 = W4_BYTES_M1 / 4.4e12 + 2e-6
    assert r["predicted_tier"] == "floor"
    assert r["speedup_predicted"] == pytest.approx(floor_bf16 / floor_w4, rel=1e-12)
    assert r["speedup_datasheet"] == pytest.approx(BF16_BYTES_M1 / W4_BYTES_M1, rel=1e-12)
    base = sp[sp["kernel"] == "cublas_bf16"]
    assert np.allclose(base["speedup_measured"], 1.0)


def test_speedup_over_a_scheme_baseline_uses_our_fastest_kernel():
    rows = _pair_rows() + [point("bf16_gemv", "bf16", 1, 12e-6), point("tc_bf16", "bf16", 1, 16e-6)]
    cmp = compare_points(frame(rows), calibrations=CAL)
    sp = speedups(cmp, "bf16")
    r = sp[(sp["kernel"] == "w4a16_gemv") & (sp["M"] == 1)].iloc[0]
    assert r["baseline_kernel"] == "bf16_gemv" and r["speedup_measured"] == pytest.approx(3.0)
    assert set(sp["M"]) == {1}  # our bf16 kernels were measured at M = 1 only


def test_pair_speedups_pick_the_fastest_kernel_of_each_scheme():
    rows = _pair_rows() + [point("gemv_w4_ref", "w4a16", 1, 2e-6, role="reference")]
    cmp = compare_points(frame(rows), calibrations=CAL)
    sp = pair_speedups(cmp, "w4a16", "bf16").set_index("M")
    assert sp.loc[1, "kernel"] == "gemv_w4_ref" and sp.loc[1, "speedup_measured"] == pytest.approx(6.5)
    assert sp.loc[4, "kernel"] == "w4a16_gemv"
    ours = pair_speedups(cmp, "w4a16", "bf16", ours_only=True)
    assert ours.empty  # the only bf16 kernel measured is a peer


def test_first_at_or_below_one_ties_at_exactly_one_and_ignores_nan():
    assert first_at_or_below_one(np.array([1, 2, 4]), np.array([1.5, 1.0, 0.5])) == 2
    assert first_at_or_below_one(np.array([4, 1, 2]), np.array([0.5, 1.5, np.nan])) == 4
    assert math.isnan(first_at_or_below_one(np.array([1, 2]), np.array([1.2, 1.1])))


def test_crossover_with_ties_in_the_noise_by_hand():
    table = pd.DataFrame(
        {
            "gpu_key": GPU, "N": 4096, "K": 4096, "mode": "cold", "side": "w4a16", "kernel": "k", "scheme": "w4a16",
            "baseline": "bf16", "baseline_kernel": "b", "M": [1, 2, 4, 8],
            "speedup_measured": [2.0, 1.05, 0.99, 0.8],
            "speedup_low": [1.9, 0.98, 0.90, 0.75],  # M=2 and M=4 straddle 1: ties
            "speedup_high": [2.1, 1.12, 1.08, 0.85],
            "speedup_predicted": [3.0, 2.0, 1.5, 1.0],
            "throttled": False,
        }
    )  # fmt: skip
    c = crossovers(table).iloc[0]
    assert (c["crossover_low"], c["crossover_measured"], c["crossover_high"]) == (2, 4, 8)
    assert c["crossover_predicted"] == 8  # exactly 1.0 counts as "no longer faster"
    assert c["max_batch"] == 8 and c["n_batches"] == 4


def test_crossover_never_reached_is_nan_and_the_baseline_is_left_out():
    cmp = compare_points(frame(_pair_rows()), calibrations=CAL)
    c = crossovers(speedups(cmp))
    assert list(c["side"]) == ["w4a16_gemv"]
    r = c.iloc[0]
    assert r["crossover_measured"] == 128 and r["crossover_low"] == 128 and r["crossover_high"] == 128
    assert math.isnan(r["crossover_predicted"])  # the model keeps W4A16 ahead up to 128 here


def test_rollup_measured_by_hand_for_a_dense_model():
    layers = {"qkv": (12288, 4096), "o": (4096, 4096), "gate_up": (22016, 4096), "down": (4096, 11008),
              "lm_head": (32000, 4096)}  # fmt: skip
    times = {"qkv": 30e-6, "o": 13e-6, "gate_up": 46e-6, "down": 28e-6, "lm_head": 65e-6}
    rows = [point("cublas_bf16", "bf16", 1, times[n], N=nk[0], K=nk[1], role="peer") for n, nk in layers.items()]
    rows.append(point("bf16_gemv", "bf16", 1, 12e-6))  # faster on o: the roll-up takes it
    cmp = compare_points(frame(rows), calibrations=CAL)
    r = rollup_measured(cmp, "llama-2-7b", calibrations=CAL).iloc[0]
    step = 32 * (30e-6 + 12e-6 + 46e-6 + 28e-6) + 65e-6
    assert r["n_layers"] == 5 and r["n_layers_measured"] == 5
    assert r["time_step_measured_s"] == pytest.approx(step, rel=1e-12)
    assert r["tokens_per_s_measured"] == pytest.approx(1 / step, rel=1e-12)
    assert "o=bf16_gemv" in r["kernels"]
    # floor tier by hand: every layer memory bound at M = 1, (N·K·2 + K·2 + N·2) / 4.4e12 + 2e-6 each
    floor = [(n * k * 2 + k * 2 + n * 2) / 4.4e12 + 2e-6 for n, k in layers.values()]
    expected = 32 * sum(floor[:4]) + floor[4]
    assert r["time_step_predicted_s"] == pytest.approx(expected, rel=1e-12) and r["predicted_tier"] == "floor"
    assert r["ratio_predicted"] == pytest.approx(expected / step, rel=1e-12)


def test_rollup_with_a_missing_layer_is_nan_but_keeps_the_partial_sums():
    rows = [point("cublas_bf16", "bf16", 4, 13e-6, role="peer")]  # only o (4096x4096) measured, at M = 4
    cmp = compare_points(frame(rows), calibrations=CAL)
    r = rollup_measured(cmp, "llama-2-7b", calibrations=CAL).iloc[0]
    assert r["M"] == 4 and r["n_layers_measured"] == 1
    assert math.isnan(r["time_step_measured_s"]) and math.isnan(r["tokens_per_s_measured"])
    assert r["time_measured_layers_s"] == pytest.approx(32 * 13e-6)
    def floor(n, k):  # by hand at M = 4, memory bound: (N·K·2 + 4·K·2 + 4·N·2) / 4.4e12 + 2e-6
        return (n * k * 2 + 4 * k * 2 + 4 * n * 2) / 4.4e12 + 2e-6

    step = 32 * (floor(12288, 4096) + floor(4096, 4096) + floor(22016, 4096) + floor(4096, 11008)) + floor(32000, 4096)
    assert r["time_step_predicted_s"] == pytest.approx(step, rel=1e-12)
    assert r["tokens_per_s_predicted"] == pytest.approx(4 / step, rel=1e-12)
    assert r["time_predicted_measured_layers_s"] == pytest.approx(32 * floor(4096, 4096), rel=1e-12)
