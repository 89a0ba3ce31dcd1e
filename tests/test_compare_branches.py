"""workbench.analysis.compare branches the main tests leave open (issue 21), with hand-worked expectations: group sizes,
bandwidth-ceiling fallbacks, selection ties, error summaries over several keys, roll-up filters and MoE layers.

Bytes at N = K = 4096, M = 1: bf16 33_570_816; w4a16 G=128 8_732_672 (G=64: + 327_680 more metadata).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from models.hardware import parse_calibration
from tests.compare_fixtures import GPU, calibration, frame, point
from workbench.analysis.compare import (
    ALL_COLUMNS,
    best_per_scheme,
    compare_points,
    empty_comparison,
    error_summary,
    latest_points,
    model_calibrations,
    rollup_measured,
    throttled_mask,
)

CAL = {GPU: calibration()}  # read 4.4e12 B/s, floor 2e-6 s, bf16 mma 640e12 at 1.98e9 Hz


def test_missing_columns_message():
    with pytest.raises(InputError, match=r"^measurements lack column\(s\) kernel, time_median_s; expected the "
                                         r"measurement schema$"):
        compare_points(pd.DataFrame({"gpu_key": [GPU], "scheme": ["bf16"], "M": [1], "N": [1], "K": [1]}))


def test_group_size_of_the_row_is_used_and_zero_means_default():
    rows = [point("w4a16_gemv", "w4a16", 1, 4e-6, group_size=64), point("w4a16_gemv", "w4a16", 2, 4e-6, group_size=0)]
    cmp = compare_points(frame(rows), calibrations=CAL)
    # G=64: 8_388_608 + 4096·64·2.5 + 8192 + 8192 = 9_060_352
    # G=0 → the default 128, at M=2: 8_388_608 + 327_680 + 2·8192 + 2·8192 = 8_749_056
    assert list(cmp["bytes"]) == [9_060_352, 8_749_056]


def test_bandwidth_ceiling_sources():
    no_read = calibration()
    del no_read["ceilings"]["read_bytes_per_s"]
    rows = [point("cublas_bf16", "bf16", 1, 14e-6), point("cublas_bf16", "bf16", 1, 20e-6, gpu="a100-sxm-80gb")]
    cmp = compare_points(frame(rows), calibrations={GPU: no_read}).set_index("gpu_key")
    # no calibrated read stream: datasheet 4.8e12 (H200) and 2.039e12 (A100, no calibration at all)
    assert cmp.loc[GPU, "bandwidth_ceiling_source"] == "datasheet"
    assert cmp.loc[GPU, "bandwidth_ceiling_bytes_per_s"] == 4.8e12
    assert cmp.loc[GPU, "bandwidth_fraction"] == pytest.approx(33_570_816 / 14e-6 / 4.8e12, rel=1e-12)
    assert cmp.loc["a100-sxm-80gb", "bandwidth_ceiling_bytes_per_s"] == 2.039e12
    assert cmp.loc["a100-sxm-80gb", "bandwidth_fraction"] == pytest.approx(33_570_816 / 20e-6 / 2.039e12, rel=1e-12)
    # and the roofline fraction takes the datasheet tier where the calibrated one is NaN
    assert cmp.loc["a100-sxm-80gb", "roofline_fraction"] == pytest.approx(33_570_816 / 2.039e12 / 20e-6, rel=1e-12)


def test_calibration_objects_and_store_dicts_are_both_accepted():
    parsed = parse_calibration(calibration())
    cals = model_calibrations({GPU: calibration(), "other": parsed})
    assert cals[GPU].bandwidth == 4.4e12 and cals["other"] is parsed and model_calibrations(None) == {}
    a = compare_points(frame([point("cublas_bf16", "bf16", 1, 14e-6)]), calibrations={GPU: parsed})
    b = compare_points(frame([point("cublas_bf16", "bf16", 1, 14e-6)]), calibrations=CAL)
    assert a["time_floor_s"].iloc[0] == b["time_floor_s"].iloc[0] == pytest.approx(33_570_816 / 4.4e12 + 2e-6)


def test_typed_columns_and_passthrough_fields():
    cmp = compare_points(frame([point("bf16_gemv", "bf16", 1, 14e-6, layer="o", backend="nvrtc", spread=0.02)]),
                         calibrations=CAL)
    r = cmp.iloc[0]
    assert (r["layer"], r["backend"], r["role"], r["gpu_name"], r["mode"]) == ("o", "nvrtc", "optimized",
                                                                              "NVIDIA H200", "cold")
    assert r["spread_rel"] == pytest.approx(0.04) and r["ref_error_rel"] == 1e-4
    assert r["error_floor"] == pytest.approx((33_570_816 / 4.4e12 + 2e-6) / 14e-6 - 1, rel=1e-12)
    assert r["error_calibrated"] == pytest.approx(33_570_816 / 4.4e12 / 14e-6 - 1, rel=1e-12)
    assert r["ratio_calibrated"] == pytest.approx(33_570_816 / 4.4e12 / 14e-6, rel=1e-12)
    assert r["intensity"] == pytest.approx(33_554_432 / 33_570_816, rel=1e-12)
    assert {c: str(cmp[c].dtype) for c in ("layer", "time_floor_s", "throttled")} == {
        "layer": "string", "time_floor_s": "float64", "throttled": "boolean"}
    empty = empty_comparison()
    assert empty.empty and list(empty.columns) == list(ALL_COLUMNS)


def test_throttled_mask_without_the_column_and_with_missing_values():
    assert list(throttled_mask(pd.DataFrame({"x": [1, 2]}))) == [False, False]
    assert list(throttled_mask(pd.DataFrame({"throttled": pd.array([True, None, False], dtype="boolean")}))) == [
        True, False, False]


def test_best_per_scheme_ties_keep_the_first_kernel_by_name_and_filter_schemes():
    rows = [point("zeta", "w4a16", 1, 5e-6), point("alpha", "w4a16", 1, 5e-6), point("mid", "w4a16", 1, 6e-6),
            point("bf", "bf16", 1, 9e-6), point("alpha", "w4a16", 4, 7e-6), point("zeta", "w4a16", 4, 6e-6)]
    cmp = compare_points(frame(rows), calibrations=CAL)
    best = best_per_scheme(cmp)
    assert list(zip(best["scheme"], best["M"], best["kernel"], strict=True)) == [
        ("bf16", 1, "bf"), ("w4a16", 1, "alpha"), ("w4a16", 4, "zeta")]
    assert list(best_per_scheme(cmp, ["bf16"])["kernel"]) == ["bf"]
    assert best_per_scheme(cmp, ["fp8"]).empty and latest_points(cmp.iloc[0:0]).empty


def test_latest_points_keeps_one_row_per_point_key():
    rows = [point("k", "bf16", 1, 9e-6, timestamp="2026-12-02T00:00:00Z"),
            point("k", "bf16", 1, 7e-6, timestamp="2026-12-01T00:00:00Z"),
            point("k", "bf16", 1, 8e-6, timestamp="2026-12-01T00:00:00Z", mode="hot"),
            point("k", "bf16", 1, 6e-6, timestamp="2026-12-01T00:00:00Z", N=8192)]
    latest = latest_points(compare_points(frame(rows), calibrations=CAL))
    assert sorted(latest["time_measured_s"]) == [6e-6, 8e-6, 9e-6]


def test_error_summary_over_two_keys_and_without_keys():
    cmp = pd.DataFrame({
        "gpu_key": [GPU, GPU, GPU, "b200"], "scheme": ["bf16", "bf16", "w4a16", "bf16"],
        "error_datasheet": [-0.5, 0.1, 0.3, -0.2], "error_calibrated": [0.2, np.nan, np.nan, 0.4],
        "error_floor": [0.0, 0.0, 0.0, 0.0],
        "throttled": pd.array([False, False, True, None], dtype="boolean"),
    })  # fmt: skip
    s = error_summary(cmp, by=("gpu_key", "scheme"))
    sheet = s[s.tier == "datasheet"].set_index(["gpu_key", "scheme"])
    assert sheet.loc[(GPU, "bf16"), "n"] == 2 and sheet.loc[(GPU, "bf16"), "median_abs_error"] == pytest.approx(0.3)
    assert sheet.loc[(GPU, "bf16"), "median_error"] == pytest.approx(-0.2)  # (−0.5 + 0.1) / 2
    assert sheet.loc[(GPU, "bf16"), "max_abs_error"] == pytest.approx(0.5)
    assert sheet.loc[(GPU, "bf16"), "p90_abs_error"] == pytest.approx(0.46)  # 0.1 + 0.9·(0.5 − 0.1)
    assert sheet.loc[(GPU, "w4a16"), "n"] == 0 and sheet.loc[(GPU, "w4a16"), "n_throttled"] == 1
    assert math.isnan(sheet.loc[(GPU, "w4a16"), "max_abs_error"])
    cal = s[s.tier == "calibrated"].set_index(["gpu_key", "scheme"])
    assert cal.loc[(GPU, "bf16"), "n"] == 1 and cal.loc[("b200", "bf16"), "median_error"] == pytest.approx(0.4)
    whole = error_summary(cmp, by=()).set_index("tier")
    # no grouping: datasheet over the 3 unthrottled rows −0.5, 0.1, −0.2 → |·| median 0.2, signed median −0.2
    assert whole.loc["datasheet", "n"] == 3 and whole.loc["datasheet", "n_throttled"] == 1
    assert whole.loc["datasheet", "median_abs_error"] == pytest.approx(0.2)
    assert whole.loc["datasheet", "median_error"] == pytest.approx(-0.2)
    assert list(whole.index) == ["datasheet", "calibrated", "floor"]
    empty = error_summary(cmp.iloc[0:0], by=("gpu_key",))
    assert empty.empty and list(empty.columns) == ["gpu_key", "tier", "n", "n_throttled", "median_abs_error",
                                                   "p90_abs_error", "max_abs_error", "median_error"]


LLAMA = {"qkv": (12288, 4096), "o": (4096, 4096), "gate_up": (22016, 4096), "down": (4096, 11008),
         "lm_head": (32000, 4096)}  # fmt: skip


def _llama_rows(m, t, **kw):
    return [point("cublas_bf16", "bf16", m, t, N=n, K=k, role="peer", **kw) for n, k in LLAMA.values()]


def test_rollup_filters_by_gpu_scheme_batch_and_mode():
    rows = (_llama_rows(1, 10e-6) + _llama_rows(4, 20e-6) + _llama_rows(1, 5e-6, mode="hot")
            + _llama_rows(1, 30e-6, gpu="h100-sxm") + [point("k", "bf16", 1, 1e-6, N=4096, K=4096 * 3)])  # off-model
    cmp = compare_points(frame(rows), calibrations=CAL)
    r = rollup_measured(cmp, "llama-2-7b", gpu_key=GPU, calibrations=CAL)
    assert list(r["M"]) == [1, 4] and set(r["gpu_key"]) == {GPU}
    # every layer 10 µs at M = 1: 4 block layers × 32 + lm_head = 129 × 10 µs
    assert r["time_step_measured_s"].iloc[0] == pytest.approx(129 * 10e-6, rel=1e-12)
    assert r["tokens_per_s_measured"].iloc[1] == pytest.approx(4 / (129 * 20e-6), rel=1e-12)
    hot = rollup_measured(cmp, "llama-2-7b", gpu_key=GPU, mode="hot", batches=[1])
    assert hot["time_step_measured_s"].iloc[0] == pytest.approx(129 * 5e-6, rel=1e-12)
    both = rollup_measured(cmp, "llama-2-7b", batches=[4, 1, 4])
    assert list(zip(both["gpu_key"], both["M"], strict=True)) == [("h100-sxm", 1), ("h100-sxm", 4), (GPU, 1),
                                                                  (GPU, 4)]
    h100 = both.iloc[0]
    assert h100["time_step_measured_s"] == pytest.approx(129 * 30e-6, rel=1e-12)
    assert h100["predicted_tier"] == "datasheet" and math.isnan(h100["time_step_floor_s"])
    assert math.isnan(both.iloc[1]["time_step_measured_s"]) and both.iloc[1]["n_layers_measured"] == 0
    assert math.isnan(both.iloc[1]["time_measured_layers_s"])
    none = rollup_measured(cmp, "llama-2-7b", schemes=["w4a16"], batches=[1], gpu_key=GPU)
    assert none.iloc[0]["n_layers_measured"] == 0 and none.iloc[0]["kernels"] == ""


def test_rollup_throttle_and_kernel_list():
    rows = _llama_rows(1, 10e-6)
    rows[1]["throttled"] = True  # the o projection
    cmp = compare_points(frame(rows), calibrations=CAL)
    r = rollup_measured(cmp, "llama-2-7b", calibrations=CAL).iloc[0]
    assert bool(r["throttled"]) is True
    assert r["kernels"] == "qkv=cublas_bf16;o=cublas_bf16;gate_up=cublas_bf16;down=cublas_bf16;lm_head=cublas_bf16"
    assert r["time_step_predicted_s"] == pytest.approx(r["time_step_floor_s"]) and r["predicted_tier"] == "floor"
    assert r["time_predicted_measured_layers_s"] == pytest.approx(r["time_step_floor_s"], rel=1e-12)


def test_rollup_moe_expert_layers_count_as_unmeasured():
    # mixtral-8x7b: qkv 6144x4096, o 4096x4096, router 8x4096 (dense), experts 28672x4096 and 4096x14336 (8 × top 2)
    dense = [(6144, 4096), (4096, 4096), (8, 4096)]
    rows = [point("cublas_bf16", "bf16", 1, 10e-6, N=n, K=k, role="peer") for n, k in dense]
    rows += [point("cublas_bf16", "bf16", 1, 10e-6, N=n, K=k, role="peer") for n, k in ((28672, 4096),
                                                                                        (4096, 14336))]
    cmp = compare_points(frame(rows), calibrations=CAL)
    r = rollup_measured(cmp, "mixtral-8x7b", calibrations=CAL).iloc[0]
    assert r["n_layers_measured"] == 3 and math.isnan(r["time_step_measured_s"])
    assert r["time_measured_layers_s"] == pytest.approx(3 * 32 * 10e-6, rel=1e-12)


# ------------------------------------------------------------------------------------------------ contracts
ROLLUP = ["model", "gpu_key", "scheme", "M", "mode", "n_layers", "n_layers_measured", "kernels",
          "time_step_measured_s", "tokens_per_s_measured", "time_step_datasheet_s", "time_step_calibrated_s",
          "time_step_floor_s", "time_step_predicted_s", "predicted_tier", "tokens_per_s_predicted", "ratio_predicted",
          "time_measured_layers_s", "time_predicted_measured_layers_s", "throttled"]  # fmt: skip


def _t(n, k, m, bw, floor=0.0):
    """By hand: a memory-bound layer, (N·K·2 + M·K·2 + M·N·2) bytes / bandwidth (+ the launch floor)."""
    return (n * k * 2 + m * k * 2 + m * n * 2) / bw + floor


def test_rollup_row_every_field_by_hand():
    rows = _llama_rows(1, 10e-6)
    cmp = compare_points(frame(rows), calibrations=CAL)
    out = rollup_measured(cmp, "llama-2-7b", calibrations=CAL)
    assert list(out.columns) == ROLLUP
    r = out.iloc[0]
    assert (r["model"], r["gpu_key"], r["scheme"], r["M"], r["mode"]) == ("llama-2-7b", GPU, "bf16", 1, "cold")
    assert bool(r["throttled"]) is False and r["n_layers"] == 5
    sheet = 32 * sum(_t(n, k, 1, 4.8e12) for n, k in list(LLAMA.values())[:4]) + _t(32000, 4096, 1, 4.8e12)
    calib = 32 * sum(_t(n, k, 1, 4.4e12) for n, k in list(LLAMA.values())[:4]) + _t(32000, 4096, 1, 4.4e12)
    assert r["time_step_datasheet_s"] == pytest.approx(sheet, rel=1e-12)
    assert r["time_step_calibrated_s"] == pytest.approx(calib, rel=1e-12)
    assert r["time_step_floor_s"] == pytest.approx(calib + 129 * 2e-6, rel=1e-12)
    none = rollup_measured(cmp, "llama-2-7b", batches=[2], calibrations=CAL).iloc[0]
    assert none["n_layers_measured"] == 0 and math.isnan(none["time_predicted_measured_layers_s"])
    empty = rollup_measured(cmp.iloc[0:0], "llama-2-7b")
    assert empty.empty and list(empty.columns) == ROLLUP


def test_rollup_predicted_moe_weights_by_hand():
    cmp = compare_points(frame([point("cublas_bf16", "bf16", 1, 10e-6, N=4096, K=4096, role="peer")]),
                         calibrations=CAL)
    r = rollup_measured(cmp, "mixtral-8x7b", calibrations=CAL).iloc[0]
    # batch 1, 8 experts top-2: 2 experts read, 1 token each → 32 × 2 instances of each expert layer
    expert = _t(28672, 4096, 1, 4.4e12, 2e-6) + _t(4096, 14336, 1, 4.4e12, 2e-6)
    dense = _t(6144, 4096, 1, 4.4e12, 2e-6) + _t(4096, 4096, 1, 4.4e12, 2e-6) + _t(8, 4096, 1, 4.4e12, 2e-6)
    want = 32 * (2 * expert + dense) + _t(32000, 4096, 1, 4.4e12, 2e-6)
    assert r["time_step_predicted_s"] == pytest.approx(want, rel=1e-12) and r["predicted_tier"] == "floor"


def test_minimal_measurement_frame_gets_neutral_columns():
    measured = pd.DataFrame({"gpu_key": [GPU], "scheme": ["w4a16"], "kernel": ["k"], "M": [1], "N": [4096],
                             "K": [4096], "time_median_s": [4e-6]})
    r = compare_points(measured, calibrations=CAL).iloc[0]
    # no group_size column: the scheme's default G=128, 8_732_672 bytes; the rest neutral
    assert r["bytes"] == 8_732_672 and r["layer"] == "" and r["backend"] == "" and pd.isna(r["throttled"])
    assert math.isnan(r["time_p10_s"]) and r["mode"] == ""


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # the model's calibrated tier at 0 B/s
def test_missing_strings_become_empty_and_bad_read_streams_fall_back():
    rows = [point("bf16_gemv", "bf16", 1, 14e-6, layer=None, backend=None)]
    zero = calibration(read=0.0)
    cmp = compare_points(frame(rows), calibrations={GPU: zero})
    assert cmp["layer"].iloc[0] == "" and cmp["backend"].iloc[0] == ""
    assert cmp["bandwidth_ceiling_source"].iloc[0] == "datasheet"  # a read stream of 0 B/s is no ceiling


def test_empty_comparison_dtypes_and_selection_columns():
    empty = empty_comparison()
    assert {c: str(empty[c].dtype) for c in ("M", "layer", "throttled", "time_floor_s")} == {
        "M": "int64", "layer": "string", "throttled": "boolean", "time_floor_s": "float64"}
    cmp = compare_points(frame([point("a", "bf16", 1, 9e-6), point("b", "bf16", 1, 8e-6)]), calibrations=CAL)
    assert list(latest_points(cmp).columns) == list(cmp.columns) == list(best_per_scheme(cmp).columns)
    assert list(best_per_scheme(cmp, ["fp8"]).columns) == list(cmp.columns)


def test_store_calibrations_are_named_by_their_gpu_key_in_errors():
    bad = calibration()
    bad["sm_clock_hz"] = 0
    with pytest.raises(InputError, match=r"^h200-sxm: sm_clock_hz must be a positive number, got 0$"):
        model_calibrations({GPU: bad})


def test_error_summary_groups_sorted_keeps_missing_keys_and_warns_not():
    import warnings

    cmp = pd.DataFrame({"gpu_key": ["z", "a", None], "error_datasheet": [0.1, 0.2, 0.3],
                        "error_calibrated": [np.nan] * 3, "error_floor": [0.0] * 3})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = error_summary(cmp)
    sheet = s[s.tier == "datasheet"]
    assert list(sheet["gpu_key"].iloc[:2]) == ["a", "z"] and pd.isna(sheet["gpu_key"].iloc[2])
    assert list(sheet["median_abs_error"]) == pytest.approx([0.2, 0.1, 0.3])
    cal = s[s.tier == "calibrated"]
    assert list(cal["n"]) == [0, 0, 0] and cal["median_abs_error"].isna().all() and cal["median_error"].isna().all()


def test_kernel_tier_columns_are_wired_through(monkeypatch):
    """compare_points hands the kernel tier (gpu, kernel, M, N, K, mode, bytes) and joins what it returns; the tier
    itself is tested by hand in test_kernel_tier_hand.py, so a fake with known numbers stands in for it here."""
    seen = {}

    def fake(points, cals, params):
        seen["points"], seen["cals"], seen["params"] = points.copy(), cals, params
        return points.assign(
            time_kernel_s=[5e-6, 20e-6, 8e-6], attr_fixed_s=[1e-6, 2e-6, 3e-6], attr_fixup_s=[0.5e-6, 0.0, 0.0],
            attr_memory_s=[3e-6, 15e-6, 4e-6], attr_alu_s=[0.5e-6, 1e-6, 0.0], attr_tensor_s=[0.0, 2e-6, 1e-6],
            kernel_bandwidth_bytes_per_s=[4e12, 3e12, 2e12], kernel_peak_flops_per_s=[1e14, 2e14, 3e14],
            kernel_terms_source=["calibrated", "datasheet: memory", ""], kernel_params_source=["fitted", "n", "x"])

    monkeypatch.setattr("workbench.analysis.compare.kernel_tier", fake)
    rows = [point("bf16_gemv", "bf16", 1, 10e-6, bytes=40e6), point("bf16_gemv", "bf16", 2, 16e-6, mode="hot"),
            point("bf16_gemv", "bf16", 4, 20e-6, bytes=0.0)]
    table = object()  # the caller's parameter table is handed through untouched
    cmp = compare_points(frame(rows), calibrations=CAL, params=table)
    given = seen["points"]
    assert seen["params"] is table
    assert list(given.columns) == ["gpu", "kernel", "M", "N", "K", "mode", "bytes"]
    assert list(given["mode"]) == ["cold", "hot", "cold"] and list(given["M"]) == [1, 2, 4]
    # the stored bytes where finite and > 0 (40e6), else the model's: 33_554_432 + M·8192·2 at M = 2 and 4
    assert list(given["bytes"]) == [40e6, 33_587_200, 33_619_968]
    assert seen["cals"][GPU].bandwidth == 4.4e12
    assert list(cmp["time_kernel_s"]) == [5e-6, 20e-6, 8e-6]
    assert list(cmp["ratio_kernel"]) == pytest.approx([0.5, 1.25, 0.4], rel=1e-12)  # 5/10, 20/16, 8/20
    assert list(cmp["error_kernel"]) == pytest.approx([-0.5, 0.25, -0.6], rel=1e-12)
    assert list(cmp["attr_remainder_s"]) == pytest.approx([5e-6, -4e-6, 12e-6], rel=1e-12)  # measured - predicted
    assert list(cmp["attr_memory_s"]) == [3e-6, 15e-6, 4e-6] and list(cmp["attr_fixup_s"]) == [0.5e-6, 0.0, 0.0]
    assert list(cmp["kernel_peak_flops_per_s"]) == [1e14, 2e14, 3e14]
    assert list(cmp["kernel_terms_source"]) == ["calibrated", "datasheet: memory", ""]


def test_rows_without_a_gpu_key_are_dropped():
    df = frame([point("k", "bf16", 1, 9e-6), point("k", "bf16", 2, 9e-6, gpu=None), point("k", "bf16", 4, 9e-6,
                                                                                           gpu="")])
    df["gpu_key"] = df["gpu_key"].astype("string")  # <NA> for the missing key
    assert list(compare_points(df, calibrations=CAL)["M"]) == [1]
    none = compare_points(df.iloc[1:], calibrations=CAL)
    assert none.empty and list(none.columns) == list(ALL_COLUMNS)


def test_error_summary_skips_only_the_tiers_a_comparison_lacks():
    cmp = pd.DataFrame({"gpu_key": [GPU], "error_datasheet": [0.1], "error_floor": [-0.2], "error_kernel": [0.3]})
    s = error_summary(cmp)  # no error_calibrated column (written before that tier): the later tiers still count
    assert list(s["tier"]) == ["datasheet", "floor", "kernel"]
    assert list(s["median_error"]) == pytest.approx([0.1, -0.2, 0.3])


def test_rollup_a_two_expert_layer_is_an_expert_layer(monkeypatch):
    import models.workloads as workloads

    tiny = workloads.Model("tiny-moe", "Tiny MoE", (workloads.Layer("o", 4096, 4096, 1),
                                                   workloads.Layer("experts", 4096, 4096, 1, experts=2, top_k=1)))
    monkeypatch.setattr(workloads, "get_model", lambda key: tiny)
    cmp = compare_points(frame([point("cublas_bf16", "bf16", 1, 10e-6, role="peer")]), calibrations=CAL)
    r = rollup_measured(cmp, "tiny-moe", calibrations=CAL).iloc[0]
    # the dense layer is measured; the 2-expert layer (same shape) runs on a share of the batch: never measured
    assert r["n_layers_measured"] == 1 and r["kernels"] == "o=cublas_bf16" and math.isnan(r["time_step_measured_s"])
