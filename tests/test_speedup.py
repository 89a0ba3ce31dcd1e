"""workbench.analysis.speedup branch by branch, with hand-worked ratios (issue 21): throttle propagation, the datasheet
fallback of the predicted speedup, the `kernels=` filter, noise bounds without p10/p90, mode/shape joins, crossovers.

Byte counts at N = K = 4096, M = 1 (models.schemes accounting): bf16 33_570_816 B; w4a16 G=128 8_732_672 B.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from tests.compare_fixtures import GPU, calibration, frame, point
from workbench.analysis.compare import compare_points
from workbench.analysis.speedup import crossovers, pair_speedups, resolve_side, speedups

CAL = {GPU: calibration()}  # read 4.4e12 B/s, graph floor 2e-6 s
BF16_M1, W4_M1 = 33_570_816, 8_732_672


def cmp_of(rows, cal=CAL):
    return compare_points(frame(rows), calibrations=cal)


def base_rows(**kw):
    return [point("cublas_bf16", "bf16", m, t, role="peer", **kw) for m, t in ((1, 12e-6), (4, 12e-6), (32, 16e-6))]


def test_throttle_flag_comes_from_either_side():
    rows = [point("cublas_bf16", "bf16", 1, 12e-6, role="peer", throttled=True),
            point("cublas_bf16", "bf16", 4, 12e-6, role="peer", throttled=False),
            point("cublas_bf16", "bf16", 32, 16e-6, role="peer", throttled=None),  # no NVML: not throttled
            point("w4a16_gemv", "w4a16", 1, 4e-6, throttled=False),
            point("w4a16_gemv", "w4a16", 4, 4e-6, throttled=True),
            point("w4a16_gemv", "w4a16", 32, 8e-6, throttled=None)]
    sp = speedups(cmp_of(rows))
    w4 = sp[sp.kernel == "w4a16_gemv"]
    assert list(w4["M"]) == [1, 4, 32] and list(w4["throttled"]) == [True, True, False]
    assert list(sp[sp.kernel == "cublas_bf16"]["throttled"]) == [True, False, False]
    cx = crossovers(sp)
    assert list(cx["throttled"]) == [True]  # any throttled batch flags the crossover


def test_predicted_speedup_falls_back_to_the_datasheet_per_row():
    rows = [point("cublas_bf16", "bf16", 1, 12e-6, role="peer"), point("w4a16_gemv", "w4a16", 1, 4e-6),
            point("cublas_bf16", "bf16", 1, 20e-6, role="peer", gpu="h100-sxm"),
            point("w4a16_gemv", "w4a16", 1, 7e-6, gpu="h100-sxm")]
    sp = speedups(cmp_of(rows)).set_index(["gpu_key", "kernel"])
    cal, sheet = sp.loc[(GPU, "w4a16_gemv")], sp.loc[("h100-sxm", "w4a16_gemv")]
    # calibrated H200: floor tier (B/4.4e12 + 2e-6) for both schemes
    assert cal["predicted_tier"] == "floor"
    assert cal["speedup_predicted"] == pytest.approx((BF16_M1 / 4.4e12 + 2e-6) / (W4_M1 / 4.4e12 + 2e-6), rel=1e-12)
    assert cal["speedup_calibrated"] == pytest.approx(BF16_M1 / W4_M1, rel=1e-12)
    # uncalibrated H100: the datasheet tier, both memory bound → the byte ratio 3.8443
    assert sheet["predicted_tier"] == "datasheet" and math.isnan(sheet["speedup_floor"])
    assert sheet["speedup_predicted"] == pytest.approx(BF16_M1 / W4_M1, rel=1e-12)
    assert sheet["speedup_datasheet"] == pytest.approx(BF16_M1 / W4_M1, rel=1e-12)
    assert sheet["speedup_measured"] == pytest.approx(20 / 7, rel=1e-12)
    assert sheet["speedup_ideal"] == pytest.approx(BF16_M1 / W4_M1, rel=1e-12)


def test_kernels_filter_keeps_exactly_the_named_kernels():
    rows = base_rows() + [point("w4a16_gemv", "w4a16", 1, 4e-6), point("tc_w4a16", "w4a16", 1, 5e-6),
                          point("w8a16_gemv", "w8a16", 1, 7e-6)]
    cmp = cmp_of(rows)
    assert sorted(set(speedups(cmp)["kernel"])) == ["cublas_bf16", "tc_w4a16", "w4a16_gemv", "w8a16_gemv"]
    only = speedups(cmp, kernels=iter(["w4a16_gemv", "w8a16_gemv"]))  # any iterable
    assert list(only["kernel"]) == ["w4a16_gemv", "w8a16_gemv"] and list(only["side"]) == list(only["kernel"])
    assert list(only["speedup_measured"]) == pytest.approx([3.0, 12 / 7], rel=1e-12)
    assert speedups(cmp, kernels=[]).empty
    with pytest.raises(InputError, match=r"^unknown kernel 'nope'; valid: cublas_bf16, tc_w4a16, w4a16_gemv, "
                                         r"w8a16_gemv$"):
        speedups(cmp, kernels=["w4a16_gemv", "nope"])


def test_noise_interval_collapses_to_the_median_without_p10_p90():
    rows = [point("cublas_bf16", "bf16", 1, 12e-6, role="peer", time_p10_s=11e-6, time_p90_s=13e-6),
            point("w4a16_gemv", "w4a16", 1, 4e-6, time_p10_s=float("nan"), time_p90_s=float("nan")),
            point("cublas_bf16", "bf16", 4, 12e-6, role="peer", time_p10_s=float("nan"), time_p90_s=float("nan")),
            point("w4a16_gemv", "w4a16", 4, 4e-6, time_p10_s=3.5e-6, time_p90_s=5e-6)]
    w4 = speedups(cmp_of(rows)).query("kernel == 'w4a16_gemv'")
    # M=1: low = 11/4, high = 13/4 (kernel p10/p90 → its median); M=4: low = 12/5, high = 12/3.5
    assert list(w4["speedup_low"]) == pytest.approx([11 / 4, 12 / 5], rel=1e-12)
    assert list(w4["speedup_high"]) == pytest.approx([13 / 4, 12 / 3.5], rel=1e-12)
    assert list(w4["speedup_measured"]) == pytest.approx([3.0, 3.0], rel=1e-12)


def test_join_needs_the_same_mode_shape_and_batch():
    rows = base_rows() + [point("w4a16_gemv", "w4a16", 1, 4e-6), point("w4a16_gemv", "w4a16", 1, 2e-6, mode="hot"),
                          point("w4a16_gemv", "w4a16", 1, 5e-6, N=8192), point("w4a16_gemv", "w4a16", 2, 4e-6),
                          point("w4a16_gemv", "w4a16", 4, 6e-6)]
    w4 = speedups(cmp_of(rows)).query("kernel == 'w4a16_gemv'")
    assert list(zip(w4["M"], w4["mode"], w4["N"], strict=True)) == [(1, "cold", 4096), (4, "cold", 4096)]
    assert list(w4["speedup_measured"]) == pytest.approx([3.0, 2.0], rel=1e-12)
    assert list(w4["baseline_time_s"]) == [12e-6, 12e-6] and list(w4["time_s"]) == [4e-6, 6e-6]


def test_newest_measurement_of_a_point_wins():
    rows = base_rows() + [point("w4a16_gemv", "w4a16", 1, 6e-6, timestamp="2026-12-01T00:00:00Z"),
                          point("w4a16_gemv", "w4a16", 1, 4e-6, timestamp="2026-12-03T00:00:00Z"),
                          point("w4a16_gemv", "w4a16", 1, 8e-6, timestamp="2026-12-02T00:00:00Z")]
    w4 = speedups(cmp_of(rows)).query("kernel == 'w4a16_gemv'")
    assert list(w4["speedup_measured"]) == [3.0]


SPEEDUP_COLUMNS = [
    "gpu_key", "N", "K", "mode", "side", "kernel", "scheme", "role", "M", "baseline", "baseline_kernel",
    "baseline_scheme", "time_s", "baseline_time_s", "speedup_measured", "speedup_low", "speedup_high",
    "speedup_datasheet", "speedup_calibrated", "speedup_floor", "speedup_kernel", "speedup_predicted", "predicted_tier",
    "speedup_ideal", "throttled"]  # fmt: skip
CROSSOVER_COLUMNS = [
    "gpu_key", "N", "K", "mode", "side", "kernels", "baseline", "baseline_kernels", "n_batches", "max_batch",
    "crossover_measured", "crossover_low", "crossover_high", "crossover_predicted", "throttled"]  # fmt: skip


def test_output_columns_values_and_order():
    rows = base_rows() + [point("w8a16_gemv", "w8a16", 4, 8e-6), point("w4a16_gemv", "w4a16", 4, 4e-6),
                          point("w4a16_gemv", "w4a16", 1, 4e-6)]
    sp = speedups(cmp_of(rows))
    assert list(sp.columns) == SPEEDUP_COLUMNS
    cx = crossovers(sp)
    assert list(cx.columns) == CROSSOVER_COLUMNS and list(cx["side"]) == ["w4a16_gemv", "w8a16_gemv"]
    rev = crossovers(sp.iloc[::-1])  # rows in any order: one row per group, sorted by the group key
    assert list(rev["side"]) == ["w4a16_gemv", "w8a16_gemv"] and list(rev.columns) == CROSSOVER_COLUMNS
    assert list(zip(sp["side"], sp["M"], strict=True)) == [("cublas_bf16", 1), ("cublas_bf16", 4),
                                                           ("cublas_bf16", 32), ("w4a16_gemv", 1), ("w4a16_gemv", 4),
                                                           ("w8a16_gemv", 4)]
    r = sp.iloc[-1]
    assert (r["baseline"], r["baseline_kernel"], r["baseline_scheme"], r["scheme"], r["role"]) == (
        "cublas_bf16", "cublas_bf16", "bf16", "w8a16", "optimized")
    assert r["speedup_measured"] == 1.5 and list(sp.index) == list(range(6))


def test_scheme_baseline_takes_our_fastest_kernel_not_a_peer():
    rows = base_rows() + [point("bf16_gemv", "bf16", 1, 10e-6), point("tc_bf16", "bf16", 1, 8e-6, role="reference"),
                          point("w4a16_gemv", "w4a16", 1, 4e-6)]
    sp = speedups(cmp_of(rows), "bf16").query("kernel == 'w4a16_gemv'").iloc[0]
    # the peer cublas_bf16 (12 µs) is not ours; tc_bf16 (8 µs) is the fastest of ours
    assert sp["baseline_kernel"] == "tc_bf16" and sp["speedup_measured"] == 2.0 and sp["baseline"] == "bf16"


def test_missing_baseline_and_unknown_names():
    cmp = cmp_of(base_rows() + [point("w4a16_gemv", "w4a16", 1, 4e-6)])
    with pytest.raises(InputError, match=r"^baseline 'fp8' has no measured points; measure it or choose another "
                                         r"--baseline$"):
        speedups(cmp, "fp8")
    with pytest.raises(InputError, match=r"^baseline 'bf16' has no measured points"):
        speedups(cmp, "bf16")  # only a peer measured bf16
    with pytest.raises(InputError, match=r"^unknown kernel or scheme 'int3'; valid: bf16, cublas_bf16, fp16, "):
        resolve_side(cmp, "int3")
    assert list(resolve_side(cmp, "cublas_bf16")["M"]) == [1, 4, 32]
    assert resolve_side(cmp, "bf16", ours_only=True).empty and len(resolve_side(cmp, "bf16")) == 3


def test_empty_inputs_give_typed_empty_tables():
    empty = compare_points(frame([point("k", "bf16", 1, 1e-5, gpu="")]))
    full = speedups(cmp_of(base_rows()))
    for table in (speedups(empty), pair_speedups(empty, "w4a16", "bf16")):
        assert table.empty and list(table.columns) == list(full.columns) == SPEEDUP_COLUMNS
    cmp = cmp_of(base_rows())
    assert pair_speedups(cmp, "w4a16", "bf16").empty  # no w4a16 measured
    assert pair_speedups(cmp, "bf16", "w4a16").empty
    assert speedups(cmp_of(base_rows() + [point("w4a16_gemv", "w4a16", 2, 4e-6)]), kernels=["w4a16_gemv"]).empty
    c = crossovers(speedups(empty))
    assert c.empty and list(c.columns) == CROSSOVER_COLUMNS


def test_pair_speedups_name_the_side_and_its_kernel():
    rows = base_rows() + [point("w4a16_gemv", "w4a16", 1, 4e-6), point("tc_w4a16", "w4a16", 1, 3e-6, role="peer"),
                          point("tc_w4a16", "w4a16", 4, 6e-6, role="peer"), point("w4a16_gemv", "w4a16", 4, 3e-6)]
    cmp = cmp_of(rows)
    sp = pair_speedups(cmp, "w4a16", "cublas_bf16")
    assert list(sp["side"]) == ["w4a16", "w4a16"] and list(sp["kernel"]) == ["tc_w4a16", "w4a16_gemv"]
    assert list(sp["speedup_measured"]) == pytest.approx([4.0, 4.0], rel=1e-12) and set(sp["baseline"]) == {
        "cublas_bf16"}
    ours = pair_speedups(cmp, "w4a16", "cublas_bf16", ours_only=True)
    assert list(ours["kernel"]) == ["w4a16_gemv", "w4a16_gemv"]
    assert list(ours["speedup_measured"]) == pytest.approx([3.0, 4.0], rel=1e-12)


def test_crossovers_list_kernels_and_batches_by_hand():
    table = pd.DataFrame({
        "gpu_key": GPU, "N": 4096, "K": 4096, "mode": "cold", "side": ["w4a16"] * 4 + ["bf16"] * 2,
        "kernel": ["b", "a", "a", "b", "x", "x"], "baseline": "bf16", "baseline_kernel": ["p", "p", "q", "p", "x", "x"],
        "M": [8, 1, 2, 4, 1, 2],
        "speedup_measured": [0.5, 3.0, 1.2, 0.9, 1.0, 1.0],
        "speedup_low": [0.4, 2.0, 0.9, 0.8, 1.0, 1.0],
        "speedup_high": [0.6, 4.0, 1.5, 1.1, 1.0, 1.0],
        "speedup_predicted": [np.nan, 3.5, 2.0, 1.5, 1.0, 1.0],
        "throttled": [False, False, False, False, True, True],
    })  # fmt: skip
    c = crossovers(table)
    assert len(c) == 1  # the baseline over itself is left out
    r = c.iloc[0]
    assert (r["kernels"], r["baseline_kernels"], r["n_batches"], r["max_batch"]) == ("a,b", "p,q", 4, 8)
    # sorted by M: measured 3.0, 1.2, 0.9, 0.5 → 4; low 2.0, 0.9 → 2; high 4.0, 1.5, 1.1, 0.6 → 8; predicted NaN at 8
    assert (r["crossover_measured"], r["crossover_low"], r["crossover_high"]) == (4.0, 2.0, 8.0)
    assert math.isnan(r["crossover_predicted"]) and not r["throttled"]


def test_kernel_tier_speedup_is_the_baseline_kernels_predicted_time_over_the_kernels():
    cmp = cmp_of(base_rows() + [point("w4a16_gemv", "w4a16", 1, 4e-6), point("w4a16_gemv", "w4a16", 4, 6e-6)])
    # kernel-tier predictions set by hand (they are the kernel model's business, not this module's)
    kernel_t = {("cublas_bf16", 1): 10e-6, ("cublas_bf16", 4): 12e-6, ("cublas_bf16", 32): 16e-6,
                ("w4a16_gemv", 1): 5e-6, ("w4a16_gemv", 4): 8e-6}
    cmp["time_kernel_s"] = [kernel_t[(k, m)] for k, m in zip(cmp["kernel"], cmp["M"], strict=True)]
    w4 = speedups(cmp).query("kernel == 'w4a16_gemv'")
    # M=1: 10 µs / 5 µs = 2.0; M=4: 12 µs / 8 µs = 1.5 (the measured times give 12/4 = 3 and 12/6 = 2)
    assert list(w4["speedup_kernel"]) == pytest.approx([2.0, 1.5], rel=1e-12)
    assert list(w4["speedup_measured"]) == pytest.approx([3.0, 2.0], rel=1e-12)


def test_a_comparison_without_the_kernel_tier_gives_nan_kernel_speedups_and_the_rest():
    cmp = cmp_of(base_rows() + [point("w4a16_gemv", "w4a16", 1, 4e-6)]).drop(columns=["time_kernel_s"])
    sp = speedups(cmp)
    w4 = sp.query("kernel == 'w4a16_gemv'").iloc[0]
    assert list(sp.columns) == SPEEDUP_COLUMNS and len(sp) == 4  # 3 baseline rows + 1
    assert math.isnan(w4["speedup_kernel"]) and w4["speedup_measured"] == 3.0  # 12 µs / 4 µs
    assert w4["speedup_calibrated"] == pytest.approx(BF16_M1 / W4_M1, rel=1e-12)
