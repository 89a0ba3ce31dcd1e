"""The roofline model: tiers, bounds, speedup, crossover, roll-up and the chapter's own numbers."""


import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from models.hardware import get_gpu, parse_calibration
from models.rollup import rollup
from models.roofline import crossover, predict, speedup
from models.schemes import SCHEME_NAMES, traffic

BATCHES = [1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 4096, 8192]


def grid(gpus, schemes, batches, N=22016, K=4096):
    rows = [(g, s, m, N, K) for g in gpus for s in schemes for m in batches]
    return pd.DataFrame(rows, columns=["gpu", "scheme", "M", "N", "K"])


def calibration(**ceilings):
    base = {"read_bytes_per_s": 4.4e12, "graph_launch_floor_s": 2e-6, "fp32_flops": 50e12, "fp16_mma_flops": 600e12,
            "bf16_mma_flops": 600e12, "int8_mma_ops": 1200e12, "fp8_mma_flops": 460e12, "fp8_mma_emulated": True}
    return parse_calibration({"schema_version": 1, "gpu_key": "h200-sxm", "gpu_name": "NVIDIA H200",
                              "sm_clock_hz": 1.98e9, "ceilings": {**base, **ceilings}})


def test_datasheet_tier_is_max_of_memory_and_compute():
    pred = predict(grid(["h200-sxm"], ["bf16"], [1, 4096]))
    # by hand, N = 22016, K = 4096: weights 22016·4096·2 = 180_355_072 B; M = 1 adds 4096·2 + 22016·2 = 52_224 B;
    # M = 4096 adds 4096·4096·2 + 4096·22016·2 = 213_909_504 B. FLOPs 2·M·22016·4096.
    nbytes = np.array([180_407_296, 394_264_576])
    flops = np.array([180_355_072, 738_734_374_912])
    assert np.allclose(pred["t_memory_s"], nbytes / 4.8e12, rtol=1e-12, atol=0)
    assert np.allclose(pred["t_compute_s"], flops / 989.4e12, rtol=1e-12, atol=0)
    assert np.allclose(pred["time_datasheet_s"], [180_407_296 / 4.8e12, 738_734_374_912 / 989.4e12], rtol=1e-12,
                       atol=0)
    assert list(pred["bound_datasheet"]) == ["memory", "compute"]
    assert np.allclose(pred["ridge"], 989.4e12 / 4.8e12)
    assert np.allclose(pred["attainable_flops"], np.minimum(989.4e12, pred["intensity"] * 4.8e12))
    assert pred["time_calibrated_s"].isna().all() and (pred["bound_calibrated"] == "").all()


def test_w4a16_over_bf16_at_batch_1_is_3_85():
    sp = speedup(predict(grid(["h200-sxm", "a100-sxm-80gb"], ["bf16", "w4a16"], [1], N=28672, K=8192)))
    assert sp[sp.scheme == "w4a16"]["speedup"].to_numpy() == pytest.approx(16 / 4.15625, rel=2e-3)


@pytest.mark.parametrize("gpu", ["h200-sxm", "h100-sxm", "a100-sxm-80gb", "l40s", "rtx-4090", "t4", "b200"])
def test_speedup_never_rises_with_batch_and_reaches_one_when_compute_bound(gpu):
    # On a GPU without bf16 (T4) bf16 falls back to the FP32 ceiling; compare with fp16 there.
    baseline = "bf16" if get_gpu(gpu).peak("bf16") > 0 else "fp16"
    sp = speedup(predict(grid([gpu], [baseline, "w4a16", "w8a16"], BATCHES)), baseline)
    for scheme in ("w4a16", "w8a16"):
        s = sp[sp.scheme == scheme].sort_values("M")
        assert np.all(np.diff(s["speedup"].to_numpy()) <= 1e-12)
        base_compute = sp[(sp.scheme == baseline) & (sp["bound_datasheet"] == "compute")]["M"]
        both_compute = s[(s["bound_datasheet"] == "compute") & s.M.isin(base_compute)]
        assert len(both_compute) and (both_compute["speedup"] <= 1 + 1e-12).all()
        assert (s[~s.M.isin(both_compute.M)]["speedup"] > 1).all()


