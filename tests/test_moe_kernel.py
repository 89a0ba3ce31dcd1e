"""The grouped kernels' kernel tier (models.moe_kernel, workbench.analysis.moe_tier): the pass policy mirrors the
kernels' launch configuration, the expected passes match the drawn routings, and leave-one-model-out never fits on
the model it reports."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kernels.grouped.grouped_config import choose_tc_config, choose_wg_config, expert_bytes
from models.errors import InputError
from models.hardware import load_calibrations
from models.kernel_model import KernelParams
from models.moe import Routing, draw, inclusion
from models.moe_kernel import (
    GROUPED,
    Layer,
    expected_passes,
    expected_widths,
    expert_weight_bytes,
    layer_terms,
    pass_rows,
    pass_widths,
    tile_channels,
)
from models.workloads import get_model
from workbench.analysis import moe_tier

MODELS = ("mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "olmoe-1b-7b")
L2 = 60 << 20


@pytest.mark.parametrize("model", MODELS)
def test_pass_rows_and_bytes_match_the_kernels_own_policy(model):
    for layer in (x for x in get_model(model).layers if x.experts > 1):
        for name, g in GROUPED.items():
            assert expert_weight_bytes(g.scheme, layer.N, layer.K) == expert_bytes(g.scheme, layer.N, layer.K)
            for b in (1, 2, 8, 32, 64, 128, 256):
                rows = pass_rows(g, b, layer.N, layer.K, layer.experts, layer.top_k, L2)
                if g.widths:  # the wgmma kernel: passes of bm_max rows, 64-row tiles per warpgroup
                    cfg = choose_wg_config(b, layer.N, layer.K, layer.experts, layer.top_k)
                    bn = tile_channels(g, b, layer.N, layer.experts, layer.top_k, rows)
                    assert rows == cfg.bm_max and bn == 64 * cfg.wg and g.widths[-1] == 128, name
                    continue
                cfg = choose_tc_config(b, layer.N, layer.K, layer.experts, layer.top_k, scheme=g.scheme, l2_bytes=L2)
                assert rows == 8 * cfg.nt
    if model == "mixtral-8x7b":  # 8 x 112 items of 256 channels at B = 256 (gate+up); its down layer has 8 x 16
        assert choose_wg_config(256, 28672, 4096, 8, 2).wg == 4 and choose_wg_config(256, 4096, 14336, 8, 2).wg == 2


def test_pass_widths_take_the_smallest_wgmma_width_per_pass():
    assert pass_widths(np.array([0, 1, 16, 17, 64, 65, 100, 128, 129, 300]), 128, (16, 32, 64, 128)).tolist() == \
        [0, 16, 16, 32, 64, 128, 128, 128, 144, 320]
    assert pass_widths(np.array([70, 130]), 64, (16, 32, 64, 128)).tolist() == [80, 144]
    q = inclusion(Routing().shares(8), 2)
    draws = [np.bincount(draw(64, 8, 2, "uniform", s).ravel(), minlength=8) for s in range(60)]
    mc = np.mean([np.sum(pass_widths(c, 64, (16, 32, 64, 128))) for c in draws])
    assert expected_widths(64, q, 64, (16, 32, 64, 128)) == pytest.approx(mc, rel=0.03)


def test_the_wgmma_kernel_is_predicted_on_sm_90_only_and_where_it_is_faster():
    cals = load_calibrations()
    got = {gpu: moe_tier.layers(get_model("mixtral-8x7b"), gpu, ["bf16"], [1, 256], None, cals)
           for gpu in ("h200-sxm", "a100-sxm-80gb")}
    assert set(got["a100-sxm-80gb"]["kernel"]) == {"grouped_bf16_tc"}
    assert len(got["h200-sxm"]) == 4  # one row per (layer, batch): the fastest kernel
    assert set(got["h200-sxm"]["kernel"]) <= {"grouped_bf16_tc", "grouped_bf16_wg"}


def test_expected_passes_match_drawn_routings():
    q = inclusion(Routing("zipf", zipf_s=1.0).shares(64), 8)
    for b, rows in ((16, 8), (64, 8), (256, 32)):
        draws = [np.bincount(draw(b, 64, 8, "zipf:1", s).ravel(), minlength=64) for s in range(40)]
        mc = np.mean([np.sum(np.ceil(c / rows)) for c in draws])
        assert expected_passes(b, q, rows)[0] == pytest.approx(mc, rel=0.05)


def test_terms_of_a_drawn_routing_count_its_experts():
    cals = load_calibrations()
    gpu, l2 = moe_tier._gpu("h200-sxm", cals)
    layer = Layer("grouped_bf16_tc", 8, 2048, 2048, 64, 8, Routing(), seed=3)
    c = np.bincount(draw(8, 64, 8, "uniform", 3).ravel(), minlength=64)
    _, fig = layer_terms(layer, gpu, l2)
    assert fig["touched"] == np.count_nonzero(c) and fig["passes"] == np.count_nonzero(c)  # 8 rows a pass
    assert fig["flops"] == 2 * 8 * 8 * 2048 * 2048
    with pytest.raises(InputError, match="top-k must be"):
        layer_terms(Layer("grouped_bf16_tc", 8, 2048, 2048, 4, 8), gpu, l2)


def _synthetic(scale: dict[str, float]) -> pd.DataFrame:
    """Times the tier itself gives with known parameters, per model times a model-specific factor."""
    rows = [{"gpu": "h200-sxm", "model": m, "kernel": "grouped_bf16_tc", "batch": b, "N": x.N, "K": x.K,
             "experts": x.experts, "top_k": x.top_k, "routing": "uniform", "routing_seed": 0}
            for m in ("qwen3-30b-a3b", "olmoe-1b-7b", "mixtral-8x7b") for x in get_model(m).layers if x.experts > 1
            for b in (1, 4, 16, 64)]
    df = pd.DataFrame(rows)
    p = KernelParams(extra_fixed_s=2e-6, mem_scale=1.1, tc_eff=0.3, overlap=0.8, alu_row=2.0)
    got = moe_tier.grouped_tier(df, load_calibrations(), params={"grouped_bf16_tc": p})
    df["time_s"] = got["time_kernel_s"] * df["model"].map(scale)
    return df


def test_leave_one_model_out_fits_without_the_held_out_model():
    df = _synthetic({"qwen3-30b-a3b": 1.0, "olmoe-1b-7b": 1.0, "mixtral-8x7b": 1.0})
    got = moe_tier.leave_one_model_out(df, load_calibrations())
    assert got["error"].abs().max() < 0.03  # the form recovers its own times
    off = _synthetic({"qwen3-30b-a3b": 1.0, "olmoe-1b-7b": 1.0, "mixtral-8x7b": 2.0})
    got = moe_tier.leave_one_model_out(off, load_calibrations())
    mix = got[got["held_out"] == "mixtral-8x7b"]["error"]
    assert mix.median() == pytest.approx(-0.5, abs=0.05)  # fitted on the others: Mixtral's doubling is not seen
    with pytest.raises(InputError, match="two or more models"):
        moe_tier.leave_one_model_out(off[off["model"] == "qwen3-30b-a3b"], load_calibrations())


def test_model_fit_reads_the_datasets_moe_rows():
    """measured_rows picks the MoE rows of a measurement frame (not the dense ones, not the L2-hot ones) and the
    fit on them recovers the times it was given."""
    from tests.compare_fixtures import frame, point

    truth = _synthetic({"qwen3-30b-a3b": 1.0, "olmoe-1b-7b": 1.0, "mixtral-8x7b": 1.0})
    rows = [point("grouped_bf16_tc", "bf16", int(r.batch), float(r.time_s), N=int(r.N), K=int(r.K),
                  layer=f"{r.model}/{'expert_down' if r.N < r.K else 'expert_gate_up'}", experts=int(r.experts),
                  top_k=int(r.top_k), routing="uniform", routing_seed=0) for r in truth.itertuples()]
    rows += [point("bf16_gemv", "bf16", 1, 1e-5), {**rows[0], "mode": "hot"}]
    got = moe_tier.measured_rows(frame(rows))
    assert len(got) == len(truth) and set(got["kernel"]) == {"grouped_bf16_tc"}
    assert set(got["layer"]) == {"expert_gate_up", "expert_down"}
    fitted = moe_tier.fit(got, load_calibrations())
    pred = moe_tier.grouped_tier(got, load_calibrations(), params={k: p for k, (p, _) in fitted.items()})
    assert (pred["time_kernel_s"] / pred["time_s"] - 1).abs().max() < 0.03
