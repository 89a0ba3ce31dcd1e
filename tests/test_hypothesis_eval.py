"""workbench.analysis.hypothesis_eval rule by rule, with hand-worked intervals, margins and evidence text (issue 21).

Data: the H200 fixture, calibrated (read 4.4e12 B/s, floor 2e-6 s); cuBLAS bf16 and w4a16_gemv at N = K = 4096 with
p10/p90 = t·(1 ∓ spread). Bytes at M = 1: bf16 33_570_816, w4a16 8_732_672.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests.compare_fixtures import GPU, calibration, frame, point
from workbench.analysis.compare import compare_points
from workbench.analysis.hypotheses import Hypothesis
from workbench.analysis.hypothesis_eval import (
    RESULT_COLUMNS,
    Instance,
    combine,
    decide,
    evaluate_hypotheses,
    format_number,
)

CAL = {GPU: calibration()}
BF16_M1, W4_M1 = 33_570_816, 8_732_672


def hyp(kind, **kw):
    return Hypothesis(id="h1", kind=kind, file="f.toml", line=3, claim="a claim", **kw)


def pair(times, spread=0.01, **kw):
    """cuBLAS bf16 and w4a16_gemv per batch: times = {M: (t_bf16, t_w4)}."""
    rows = []
    for m, (tb, tw) in times.items():
        rows.append(point("cublas_bf16", "bf16", m, tb, spread=spread, role="peer", **kw))
        rows.append(point("w4a16_gemv", "w4a16", m, tw, spread=spread, **kw))
    return compare_points(frame(rows), calibrations=CAL)


def ev(h, cmp, sources=("measured",)):
    return evaluate_hypotheses([h], cmp, sources=sources)


# ------------------------------------------------------------------------------------------------ decide, combine
@pytest.mark.parametrize("low, high, op, thr, verdict, margin", [
    (2.0, 3.0, ">=", (1.5,), "pass", 0.5),
    (1.5, 2.0, ">=", (1.5,), "pass", 0.0),  # low on the threshold passes
    (1.0, 1.2, ">=", (1.5,), "fail", -0.5),
    (1.0, 1.5, ">=", (1.5,), "inconclusive", -0.5),  # high on the threshold is not a fail
    (1.0, 1.2, "<=", (1.5,), "pass", 0.3),
    (1.0, 1.5, "<=", (1.5,), "pass", 0.0),
    (1.6, 2.0, "<=", (1.5,), "fail", -0.5),
    (1.5, 2.0, "<=", (1.5,), "inconclusive", -0.5),
    (2.0, 3.5, "within", (1.0, 4.0), "pass", 0.5),  # min(2 − 1, 4 − 3.5)
    (1.0, 4.0, "within", (1.0, 4.0), "pass", 0.0),
    (0.2, 0.5, "within", (1.0, 4.0), "fail", -0.5),  # −max(1 − 0.5, 0.2 − 4)
    (5.0, 6.0, "within", (1.0, 4.0), "fail", -1.0),  # −max(1 − 6, 5 − 4)
    (0.5, 1.0, "within", (1.0, 4.0), "inconclusive", 0.0),
    (3.0, 4.5, "within", (1.0, 4.0), "inconclusive", 0.0),
])
def test_decide_verdict_and_margin_by_hand(low, high, op, thr, verdict, margin):
    v, m = decide(low, high, op, thr)
    assert v == verdict and m == pytest.approx(margin, abs=1e-12)


def test_decide_nan_and_combine():
    v, m = decide(1.0, float("nan"), "<=", (2.0,))
    assert v == "inconclusive" and math.isnan(m)
    a = Instance("pass", 1.0, 1.0, 1.0, "a", 0.5)
    b = Instance("pass", 2.0, 2.0, 2.0, "b", 0.2)
    c = Instance("pass", 3.0, 3.0, 3.0, "c", float("nan"))
    assert combine([a, b, c]) == ("pass", b)  # smallest finite margin decides
    i1 = Instance("inconclusive", 0, 0, 0, "i1")
    i2 = Instance("inconclusive", 0, 0, 0, "i2")
    f = Instance("fail", 0, 0, 0, "f")
    assert combine([a, i1, i2]) == ("inconclusive", i1) and combine([i1, a, f, i2]) == ("fail", f)
    assert combine([]) == ("inconclusive", None)


def test_format_number():
    assert [format_number(x) for x in (None, float("nan"), math.inf, -math.inf, 3.14159, 1234567.0)] == [
        "—", "—", "∞", "∞", "3.142", "1.235e+06"]
    assert format_number(58.6912, "%") == "58.69%"


# ------------------------------------------------------------------------------------------------ speedup
def test_speedup_row_every_field_by_hand():
    cmp = pair({1: (13e-6, 4e-6)})
    h = hyp("speedup", a="w4a16", b="bf16", batches=(1,), op=">=", threshold=(3.0,))
    res = ev(h, cmp, sources=("measured", "predicted"))
    assert list(res.columns) == list(RESULT_COLUMNS) and len(res) == 2
    m, p = res.iloc[0], res.iloc[1]
    # measured 13/4 = 3.25 in [13·0.99 / (4·1.01), 13·1.01 / (4·0.99)] = [3.1856, 3.3157]
    assert (m["id"], m["kind"], m["claim"], m["gpu_key"], m["source"], m["verdict"]) == (
        "h1", "speedup", "a claim", GPU, "measured", "pass")
    assert m["value"] == pytest.approx(3.25) and m["low"] == pytest.approx(12.87 / 4.04)
    assert m["high"] == pytest.approx(13.13 / 3.96)
    assert (m["threshold"], m["n"], m["file"], m["line"]) == (">= 3", 1, "f.toml", 3)
    assert m["detail"] == "4096x4096 M=1: 3.25 [3.186, 3.316]" and m["evidence"] == m["detail"]
    # predicted: floor tier, (B_bf16/4.4e12 + 2e-6) / (B_w4/4.4e12 + 2e-6) = 2.4167 < 3 → fail, no interval
    want = (BF16_M1 / 4.4e12 + 2e-6) / (W4_M1 / 4.4e12 + 2e-6)
    assert p["source"] == "predicted" and p["verdict"] == "fail"
    assert p["value"] == p["low"] == p["high"] == pytest.approx(want, rel=1e-12)
    assert p["detail"] == "4096x4096 M=1: 2.417"


def test_speedup_instances_over_shapes_and_batches():
    cmp = pair({1: (13e-6, 4e-6), 4: (13e-6, 5.2e-6)})
    h = hyp("speedup", a="w4a16", b="bf16", batches=(1, 4, 8), op=">=", threshold=(2.0,),
            shapes=((4096, 4096), (8192, 4096)))
    r = ev(h, cmp).iloc[0]
    assert r["n"] == 6 and r["verdict"] == "inconclusive"
    assert r["detail"] == "4096x4096 M=8: not measured for both sides" and math.isnan(r["value"])
    assert r["evidence"].split("; ")[1] == "4096x4096 M=4: 2.5 [2.45, 2.551]"  # 12.87/5.252, 13.13/5.148
    assert r["evidence"].split("; ")[3] == "8192x4096 M=1: not measured for both sides"
    ok = ev(hyp("speedup", a="w4a16", b="bf16", batches=(1, 4), op=">=", threshold=(2.0,)), cmp).iloc[0]
    # both pass: margins 3.1856 − 2 and 2.4505 − 2; the smaller (M=4) decides
    assert ok["verdict"] == "pass" and ok["value"] == pytest.approx(2.5) and ok["detail"].startswith("4096x4096 M=4")
    none = ev(hyp("speedup", a="w4a16", b="fp8", batches=(1,), op=">=", threshold=(2.0,)), cmp).iloc[0]
    assert none["detail"] == "(no shape measured for both sides) M=1: not measured for both sides"


def test_speedup_throttled_is_inconclusive_but_predicted_still_decides():
    cmp = pair({1: (13e-6, 4e-6)}, throttled=True)
    res = ev(hyp("speedup", a="w4a16", b="bf16", batches=(1,), op=">=", threshold=(2.0,)), cmp,
             sources=("measured", "predicted"))
    assert list(res["verdict"]) == ["inconclusive", "pass"]
    assert res["detail"].iloc[0] == "4096x4096 M=1: throttled"


def test_scope_by_mode_gpu_and_unknown_gpu():
    cmp = pair({1: (13e-6, 4e-6)})
    hot = ev(hyp("speedup", a="w4a16", b="bf16", batches=(1,), op=">=", threshold=(2.0,), mode="hot"), cmp).iloc[0]
    assert hot["verdict"] == "inconclusive" and hot["n"] == 0
    assert hot["detail"] == hot["evidence"] == "no measured data for this GPU" and math.isnan(hot["value"])
    other = ev(hyp("speedup", a="w4a16", b="bf16", batches=(1,), op=">=", threshold=(2.0,), gpus=("b200",)), cmp)
    assert list(other["gpu_key"]) == ["b200"] and other["detail"].iloc[0] == "no measured data for this GPU"
    mine = ev(hyp("speedup", a="w4a16", b="bf16", batches=(1,), op=">=", threshold=(2.0,), gpus=(GPU, "b200")), cmp)
    assert list(mine["gpu_key"]) == [GPU] and mine["verdict"].iloc[0] == "pass"


# ------------------------------------------------------------------------------------------------ monotonic
FALLING = {1: (12e-6, 4e-6), 4: (12e-6, 4e-6), 32: (12e-6, 8e-6), 128: (12e-6, 16e-6)}  # 3, 3, 1.5, 0.75


def test_monotonic_label_value_and_interval_by_hand():
    r = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(1, 128)), pair(FALLING)).iloc[0]
    assert r["verdict"] == "pass" and r["threshold"] == "non-increasing over M 1..128"
    assert r["detail"] == "4096x4096 M=1..128: 3 → 3 → 1.5 → 0.75 (last/first 0.25)"
    # low = last low / first high = (12·0.99/(16·1.01)) / (12·1.01/(4·0.99)); high = last high / first low
    assert r["value"] == pytest.approx(0.25)
    assert r["low"] == pytest.approx((11.88 / 16.16) / (12.12 / 3.96))
    assert r["high"] == pytest.approx((12.12 / 15.84) / (11.88 / 4.04))


def test_monotonic_non_decreasing_mirrors():
    h = hyp("monotonic", a="bf16", b="w4a16", batches=(1, 128), trend="non-decreasing")
    r = ev(h, pair(FALLING)).iloc[0]  # bf16 over w4a16: 1/3, 1/3, 2/3, 4/3
    assert r["verdict"] == "pass"
    assert r["detail"] == "4096x4096 M=1..128: 0.3333 → 0.3333 → 0.6667 → 1.333 (last/first 0.25)"
    assert r["threshold"] == "non-decreasing over M 1..128"
    wrong = ev(hyp("monotonic", a="bf16", b="w4a16", batches=(1, 128)), pair(FALLING)).iloc[0]
    assert wrong["verdict"] == "fail"


def test_monotonic_range_is_cut_to_first_last():
    times = {**FALLING, 256: (12e-6, 4e-6)}  # a rise after the range must not count
    r = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(4, 128)), pair(times)).iloc[0]
    assert r["verdict"] == "pass" and r["detail"] == "4096x4096 M=4..128: 3 → 1.5 → 0.75 (last/first 0.25)"
    missing = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(2, 128)), pair(times)).iloc[0]
    assert missing["detail"] == "4096x4096 M=2..128: first or last batch not measured for both sides"
    missing = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(1, 64)), pair(times)).iloc[0]
    assert missing["verdict"] == "inconclusive" and missing["detail"].endswith("first or last batch not measured "
                                                                               "for both sides")


def test_monotonic_throttled_and_predicted():
    rows = pair(FALLING)
    rows.loc[rows["M"] == 32, "throttled"] = True
    res = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(1, 128)), rows, sources=("measured", "predicted"))
    assert res["detail"].iloc[0] == "4096x4096 M=1..128: throttled point in range"
    # predicted floor-tier speedups fall strictly with M (the activation and output bytes are the same for both)
    assert res["verdict"].iloc[1] == "pass"
    drop = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(1, 128), min_drop=0.9), rows, sources=("predicted",))
    assert drop["verdict"].iloc[0] == "fail" and drop["threshold"].iloc[0].endswith(", drop >= 90%")


def test_monotonic_plateau_exactly_equal_is_not_a_rise_on_predictions():
    flat = {1: (12e-6, 4e-6), 4: (12e-6, 4e-6)}
    r = ev(hyp("monotonic", a="w4a16", b="w4a16", batches=(1, 4)), pair(flat), sources=("predicted",)).iloc[0]
    assert r["verdict"] == "pass" and r["value"] == pytest.approx(1.0)  # 1 → 1: no rise, no drop required


# ------------------------------------------------------------------------------------------------ crossover
def test_crossover_measured_predicted_and_throttled():
    times = {1: (12e-6, 4e-6), 4: (12e-6, 6e-6), 32: (12e-6, 12.05e-6), 128: (12e-6, 20e-6)}
    cmp = pair(times, spread=0.02)
    res = ev(hyp("crossover", a="w4a16", b="bf16", op=">=", threshold=(16.0,)), cmp, sources=("measured",
                                                                                               "predicted"))
    m, p = res.iloc[0], res.iloc[1]
    # M=32: 12/12.05 = 0.996, a tie in the noise: low 32, measured 32, high 128
    assert (m["low"], m["value"], m["high"], m["verdict"]) == (32, 32, 128, "pass")
    assert m["detail"] == "4096x4096 (batches ≤ 128): 32 [32, 128]"
    # the model keeps W4A16 ahead through 128: never → +inf
    assert p["value"] == math.inf and p["verdict"] == "pass" and p["detail"] == "4096x4096 (batches ≤ 128): inf"
    thr = pair(times, spread=0.02, throttled=True)
    t = ev(hyp("crossover", a="w4a16", b="bf16", op="<=", threshold=(16.0,)), thr).iloc[0]
    assert t["verdict"] == "inconclusive" and t["detail"] == "4096x4096: throttled point"
    none = ev(hyp("crossover", a="w4a16", b="fp8", op="<=", threshold=(16.0,)), cmp).iloc[0]
    assert none["detail"] == "(no shape measured for both sides): not measured for both sides"


# ------------------------------------------------------------------------------------------------ bandwidth
def test_bandwidth_measured_predicted_and_branches():
    cmp = pair({1: (13e-6, 4e-6)})
    h = hyp("bandwidth", a="cublas_bf16", batches=(1, 4), op=">=", threshold=(0.5,))
    res = ev(h, cmp, sources=("measured", "predicted"))
    m, p = res.iloc[0], res.iloc[1]
    assert m["threshold"] == ">= 50%" and m["verdict"] == "inconclusive"  # M=4 not measured: it decides
    assert math.isnan(m["value"]) and m["detail"] == "4096x4096 M=4: not measured"
    assert m["evidence"] == "4096x4096 M=1: 58.69 [58.11, 59.28]; 4096x4096 M=4: not measured"
    m = ev(hyp("bandwidth", a="cublas_bf16", batches=(1,), op=">=", threshold=(0.5,)), cmp).iloc[0]
    # measured: 33_570_816 B / 13 µs / 4.4e12 = 58.69 %, interval with p90 = 13.13 µs, p10 = 12.87 µs
    assert m["value"] == pytest.approx(BF16_M1 / 13e-6 / 4.4e12 * 100, rel=1e-12)
    assert m["low"] == pytest.approx(BF16_M1 / 13.13e-6 / 4.4e12 * 100, rel=1e-12)
    assert m["high"] == pytest.approx(BF16_M1 / 12.87e-6 / 4.4e12 * 100, rel=1e-12)
    assert m["verdict"] == "pass"
    # predicted: bytes / floor time / ceiling = (B/4.4e12) / (B/4.4e12 + 2e-6) = 79.23 %
    assert p["evidence"].startswith("4096x4096 M=1: 79.23;")
    one = ev(hyp("bandwidth", a="cublas_bf16", batches=(1,), op=">=", threshold=(0.5,)), cmp,
             sources=("predicted",)).iloc[0]
    assert one["value"] == pytest.approx(BF16_M1 / 4.4e12 / (BF16_M1 / 4.4e12 + 2e-6) * 100, rel=1e-12)
    thr = ev(hyp("bandwidth", a="cublas_bf16", batches=(1,), op=">=", threshold=(0.5,)),
             pair({1: (13e-6, 4e-6)}, throttled=True)).iloc[0]
    assert thr["detail"] == "4096x4096 M=1: throttled"
    nocal = compare_points(frame([point("cublas_bf16", "bf16", 1, 13e-6)]))
    r = ev(hyp("bandwidth", a="cublas_bf16", batches=(1,), op=">=", threshold=(0.5,)), nocal).iloc[0]
    assert r["detail"] == "4096x4096 M=1: no calibration for this GPU"


def test_bandwidth_without_p10_p90_collapses_and_predicted_uses_calibrated_without_floor():
    rows = [point("cublas_bf16", "bf16", 1, 13e-6, time_p10_s=float("nan"), time_p90_s=float("nan"))]
    cal = calibration()
    del cal["ceilings"]["graph_launch_floor_s"]
    cmp = compare_points(frame(rows), calibrations={GPU: cal})
    res = ev(hyp("bandwidth", a="bf16", batches=(1,), op="<=", threshold=(0.9,)), cmp,
             sources=("measured", "predicted"))
    m, p = res.iloc[0], res.iloc[1]
    assert m["low"] == m["value"] == m["high"] == pytest.approx(BF16_M1 / 13e-6 / 4.4e12 * 100, rel=1e-12)
    assert m["detail"] == "4096x4096 M=1: 58.69" and m["verdict"] == "pass"
    assert p["value"] == pytest.approx(100.0, rel=1e-12) and p["verdict"] == "fail"  # calibrated tier: at the roof


# ------------------------------------------------------------------------------------------------ model error
def test_model_error_filters_stats_and_label():
    rows = [point("cublas_bf16", "bf16", m, t, role="peer") for m, t in ((1, 14e-6), (4, 16e-6), (32, 20e-6))]
    rows += [point("bf16_gemv", "bf16", 1, 10e-6), point("bf16_gemv", "bf16", 4, 30e-6, throttled=True)]
    cmp = compare_points(frame(rows), calibrations=CAL)
    t_sheet = cmp.set_index(["kernel", "M"])["time_datasheet_s"]  # inputs, not the value under test
    err = {(k, m): abs(t_sheet[(k, m)] / t - 1) for k, m, t in (("cublas_bf16", 1, 14e-6), ("cublas_bf16", 4, 16e-6),
                                                                 ("cublas_bf16", 32, 20e-6), ("bf16_gemv", 1, 10e-6))}
    base = dict(tier="datasheet", op="<=", threshold=(0.9,))
    peer = ev(hyp("model_error", a="bf16", role="peer", **base), cmp, sources=("measured", "predicted"))
    assert len(peer) == 1 and peer["value"].iloc[0] == pytest.approx(err[("cublas_bf16", 4)] * 100, rel=1e-9)
    assert peer["detail"].iloc[0].startswith("median |error| of the datasheet tier over 3 points (0 throttled "
                                             "excluded): ")
    kern = ev(hyp("model_error", a="bf16_gemv", stat="max", **base), cmp).iloc[0]
    assert kern["value"] == pytest.approx(err[("bf16_gemv", 1)] * 100, rel=1e-9)
    assert "over 1 points (1 throttled excluded)" in kern["detail"]
    batch = ev(hyp("model_error", batches=(32,), stat="p90", **base), cmp).iloc[0]
    assert batch["value"] == pytest.approx(err[("cublas_bf16", 32)] * 100, rel=1e-9)
    p90 = ev(hyp("model_error", a="cublas_bf16", stat="p90", **base), cmp).iloc[0]
    e = sorted([err[("cublas_bf16", 1)], err[("cublas_bf16", 4)], err[("cublas_bf16", 32)]])
    assert p90["value"] == pytest.approx((e[1] + 0.8 * (e[2] - e[1])) * 100, rel=1e-9)  # linear: rank 1.8 of 0..2
    mx = ev(hyp("model_error", a="cublas_bf16", stat="max", **base), cmp).iloc[0]
    assert mx["value"] == pytest.approx(e[2] * 100, rel=1e-9) and mx["threshold"] == "<= 90%"
    nocal = compare_points(frame(rows))
    r = ev(hyp("model_error", tier="calibrated", op="<=", threshold=(0.9,)), nocal).iloc[0]
    assert r["verdict"] == "inconclusive" and r["detail"].endswith(": no predicted points (no calibration?) or no "
                                                                   "measured points")
    assert np.isnan(r["value"])


# ------------------------------------------------------------------------------------------------ follow-up (M2)
# Survivors of the Dec 3 re-measurement: boundaries of the rules, ours_only, instances after a missing one.
def test_decide_boundaries_of_within_and_a_half_missing_interval():
    assert decide(1.5, 2.0, "within", (1.0, 4.0)) == ("pass", 0.5)  # min(1.5 − 1, 4 − 2) = 0.5
    assert decide(4.0, 4.5, "within", (1.0, 4.0)) == ("inconclusive", 0.0)  # low on b: not a fail
    v, m = decide(3.0, float("nan"), "<=", (2.0,))  # a finite low above x with a NaN high: still inconclusive
    assert v == "inconclusive" and math.isnan(m)


def test_abs_error_interval_without_p10_p90_collapses_to_the_median():
    from workbench.analysis.hypothesis_eval import abs_error_interval

    nan = np.array([np.nan])
    mid, low, high = abs_error_interval(np.array([1.5]), np.array([1.0]), nan, nan)  # |1.5 / 1 − 1| = 0.5
    assert (mid[0], low[0], high[0]) == (0.5, 0.5, 0.5)


def rows_of(times, spread=0.0, **kw):
    """cuBLAS bf16 (peer) and w4a16_gemv rows per batch: times = {M: (t_bf16, t_w4)}."""
    out = []
    for m, (tb, tw) in times.items():
        out.append(point("cublas_bf16", "bf16", m, tb, spread=spread, role="peer", **kw))
        out.append(point("w4a16_gemv", "w4a16", m, tw, spread=spread, **kw))
    return out


def test_monotonic_rule_at_its_boundaries_by_hand():
    mono = dict(a="w4a16", b="bf16", batches=(1, 32))
    # 3 → 1.5 → 2: the step 1.5 → 2 rises although 2 is below the first 3 → fail
    assert ev(hyp("monotonic", **mono), pair({1: (12e-6, 4e-6), 4: (12e-6, 8e-6), 32: (12e-6, 6e-6)},
                                              spread=0.0)).iloc[0]["verdict"] == "fail"
    # 3 → 1.5 → 1.5 (no noise): no rise, last 1.5 < first 3 → pass; last/first = 1.5 / 3 = 0.5 at both ends
    r = ev(hyp("monotonic", **mono), pair({1: (12e-6, 4e-6), 4: (12e-6, 8e-6), 32: (12e-6, 8e-6)},
                                          spread=0.0)).iloc[0]
    assert r["verdict"] == "pass" and (r["low"], r["value"], r["high"]) == pytest.approx((0.5, 0.5, 0.5))
    # 2 → 2 (no noise): no rise and no decisive drop → inconclusive
    flat = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(1, 4)), pair({1: (12e-6, 6e-6), 4: (12e-6, 6e-6)},
                                                                           spread=0.0)).iloc[0]
    assert flat["verdict"] == "inconclusive"
    # 2 → 1 exactly (12/6, 12/12): last/first = 0.5 = 1 − min_drop 0.5 → the limit itself passes
    exact = pair({1: (12e-6, 6e-6), 4: (12e-6, 12e-6)}, spread=0.0)
    r = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(1, 4), min_drop=0.5), exact).iloc[0]
    assert r["verdict"] == "pass" and r["value"] == 0.5
    # with 1 % noise, 3 → 1.5: last/first in [(11.88/8.08)/(12.12/3.96), (12.12/7.92)/(11.88/4.04)]
    # = [0.48040, 0.52040], median 0.5; min_drop 0.51 → limit 0.49: the best case reaches it, the worst does not
    noisy = pair({1: (12e-6, 4e-6), 4: (12e-6, 8e-6)}, spread=0.01)
    r = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(1, 4), min_drop=0.51), noisy).iloc[0]
    assert r["verdict"] == "inconclusive"
    assert (r["low"], r["value"], r["high"]) == pytest.approx(((11.88 / 8.08) / (12.12 / 3.96), 0.5,
                                                               (12.12 / 7.92) / (11.88 / 4.04)), rel=1e-12)


def test_monotonic_mirror_interval_and_predicted_rule_on_its_own_numbers():
    # bf16 over w4a16: 12/6 → 12/12 = 0.5 → 1, non-decreasing; mirrored 2 → 1: last/first 0.5 at both ends
    h = hyp("monotonic", a="cublas_bf16", b="w4a16_gemv", batches=(1, 4), trend="non-decreasing")
    r = ev(h, pair({1: (12e-6, 6e-6), 4: (12e-6, 12e-6)}, spread=0.0)).iloc[0]
    assert r["verdict"] == "pass" and (r["low"], r["value"], r["high"]) == pytest.approx((0.5, 0.5, 0.5))
    # measured speedup rises 12/4 = 3 → 12/2 = 6 (fail); the predicted floor-tier speedup falls with M (pass)
    res = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(1, 4)), pair({1: (12e-6, 4e-6), 4: (12e-6, 2e-6)}),
             sources=("measured", "predicted"))
    assert list(res["verdict"]) == ["fail", "pass"]


def test_passing_monotonic_instances_report_the_smallest_margin():
    rows = rows_of({1: (12e-6, 6e-6), 4: (12e-6, 12e-6)})  # 2 → 1: last/first 0.5, margin 1 − 0.5
    rows += rows_of({1: (12e-6, 6e-6), 4: (12e-6, 7.5e-6)}, N=8192)  # 2 → 1.6: last/first 0.8, margin 0.2
    cmp = compare_points(frame(rows), calibrations=CAL)
    r = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(1, 4)), cmp).iloc[0]
    assert r["verdict"] == "pass" and r["n"] == 2
    assert r["detail"] == "8192x4096 M=1..4: 2 → 1.6 (last/first 0.8)" and r["value"] == pytest.approx(0.8)
    # crossovers per shape: 4096x4096 reaches 12/12 = 1 at M = 4; 8192x4096 never does (∞)
    c = ev(hyp("crossover", a="w4a16", b="bf16", op=">=", threshold=(2.0,)), cmp).iloc[0]
    assert c["evidence"] == "4096x4096 (batches ≤ 4): 4; 8192x4096 (batches ≤ 4): inf"
    # a throttled first shape does not stop the second one
    thr = compare_points(frame(rows_of({1: (12e-6, 6e-6), 4: (12e-6, 12e-6)}, throttled=True)
                               + rows_of({1: (12e-6, 6e-6), 4: (12e-6, 7.5e-6)}, N=8192)), calibrations=CAL)
    t = ev(hyp("monotonic", a="w4a16", b="bf16", batches=(1, 4)), thr).iloc[0]
    assert t["n"] == 2 and t["evidence"] == ("4096x4096 M=1..4: throttled point in range; "
                                             "8192x4096 M=1..4: 2 → 1.6 (last/first 0.8)")


OURS_AND_PEER = [point("cublas_bf16", "bf16", 1, 12e-6, role="peer"),
                 point("cublas_bf16", "bf16", 4, 12e-6, role="peer"),
                 point("w4a16_gemv", "w4a16", 1, 4e-6), point("w4a16_gemv", "w4a16", 4, 12e-6),
                 point("tc_w4a16", "w4a16", 1, 3e-6, role="peer"), point("tc_w4a16", "w4a16", 4, 4e-6, role="peer")]


def test_ours_only_reaches_every_kind():
    cmp = compare_points(frame(OURS_AND_PEER), calibrations=CAL)
    side = dict(a="w4a16", b="cublas_bf16", ours_only=True)
    # speedup at M=1: ours 12/4 = 3 (the peer tc_w4a16 would give 12/3 = 4)
    s = ev(hyp("speedup", batches=(1,), op=">=", threshold=(3.5,), **side), cmp).iloc[0]
    assert s["verdict"] == "fail" and s["value"] == pytest.approx(3.0)
    m = ev(hyp("monotonic", batches=(1, 4), **side), cmp).iloc[0]  # ours 3 → 12/12 = 1 (with the peer 4 → 3)
    assert m["detail"] == "4096x4096 M=1..4: 3 → 1 (last/first 0.3333)"
    c = ev(hyp("crossover", op="<=", threshold=(4.0,), **side), cmp).iloc[0]  # ours reach 1 at M=4 (peer: never)
    assert c["verdict"] == "pass" and c["value"] == 4.0
    # bandwidth of ours at M=1: 8_732_672 B / 4 µs / 4.4e12 B/s = 49.62 % (the peer's 3 µs would give 66.16 %)
    b = ev(hyp("bandwidth", a="w4a16", ours_only=True, batches=(1,), op=">=", threshold=(0.5,)), cmp).iloc[0]
    assert b["value"] == pytest.approx(W4_M1 / 4e-6 / 4.4e12 * 100, rel=1e-12) and b["verdict"] == "fail"


def test_instances_after_a_missing_one_are_still_evaluated():
    cmp = compare_points(frame(OURS_AND_PEER), calibrations=CAL)
    b = ev(hyp("bandwidth", a="w4a16_gemv", batches=(1, 2, 4), op=">=", threshold=(0.1,)), cmp).iloc[0]
    assert b["n"] == 3 and b["evidence"].split("; ")[1:] == ["4096x4096 M=2: not measured", "4096x4096 M=4: 16.63"]
    # M=4 bytes = 8_732_672 + 3·(4096·2 + 4096·2) (three more rows of x and y) = 8_781_824; / 12 µs / 4.4e12 = 16.63 %
    nocal = compare_points(frame(OURS_AND_PEER))
    n = ev(hyp("bandwidth", a="w4a16_gemv", batches=(1, 4), op=">=", threshold=(0.1,)), nocal).iloc[0]
    assert n["n"] == 2 and n["evidence"] == ("4096x4096 M=1: no calibration for this GPU; "
                                             "4096x4096 M=4: no calibration for this GPU")
    two = dict(a="w4a16_gemv", b="cublas_bf16", shapes=((2048, 4096), (4096, 4096)))
    c = ev(hyp("crossover", op="<=", threshold=(4.0,), **two), cmp).iloc[0]
    assert c["n"] == 2 and c["evidence"] == "2048x4096: not measured for both sides; 4096x4096 (batches ≤ 4): 4"
    m = ev(hyp("monotonic", batches=(1, 4), **two), cmp).iloc[0]
    assert m["n"] == 2 and m["evidence"].endswith("; 4096x4096 M=1..4: 3 → 1 (last/first 0.3333)")


def test_evaluate_without_data_without_hypotheses_and_source_order():
    h = hyp("speedup", a="w4a16", b="bf16", batches=(1,), op=">=", threshold=(2.0,))
    res = ev(h, pd.DataFrame(), sources=("measured", "predicted"))  # no columns at all
    assert list(res["source"]) == ["measured", "predicted"] and list(res["gpu_key"]) == ["", ""]
    assert set(res["detail"]) == {"no measured data for this GPU"} and set(res["verdict"]) == {"inconclusive"}
    hot = ev(hyp("speedup", a="w4a16", b="bf16", batches=(1,), op=">=", threshold=(2.0,), mode="hot"),
             pair({1: (13e-6, 4e-6)}), sources=("measured", "predicted"))
    assert list(hot["source"]) == ["measured", "predicted"]
    assert list(evaluate_hypotheses([], pair({1: (13e-6, 4e-6)})).columns) == list(RESULT_COLUMNS)
    me = ev(hyp("model_error", tier="datasheet", op="<=", threshold=(0.9,)), pair({1: (13e-6, 4e-6)}),
            sources=("predicted", "measured"))
    assert list(me["source"]) == ["measured"]


def test_model_error_median_in_percent_over_the_scoped_shape():
    t_cal = BF16_M1 / 4.4e12  # the calibrated tier of bf16 at M=1, 4096x4096: bytes / read bandwidth
    rows = [point("cublas_bf16", "bf16", 1, 2 * t_cal, role="peer"),  # |t_cal / (2 t_cal) − 1| = 0.5
            point("bf16_gemv", "bf16", 1, 4 / 3 * t_cal),  # |0.75 − 1| = 0.25
            point("cublas_bf16", "bf16", 1, 1e-3, N=8192, role="peer"),  # other shapes: scoped out
            point("cublas_bf16", "bf16", 1, 1e-3, K=8192, role="peer")]
    cmp = compare_points(frame(rows), calibrations=CAL)
    h = hyp("model_error", a="bf16", tier="calibrated", op="<=", threshold=(0.4,), shapes=((4096, 4096),))
    r = ev(h, cmp).iloc[0]
    # median of 0.5 and 0.25 = 0.375 → 37.5 %, no noise: low = high
    assert r["detail"] == "median |error| of the calibrated tier over 2 points (0 throttled excluded): 37.5"
    assert (r["low"], r["value"], r["high"]) == pytest.approx((37.5, 37.5, 37.5)) and r["verdict"] == "pass"
    nocal = ev(hyp("model_error", tier="calibrated", op="<=", threshold=(0.9,)), compare_points(frame(rows))).iloc[0]
    assert nocal["detail"] == ("median |error| of the calibrated tier over 0 points (0 throttled excluded): "
                               "no predicted points (no calibration?) or no measured points")