def test_crossover_moves_later_with_a_higher_ridge():
    gpus = ["a100-sxm-80gb", "h200-sxm", "h100-sxm", "l40s"]
    ridges = [get_gpu(g).ridge("fp16") for g in gpus]
    assert ridges == sorted(ridges)
    cross = crossover(predict(grid(gpus, ["bf16", "w4a16"], BATCHES)))
    xs = cross.set_index("gpu").loc[gpus, "crossover_M"].to_numpy()
    assert np.all(np.isfinite(xs)) and np.all(np.diff(xs) > 0)
    never = crossover(predict(grid(["h200-sxm"], ["bf16", "w4a16"], [1, 2, 4])))
    assert np.isnan(never["crossover_M"].iloc[0])


def test_compute_unit_fallback_is_reported():
    pred = predict(grid(["a100-sxm-80gb", "h200-sxm", "b200"], ["fp8", "nvfp4"], [4096]))
    used = dict(zip(pred.gpu + "/" + pred.scheme, pred.compute_unit_used, strict=True))
    assert used == {"a100-sxm-80gb/fp8": "fp16", "a100-sxm-80gb/nvfp4": "fp16", "h200-sxm/fp8": "fp8",
                    "h200-sxm/nvfp4": "fp8", "b200/fp8": "fp8", "b200/nvfp4": "fp4"}


def test_calibrated_tier_clock_scaling_and_floor():
    cal = calibration()
    pts = grid(["h200-sxm"], ["bf16", "fp8"], [1, 4096], N=4096, K=4096)
    pred = predict(pts, {"h200-sxm": cal})
    t = traffic("bf16", 1, 4096, 4096)
    row = pred[(pred.scheme == "bf16") & (pred.M == 1)].iloc[0]
    assert row["time_calibrated_s"] == pytest.approx(t.bytes / 4.4e12)
    assert row["time_floor_s"] == pytest.approx(t.bytes / 4.4e12 + 2e-6)
    fp8 = pred[(pred.scheme == "fp8") & (pred.M == 4096)].iloc[0]
    assert fp8["peak_calibrated"] == 600e12 and fp8["bound_calibrated"] == "compute"  # emulated e4m3: fp16 mma
    half = predict(pts, {"h200-sxm": cal}, sm_clock_hz=0.99e9)
    assert np.allclose(half["peak_calibrated"], pred["peak_calibrated"] / 2)
    assert np.allclose(half["bandwidth_calibrated"], 4.4e12)
    tiny = predict(grid(["h200-sxm"], ["bf16"], [1], N=256, K=256), {"h200-sxm": cal})
    assert tiny["bound_calibrated"].iloc[0] == "latency"
    assert np.isnan(predict(grid(["a100-sxm-80gb"], ["bf16"], [1]), {"h200-sxm": cal})["time_floor_s"].iloc[0])


def test_wave_quantization_applies_to_the_compute_term_only_when_ctas_given():
    cal = calibration()
    pts = grid(["h200-sxm"], ["bf16"], [4096], N=4096, K=4096)
    full = predict(pts.assign(ctas=132), {"h200-sxm": cal})
    partial = predict(pts.assign(ctas=133), {"h200-sxm": cal})  # one CTA spills into a second wave
    no_ctas = predict(pts, {"h200-sxm": cal})
    assert full["time_floor_s"].iloc[0] == pytest.approx(no_ctas["time_floor_s"].iloc[0])
    t_comp = no_ctas["t_compute_calibrated_s"].iloc[0]
    assert partial["time_floor_s"].iloc[0] == pytest.approx(t_comp * 2 / (133 / 132) + 2e-6)


def test_predict_over_1e5_points_matches_each_row_alone():
    # Its speed is a benchmark (bench/bench_predict.py), not a timed test: here, 10^5 rows in one call give what each
    # row gives alone (no row reads another's values).
    pts = grid(["h200-sxm", "a100-sxm-80gb", "l4", "b200"], list(SCHEME_NAMES), list(range(1, 2801)))
    assert len(pts) >= 1e5
    pred = predict(pts)
    assert len(pred) == len(pts) and pred["time_datasheet_s"].notna().all()
    for i in (0, 4_321, 55_555, len(pts) - 1):
        alone = predict(pts.iloc[[i]])
        assert alone["time_datasheet_s"].iloc[0] == pytest.approx(pred["time_datasheet_s"].iloc[i], rel=1e-12)


