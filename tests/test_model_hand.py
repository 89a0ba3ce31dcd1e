"""The analytical model against numbers worked out by hand (issue 21): every expected value below is arithmetic on
datasheet / calibration constants written in the test, never a value computed by models/ itself.

Constants used throughout (data/gpus.toml, h200-sxm): bandwidth 4.8e12 B/s, bf16/fp16 989.4e12, fp32 67e12,
int8 = fp8 = 1978.9e12 FLOP/s, 132 SMs. The calibration CAL below: read 4e12 B/s, graph floor 2e-6 s, fp16/bf16 mma
500e12, fp32 50e12, int8 1000e12, fp8 800e12 (native), measured at a 2e9 Hz SM clock.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from models.hardware import parse_calibration
from models.rollup import model_points, rollup
from models.roofline import TIME_COLUMNS, crossover, predict, speedup
from models.schemes import check_group, get_scheme, traffic
from models.workloads import Layer, Model

CAL = parse_calibration({"schema_version": 1, "gpu_key": "h200-sxm", "gpu_name": "NVIDIA H200", "sm_clock_hz": 2e9,
                         "ceilings": {"read_bytes_per_s": 4e12, "graph_launch_floor_s": 2e-6, "fp32_flops": 50e12,
                                      "fp16_mma_flops": 500e12, "bf16_mma_flops": 500e12, "int8_mma_ops": 1000e12,
                                      "fp8_mma_flops": 800e12, "fp8_mma_emulated": False}})
CALS = {"h200-sxm": CAL}

# bf16, N = K = 4096: weights 4096·4096·2 = 33_554_432 B; per token 4096·2 = 8192 B of activations and of outputs.
W_BF16 = 33_554_432
# w4a16 G=128, N = K = 4096: weights 4096·4096/2 = 8_388_608 B; 4096 rows × 32 groups × (2 B scale + 0.5 B zero)
# = 327_680 B of metadata.
W_W4, META_W4 = 8_388_608, 327_680


def pts(rows, **extra):
    df = pd.DataFrame(rows, columns=["gpu", "scheme", "M", "N", "K"])
    return df.assign(**extra)


def one(rows, cal=None, **kw):
    return predict(pts(rows), cal, **kw)


# ------------------------------------------------------------------------------------------------ datasheet tier
def test_bf16_m1_memory_bound_every_column_by_hand():
    r = one([("h200-sxm", "bf16", 1, 4096, 4096)], CALS).iloc[0]
    total = W_BF16 + 8192 + 8192  # 33_570_816 B
    flops = 2 * 4096 * 4096  # 33_554_432
    assert (r["weight_bytes"], r["scale_bytes"], r["act_bytes"], r["out_bytes"]) == (W_BF16, 0, 8192, 8192)
    assert r["bytes"] == total and r["flops"] == flops
    assert r["intensity"] == pytest.approx(33_554_432 / 33_570_816, rel=1e-12)
    assert r["t_memory_s"] == pytest.approx(6.99392e-6, rel=1e-12)  # 33_570_816 / 4.8e12
    assert r["t_compute_s"] == pytest.approx(33_554_432 / 989.4e12, rel=1e-12)  # 3.391e-8
    assert r["time_datasheet_s"] == pytest.approx(6.99392e-6, rel=1e-12)
    assert r["bound_datasheet"] == "memory"
    assert r["attainable_flops"] == pytest.approx(33_554_432 / 6.99392e-6, rel=1e-12)  # 4.798e12
    assert r["ridge"] == pytest.approx(206.125, rel=1e-12)  # 989.4e12 / 4.8e12
    assert r["bandwidth_bytes_per_s"] == 4.8e12 and r["peak_flops_per_s"] == 989.4e12
    assert r["compute_unit"] == "bf16" and r["compute_unit_used"] == "bf16"
    # calibrated: 33_570_816 / 4e12 = 8.392704e-6 s; compute 33_554_432 / 500e12 = 6.71e-8 s
    assert r["t_memory_calibrated_s"] == pytest.approx(8.392704e-6, rel=1e-12)
    assert r["t_compute_calibrated_s"] == pytest.approx(6.7108864e-8, rel=1e-12)
    assert r["time_calibrated_s"] == pytest.approx(8.392704e-6, rel=1e-12)
    assert r["bound_calibrated"] == "memory" and r["compute_unit_calibrated"] == "bf16"
    assert r["attainable_flops_calibrated"] == pytest.approx(33_554_432 / 8.392704e-6, rel=1e-12)
    assert r["ridge_calibrated"] == pytest.approx(125.0, rel=1e-12)  # 500e12 / 4e12
    assert r["bandwidth_calibrated"] == 4e12 and r["peak_calibrated"] == 500e12 and r["floor_s"] == 2e-6
    assert r["time_floor_s"] == pytest.approx(1.0392704e-5, rel=1e-12)  # 8.392704e-6 + 2e-6
    assert r["dequant_ops"] == 0 and r["t_dequant_s"] == 0


def test_bf16_m4096_compute_bound_by_hand():
    r = one([("h200-sxm", "bf16", 4096, 4096, 4096)], CALS).iloc[0]
    # bytes: 3 × 33_554_432 (weights, activations 4096·4096·2, outputs 4096·4096·2) = 100_663_296
    # flops: 2·4096³ = 137_438_953_472
    assert r["bytes"] == 100_663_296 and r["flops"] == 137_438_953_472
    assert r["t_memory_s"] == pytest.approx(2.097152e-5, rel=1e-12)  # 100_663_296 / 4.8e12
    assert r["t_compute_s"] == pytest.approx(137_438_953_472 / 989.4e12, rel=1e-12)  # 1.389e-4
    assert r["time_datasheet_s"] == pytest.approx(137_438_953_472 / 989.4e12, rel=1e-12)
    assert r["bound_datasheet"] == "compute"
    assert r["attainable_flops"] == pytest.approx(989.4e12, rel=1e-12)
    assert r["time_calibrated_s"] == pytest.approx(2.74877906944e-4, rel=1e-12)  # 137_438_953_472 / 500e12
    assert r["bound_calibrated"] == "compute"
    assert r["time_floor_s"] == pytest.approx(2.74877906944e-4 + 2e-6, rel=1e-12)  # no ctas column: q = 1


@pytest.mark.parametrize("scheme, unit, peak, cal_peak", [
    ("fp32", "fp32", 67e12, 50e12), ("w8a8", "int8", 1978.9e12, 1000e12), ("fp8", "fp8", 1978.9e12, 800e12),
    ("fp16", "fp16", 989.4e12, 500e12), ("w8a16", "fp16", 989.4e12, 500e12)])
def test_compute_ceiling_of_each_unit_by_hand(scheme, unit, peak, cal_peak):
    r = one([("h200-sxm", scheme, 8192, 4096, 4096)], CALS).iloc[0]
    flops = 2 * 8192 * 4096 * 4096  # 274_877_906_944
    assert r["compute_unit_used"] == unit and r["peak_flops_per_s"] == peak
    assert r["t_compute_s"] == pytest.approx(flops / peak, rel=1e-12)
    assert r["t_compute_calibrated_s"] == pytest.approx(flops / cal_peak, rel=1e-12)


def test_w4a16_and_w8a16_dequant_time_and_speedup_by_hand():
    p = one([("h200-sxm", "bf16", 1, 4096, 4096), ("h200-sxm", "w4a16", 1, 4096, 4096),
             ("h200-sxm", "w8a16", 1, 4096, 4096)], CALS)
    w4, w8 = p.iloc[1], p.iloc[2]
    assert w4["bytes"] == W_W4 + META_W4 + 8192 + 8192  # 8_732_672
    assert w4["time_datasheet_s"] == pytest.approx(8_732_672 / 4.8e12, rel=1e-12)  # 1.8193e-6
    assert w4["dequant_ops"] == 67_108_864  # 4096·4096 weights × 4 ops
    assert w4["t_dequant_s"] == pytest.approx(67_108_864 / 33.5e12, rel=1e-12)  # fp32 67e12 / 2 per FMA
    assert w8["bytes"] == 16_777_216 + 8192 + 8192 + 8192  # int8 weights + one fp16 scale per row
    assert w8["dequant_ops"] == 33_554_432  # × 2 ops
    sp = speedup(p).set_index("scheme")["speedup"]
    assert sp["bf16"] == 1.0
    assert sp["w4a16"] == pytest.approx(33_570_816 / 8_732_672, rel=1e-12)  # 3.8443: both memory bound
    assert sp["w8a16"] == pytest.approx(33_570_816 / 16_801_792, rel=1e-12)


# ------------------------------------------------------------------------------------------------ floor tier
@pytest.mark.parametrize("ctas, q", [
    (66, 2.0),  # half a wave: 66/132 = 0.5 waves, q = ceil(0.5) / 0.5 = 2 (a grid smaller than one wave)
    (132, 1.0),  # one full wave
    (198, 2 / 1.5),  # 1.5 waves: q = 2 / 1.5
    (264, 1.0),  # two full waves
    (0, 1.0),  # no CTAs recorded: no quantization
    (float("nan"), 1.0),
])
def test_wave_quantization_by_hand(ctas, q):
    r = predict(pts([("h200-sxm", "bf16", 4096, 4096, 4096)], ctas=ctas), CALS).iloc[0]
    # compute term 2.74877906944e-4 s (above), memory term 100_663_296 / 4e12 = 2.5165824e-5 s
    assert r["time_floor_s"] == pytest.approx(2.74877906944e-4 * q + 2e-6, rel=1e-12)
    assert r["time_calibrated_s"] == pytest.approx(2.74877906944e-4, rel=1e-12)  # q never enters this tier


def test_wave_quantization_never_lifts_a_memory_bound_point():
    r = predict(pts([("h200-sxm", "bf16", 1, 4096, 4096)], ctas=66), CALS).iloc[0]
    # compute 6.71e-8 × 2 stays under memory 8.392704e-6
    assert r["time_floor_s"] == pytest.approx(8.392704e-6 + 2e-6, rel=1e-12)


def test_sm_clock_scales_calibrated_compute_not_bandwidth():
    rows = [("h200-sxm", "bf16", 4096, 4096, 4096)]
    half = one(rows, CALS, sm_clock_hz=1e9).iloc[0]  # 1e9 / 2e9: 500e12 → 250e12
    assert half["peak_calibrated"] == pytest.approx(250e12, rel=1e-12)
    assert half["time_calibrated_s"] == pytest.approx(5.49755813888e-4, rel=1e-12)  # 137_438_953_472 / 250e12
    assert half["bandwidth_calibrated"] == 4e12
    assert half["time_datasheet_s"] == pytest.approx(137_438_953_472 / 989.4e12, rel=1e-12)  # datasheet unscaled
    by_col = predict(pts(rows, sm_clock_hz=1e9), CALS).iloc[0]
    assert by_col["peak_calibrated"] == pytest.approx(250e12, rel=1e-12)
    named = predict(pts(rows * 2, clk=[0.5e9, "n/a"]), CALS, sm_clock_hz="clk")
    assert list(named["peak_calibrated"]) == [pytest.approx(125e12, rel=1e-12), 500e12]  # "n/a": unscaled
    unscaled = predict(pts(rows, sm_clock_hz=float("nan")), CALS).iloc[0]
    assert unscaled["peak_calibrated"] == 500e12
    with pytest.raises(InputError, match=r"^sm_clock_hz column 'nope' is not in the points$"):
        predict(pts(rows), CALS, sm_clock_hz="nope")


def test_ties_are_memory_bound_and_a_floor_equal_to_the_time_is_not_latency():
    # a calibration whose read stream is exactly the bytes and whose bf16 ceiling exactly the FLOPs of the point:
    # 33_570_816 B / 33_570_816 B/s = 1 s = 33_554_432 FLOP / 33_554_432 FLOP/s, with a floor of exactly 1 s
    tie = parse_calibration({"schema_version": 1, "gpu_key": "h200-sxm", "sm_clock_hz": 2e9,
                             "ceilings": {"read_bytes_per_s": 33_570_816, "bf16_mma_flops": 33_554_432,
                                          "graph_launch_floor_s": 1.0}})
    r = one([("h200-sxm", "bf16", 1, 4096, 4096)], {"h200-sxm": tie}).iloc[0]
    assert r["t_memory_calibrated_s"] == r["t_compute_calibrated_s"] == 1.0
    assert r["bound_calibrated"] == "memory" and r["time_floor_s"] == 2.0


def test_non_numeric_clock_and_ctas_are_ignored_without_warnings():
    import warnings

    rows = [("h200-sxm", "bf16", 4096, 4096, 4096)] * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = predict(pts(rows, sm_clock_hz=["n/a", 1e9], ctas=["n/a", 0]), CALS)
    assert list(p["peak_calibrated"]) == [500e12, 250e12]  # "n/a" → NaN → unscaled
    assert list(p["time_floor_s"]) == pytest.approx([2.74877906944e-4 + 2e-6, 5.49755813888e-4 + 2e-6], rel=1e-12)


def test_missing_columns_message_and_empty_dtypes():
    with pytest.raises(InputError, match=r"^points lack column\(s\) scheme, N; need gpu, scheme, M, N, K$"):
        predict(pd.DataFrame({"gpu": ["h200-sxm"], "M": [1], "K": [1]}))
    empty = predict(pts([]))
    assert all(empty[c].dtype == np.float64 for c in TIME_COLUMNS)  # the roofline tiers predict() fills


def test_latency_bound_when_the_floor_exceeds_both_terms():
    r = one([("h200-sxm", "bf16", 1, 256, 256)], CALS).iloc[0]
    # bytes 256·256·2 + 256·2 + 256·2 = 132_096; 132_096 / 4e12 = 3.3024e-8 s < 2e-6 s floor
    assert r["bytes"] == 132_096
    assert r["bound_calibrated"] == "latency" and r["bound_datasheet"] == "memory"
    assert r["time_floor_s"] == pytest.approx(3.3024e-8 + 2e-6, rel=1e-12)


def test_uncalibrated_gpu_has_nan_calibrated_columns():
    r = one([("a100-sxm-80gb", "bf16", 1, 4096, 4096)], CALS).iloc[0]
    # a100: 2.039e12 B/s; 33_570_816 / 2.039e12
    assert r["time_datasheet_s"] == pytest.approx(33_570_816 / 2.039e12, rel=1e-12)
    for col in ("time_calibrated_s", "time_floor_s", "ridge_calibrated", "attainable_flops_calibrated", "floor_s"):
        assert math.isnan(r[col])
    assert r["bound_calibrated"] == "" and r["compute_unit_calibrated"] == ""


def test_group_size_column_changes_only_that_scheme():
    p = predict(pts([("h200-sxm", "w4a16", 1, 4096, 4096), ("h200-sxm", "w4a16", 1, 4096, 4096),
                     ("h200-sxm", "bf16", 1, 4096, 4096)], group_size=[64, np.nan, 64]))
    # G=64: 4096 × 64 groups × 2.5 B = 655_360; NaN: the default G=128, 327_680; bf16 takes no group size
    assert list(p["scale_bytes"]) == [655_360, 327_680, 0]


# ------------------------------------------------------------------------------------------------ speedup, crossover
def hand_frame():
    """A prediction-shaped frame with chosen times: two layers of the same shape, so only `layer` tells them apart;
    the bf16 time grows with M (base·M), so only `M` matches a batch with its own baseline."""
    rows = []
    for layer, base in (("q", 1.0), ("o", 2.0)):
        for m, t_w4 in ((1, 0.25), (2, 0.6), (4, 1.0), (8, 1.5)):
            rows.append(("h200-sxm", layer, 4096, 4096, m, "bf16", base * m, base * 3 * m))
            rows.append(("h200-sxm", layer, 4096, 4096, m, "w4a16", base * m * t_w4, base * 3 * m * t_w4 * m))
    return pd.DataFrame(rows, columns=["gpu", "layer", "N", "K", "M", "scheme", "time_datasheet_s", "time_floor_s"])


def test_speedup_joins_on_layer_and_batch():
    sp = speedup(hand_frame())
    w4 = sp[sp.scheme == "w4a16"]
    # baseline/time = 1 / t_w4 per batch, whichever layer: 4, 1.667, 1, 0.667
    assert list(w4["speedup"]) == pytest.approx([4.0, 1 / 0.6, 1.0, 1 / 1.5] * 2, rel=1e-12)
    assert list(w4["time_baseline_s"]) == [1.0, 2.0, 4.0, 8.0, 2.0, 4.0, 8.0, 16.0]
    assert list(sp.index) == list(hand_frame().index)


def test_speedup_keeps_rows_without_a_baseline_and_takes_the_first_duplicate():
    df = pd.DataFrame({"gpu": "h200-sxm", "N": 4096, "K": 4096, "M": [1, 1, 1, 2],
                       "scheme": ["bf16", "bf16", "w4a16", "w4a16"], "time_datasheet_s": [1.0, 3.0, 0.5, 0.5]},
                      index=[10, 11, 12, 13])
    sp = speedup(df)
    # M=1: the first bf16 row (1.0) is the baseline: 1/0.5 = 2; M=2 has no baseline: NaN, row kept
    assert list(sp.index) == [10, 11, 12, 13] and sp["speedup"].iloc[2] == 2.0 and math.isnan(sp["speedup"].iloc[3])
    assert list(sp["speedup"].iloc[:2]) == [1.0, 1 / 3]


def test_crossover_groups_by_n_and_by_k_and_its_columns():
    def frame(shapes):
        rows = []
        for (n, k), t in zip(shapes, ([0.5, 0.9, 1.2], [0.5, 2.0, 3.0]), strict=True):
            for m, tw in zip((1, 2, 4), t, strict=True):
                rows += [("h200-sxm", n, k, m, "bf16", 1.0), ("h200-sxm", n, k, m, "w4a16", tw)]
        return pd.DataFrame(rows, columns=["gpu", "N", "K", "M", "scheme", "time_datasheet_s"])

    # shape 1: speedups 2, 1.11, 0.83 → crossover at M = 4; shape 2: 2, 0.5, 0.33 → M = 2
    for shapes in (((4096, 4096), (8192, 4096)), ((4096, 4096), (4096, 8192))):
        cx = crossover(frame(shapes))
        assert list(cx.columns) == ["gpu", "scheme", "N", "K", "crossover_M"]
        assert list(cx["crossover_M"]) == [4.0, 2.0] and cx["crossover_M"].dtype == np.float64


def test_speedup_joins_on_shape():
    df = pd.DataFrame({"gpu": "h200-sxm", "N": [4096, 8192, 4096, 8192], "K": [4096, 4096, 4096, 4096], "M": 1,
                       "scheme": ["bf16", "bf16", "w4a16", "w4a16"], "time_datasheet_s": [1.0, 3.0, 0.5, 0.5]})
    assert list(speedup(df)["speedup"]) == [1.0, 1.0, 2.0, 6.0]
    df2 = df.assign(N=4096, K=[4096, 8192, 4096, 8192])
    assert list(speedup(df2)["speedup"]) == [1.0, 1.0, 2.0, 6.0]
    df3 = df.assign(N=4096, gpu=["h200-sxm", "a100-sxm-80gb"] * 2)
    assert list(speedup(df3)["speedup"]) == [1.0, 1.0, 2.0, 6.0]


def test_crossover_first_batch_at_or_below_one_per_tier():
    cx = crossover(hand_frame()).set_index("layer")
    # datasheet speedups 4, 1.67, 1.0, 0.67: the first <= 1 is M = 4 (exactly 1 counts)
    assert list(cx["crossover_M"]) == [4.0, 4.0] and list(cx["scheme"]) == ["w4a16", "w4a16"]
    floor = crossover(hand_frame(), time_col="time_floor_s")
    # floor tier: w4 time 3·base·t_w4·M → speedups 1/(t·M): 4, 0.83, 0.25, 0.08 → M = 2
    assert list(floor["crossover_M"]) == [2.0, 2.0]
    never = crossover(hand_frame()[lambda d: d.M <= 2])
    assert never["crossover_M"].isna().all() and len(never) == 2


def test_speedup_and_crossover_bad_input():
    with pytest.raises(InputError, match=r"^no column 'time_x' to compute a speedup from; valid: time_datasheet_s, "):
        speedup(hand_frame(), time_col="time_x")
    with pytest.raises(InputError, match=r"^baseline scheme 'fp8' is not among the predicted schemes; valid: bf16, "
                                         r"w4a16$"):
        speedup(hand_frame(), baseline="fp8")


def test_repeated_speedup_replaces_its_columns():
    once = speedup(hand_frame())
    twice = speedup(once, time_col="time_floor_s")
    assert list(twice.columns) == list(once.columns)
    assert twice["speedup"].iloc[3] == pytest.approx(1 / 1.2, rel=1e-12)  # floor: 3 / (3·0.6·2) at M = 2


# ------------------------------------------------------------------------------------------------ roll-up
TOY = Model("toy", "toy", (Layer("attn", 4096, 4096, 2), Layer("expert", 4096, 4096, 1, experts=4, top_k=2)))


def test_model_points_expert_load_by_hand():
    p = model_points(TOY, ["h200-sxm"], ["bf16"], [1, 2])
    e = p[p.layer == "expert"].set_index("batch")
    # E = 4, k = 2: batch 1 reads 4·(1 − 0.5¹) = 2 experts, 1·2/2 = 1 token each;
    # batch 2 reads 4·(1 − 0.5²) = 3 experts, 2·2/3 tokens each
    assert e.loc[1, "instances"] == pytest.approx(2.0) and e.loc[1, "M"] == pytest.approx(1.0)
    assert e.loc[2, "instances"] == pytest.approx(3.0) and e.loc[2, "M"] == pytest.approx(4 / 3)
    assert list(p[p.layer == "attn"]["instances"]) == [2.0, 2.0]
    assert "group_size" not in p and (model_points(TOY, ["h200-sxm"], ["w4a16"], [1], 64)["group_size"] == 64).all()
    for bad in ([0], [1.5], []):
        with pytest.raises(InputError, match="batches must be positive integers"):
            model_points(TOY, ["h200-sxm"], ["bf16"], bad)


def test_rollup_by_hand_with_experts_baseline_and_tiers():
    out = rollup(TOY, "h200-sxm", ["w4a16"], [1, 2], calibrations=CALS, baseline="bf16").set_index(["scheme",
                                                                                                    "batch"])
    bf1 = out.loc[("bf16", 1)]
    # batch 1: 2 attn + 2 experts, all at M = 1: 4 × 33_570_816 B / 4.8e12
    assert bf1["time_step_datasheet_s"] == pytest.approx(4 * 33_570_816 / 4.8e12, rel=1e-12)
    assert bf1["time_step_s"] == bf1["time_step_datasheet_s"]
    assert bf1["time_step_calibrated_s"] == pytest.approx(4 * 33_570_816 / 4e12, rel=1e-12)
    assert bf1["time_step_floor_s"] == pytest.approx(4 * (33_570_816 / 4e12 + 2e-6), rel=1e-12)
    assert bf1["bytes_step"] == 4 * 33_570_816 and bf1["flops_step"] == 4 * 33_554_432
    assert bf1["tokens_per_s"] == pytest.approx(4.8e12 / (4 * 33_570_816), rel=1e-12)
    bf2 = out.loc[("bf16", 2)]
    # batch 2: attn 2 × (W + 2·8192·2) at M = 2; experts 3 × (W + 4/3·8192·2) at M = 4/3
    t2 = (2 * (W_BF16 + 2 * 8192 * 2) + 3 * (W_BF16 + 4 / 3 * 8192 * 2)) / 4.8e12
    assert bf2["time_step_datasheet_s"] == pytest.approx(t2, rel=1e-12)
    assert bf2["tokens_per_s"] == pytest.approx(2 / t2, rel=1e-12)
    w41 = out.loc[("w4a16", 1)]
    assert w41["time_step_s"] == pytest.approx(4 * 8_732_672 / 4.8e12, rel=1e-12)
    assert w41["speedup"] == pytest.approx(33_570_816 / 8_732_672, rel=1e-12)
    assert bf1["speedup"] == 1.0
    assert list(out.reset_index()["model"].unique()) == ["toy"]


def test_rollup_columns_order_and_a_single_layer_model():
    single = Model("one", "one", (Layer("o", 4096, 4096, 3),))
    out = rollup(single, "h200-sxm", ["w4a16", "bf16"], [2, 1])
    assert list(out.columns) == ["model", "gpu", "scheme", "batch", "bytes_step", "flops_step",
                                 "time_step_datasheet_s", "time_step_calibrated_s", "time_step_floor_s",
                                 "time_step_s", "tokens_per_s"]
    # rows in the order given (schemes, then batches); batch stays an integer
    assert list(zip(out["scheme"], out["batch"], strict=True)) == [("w4a16", 2), ("w4a16", 1), ("bf16", 2),
                                                                   ("bf16", 1)]
    assert out["batch"].dtype == np.int64
    # one layer, 3 instances, bf16 at M = 1: 3 × 33_570_816 B / 4.8e12
    assert out["time_step_s"].iloc[3] == pytest.approx(3 * 33_570_816 / 4.8e12, rel=1e-12)


def test_rollup_time_column_and_missing_calibration():
    floor = rollup(TOY, "h200-sxm", ["bf16"], [1], calibrations=CALS, time_col="time_floor_s").iloc[0]
    assert floor["time_step_s"] == pytest.approx(4 * (33_570_816 / 4e12 + 2e-6), rel=1e-12)
    assert floor["tokens_per_s"] == pytest.approx(1 / floor["time_step_s"], rel=1e-12)
    assert "speedup" not in floor
    bare = rollup(TOY, ["h200-sxm"], "bf16", [1]).iloc[0]  # no calibration: NaN, not a sum of zeros
    assert math.isnan(bare["time_step_calibrated_s"]) and math.isnan(bare["time_step_floor_s"])
    w4 = rollup(TOY, "h200-sxm", ["w4a16"], [1], group_size=64).iloc[0]
    assert w4["bytes_step"] == 4 * (W_W4 + 655_360 + 8192 + 8192)  # G=64 doubles the metadata
    with pytest.raises(InputError, match=r"^unknown time column 'time_x_s'; valid: time_datasheet_s, "):
        rollup(TOY, "h200-sxm", ["bf16"], [1], time_col="time_x_s")


# ------------------------------------------------------------------------------------------------ schemes
def test_bad_group_sizes_are_rejected_with_the_value():
    for bad in (True, 64.5, "64", -1):
        with pytest.raises(InputError, match=r"^group size must be an integer >= 0 \(0 = one scale per row\), got "):
            get_scheme("w4a16", group_size=bad)
    assert get_scheme("w4a16", group_size=np.int64(64)).group_size == 64


def test_scheme_error_messages_name_the_value_and_the_choices():
    with pytest.raises(InputError, match=r"^unknown scheme 'int3'; valid: bf16, fp16, fp32, fp8, "):
        get_scheme("int3")
    with pytest.raises(InputError, match=r"^scheme bf16 does not take parameter\(s\) group_size, zero; accepted: "
                                         r"none$"):
        get_scheme("bf16", group_size=64, zero="int4")
    with pytest.raises(InputError, match=r"^scheme w8a8 does not take parameter\(s\) zero; accepted: scale_dtype$"):
        get_scheme("w8a8", zero="int4")
    with pytest.raises(InputError, match=r"^scheme w4a16 does not take parameter\(s\) granularity; accepted: "
                                         r"group_size, scale_dtype, zero$"):
        get_scheme("w4a16", granularity="block")
    with pytest.raises(InputError, match=r"^unknown scale dtype 'fp64'; valid: bf16, fp16, fp32$"):
        get_scheme("w4a16", scale_dtype="fp64")
    with pytest.raises(InputError, match=r"^unknown zero-point storage 'int2'; valid: fp16, int4, int8, none$"):
        get_scheme("w4a16", zero="int2")
    with pytest.raises(InputError, match=r"^unknown fp8 granularity 'row'; valid: block, per_channel, per_tensor$"):
        get_scheme("fp8", granularity="row")


def test_scheme_parameters_set_the_fields():
    assert get_scheme("w4a16", scale_dtype="bf16").scale_bits == 16
    assert get_scheme("w8a16", scale_dtype="fp32").scale_bits == 32
    assert get_scheme("w8a16", zero="int8").zero_bits == 8
    pc = get_scheme("fp8", granularity="per_channel")
    assert (pc.granularity, pc.act_granularity, pc.group_size, pc.act_group_size) == ("per_channel", "per_token", 0, 0)
    pt = get_scheme("fp8", granularity="per_tensor")
    assert (pt.granularity, pt.act_granularity, pt.group_size, pt.act_group_size) == ("per_tensor", "per_tensor", 0, 0)
    bl = get_scheme("fp8", granularity="block")
    assert (bl.granularity, bl.act_granularity, bl.group_size, bl.act_group_size) == ("block", "block", 128, 128)
    assert bl.bits_per_weight == pytest.approx(8 + 32 / 128**2)  # one fp32 scale per 128×128 tile
    assert get_scheme("w8a16").bits_per_weight == 8.0


def test_traffic_block_granularity_rounds_up_both_operands():
    t = traffic(get_scheme("fp8", granularity="block"), 4, 4096, 4100)
    # weight tiles ceil(4096/128)·ceil(4100/128) = 32·33 = 1056; activations 4 tokens × 33 blocks = 132; fp32 each
    assert t.scale_bytes == (1056 + 132) * 4


def test_traffic_does_not_overflow_integer_shapes():
    t = traffic("bf16", 3, 2**32, 2**32)
    # 2³²·2³² = 2⁶⁴ weights (would wrap to 0 in int64) × 2 B; outputs 3·2³²·2 B; activations the same
    assert t.weight_bytes == 2.0**65
    assert t.out_bytes == 3 * 2.0**33 and t.act_bytes == 3 * 2.0**33
    assert t.flops == 2.0 * 3 * 2.0**64


def test_predict_does_not_overflow_integer_columns():
    p = predict(pts([("h200-sxm", "w4a16", 1, 2**32, 2**32)])).iloc[0]
    # 2³²·2³² weights × 4 dequant ops (int64 would wrap 2⁶⁴ to 0); weights 2⁶⁴ × 0.5 B
    assert p["dequant_ops"] == 4 * 2.0**64 and p["weight_bytes"] == 2.0**63


def test_traffic_vectorizes_over_n_and_k_alone():
    t = traffic("w4a16", 1, np.array([4096, 8192]), 4096)
    assert t.bytes.shape == (2,) and list(t.weight_bytes) == [W_W4, 2 * W_W4]
    t = traffic("w4a16", 1, 4096, np.array([4096, 8192]))
    assert t.bytes.shape == (2,) and list(t.scale_bytes) == [META_W4, 2 * META_W4]


def test_bad_values_are_named_in_the_message():
    with pytest.raises(InputError, match=r"^M must be a positive number, got M=-2$"):
        traffic("bf16", np.array([0.5, -2.0]), 4096, 4096)
    with pytest.raises(InputError, match=r"^K must be a positive number, got K=nan$"):
        traffic("bf16", 1, 4096, float("nan"))
    with pytest.raises(InputError, match=r"^K=4100 is not divisible by the group size 128 of scheme w4a16; use a K "
                                         r"that is a multiple of 128 or another --group-size$"):
        traffic("w4a16", 1, 4096, np.array([4096, 4100, 4200]))
    with pytest.raises(InputError, match=r"^K=48 is not divisible by the group size 32 of scheme mxfp4"):
        check_group(get_scheme("mxfp4"), 48)