def test_predict_bad_input():
    with pytest.raises(InputError, match="unknown GPU"):
        predict(grid(["h300"], ["bf16"], [1]))
    with pytest.raises(InputError, match="unknown scheme"):
        predict(grid(["h200-sxm"], ["int3"], [1]))
    with pytest.raises(InputError, match="lack column"):
        predict(pd.DataFrame({"gpu": ["h200-sxm"], "M": [1]}))
    with pytest.raises(InputError, match="not divisible"):
        predict(grid(["h200-sxm"], ["w4a16"], [1], K=4100))
    with pytest.raises(InputError, match="baseline scheme 'bf16'"):
        speedup(predict(grid(["h200-sxm"], ["fp16"], [1])))


def test_group_size_column_is_honoured():
    pts = grid(["h200-sxm"], ["w4a16", "bf16"], [1]).assign(group_size=[64, 0])
    pred = predict(pts)
    assert pred["scale_bytes"].iloc[0] == pytest.approx(22016 * 4096 / 64 * 2.5)
    assert pred["scale_bytes"].iloc[1] == 0


def test_chapter_7b_bf16_on_h100_and_4_bits():
    # The chapter's arithmetic: 7e9 parameters in BF16 read once per token on an H100 SXM (3.35 TB/s).
    one = predict(pd.DataFrame({"gpu": ["h100-sxm"] * 2, "scheme": ["bf16", "w4a16"], "M": 1, "N": 7e9 / 4096,
                                "K": 4096}))
    bf16, w4 = one["time_datasheet_s"]
    assert bf16 >= 4.0e-3 and 1 / bf16 <= 240
    assert 3.5e9 < one["bytes"].iloc[1] < 3.7e9  # ~3.5 GB of 4-bit weights plus ~3.9% scales and zeros
    assert 3.7 < bf16 / w4 < 4.0
    # The same through a real model: Llama-2-7B's linear layers, lm_head included.
    roll = rollup("llama-2-7b", "h100-sxm", ["bf16", "w4a16"], [1], baseline="bf16").set_index("scheme")
    assert roll.loc["bf16", "time_step_s"] == pytest.approx(4.0e-3, rel=0.02)
    assert roll.loc["bf16", "tokens_per_s"] == pytest.approx(1 / roll.loc["bf16", "time_step_s"])
    assert 3.8 < roll.loc["w4a16", "speedup"] < 3.9


def test_rollup_sums_layers_and_handles_experts():
    out = rollup("llama-2-7b", ["h200-sxm"], ["bf16"], [1, 64])

    def t(n, k, m):  # by hand: every layer here is memory bound on the H200 (intensity < ridge 206)
        return (n * k * 2 + m * k * 2 + m * n * 2) / 4.8e12

    layer_sum = 32 * (t(12288, 4096, 64) + t(4096, 4096, 64) + t(22016, 4096, 64) + t(4096, 11008, 64))
    row = out[out.batch == 64].iloc[0]
    assert row["time_step_s"] == pytest.approx(layer_sum + t(32000, 4096, 64), rel=1e-12)
    assert row["time_step_s"] == pytest.approx(13_488_259_072 / 4.8e12, rel=1e-12)  # the bytes summed by hand
    assert row["tokens_per_s"] == pytest.approx(64 / row["time_step_s"])
    assert np.isnan(row["time_step_calibrated_s"])
    moe = rollup("mixtral-8x7b", "h200-sxm", ["bf16"], [1]).iloc[0]
    expert = t(28672, 4096, 1) + t(4096, 14336, 1)
    dense = t(6144, 4096, 1) + t(4096, 4096, 1) + t(8, 4096, 1)
    assert moe["time_step_s"] == pytest.approx(32 * (2 * expert + dense) + t(32000, 4096, 1), rel=1e-12)  # 2 experts
    with pytest.raises(InputError, match="batches must be positive"):
        rollup("llama-2-7b", "h200-sxm", ["bf16"], [0])
