"""The dashboard's MoE view (issue 33 item 6): its data function on a hand-checkable frame, and the view on the
shipped data (CPU only)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.analysis.moe_curves import curves

US = 1e-6


def _row(kernel: str, layer: str, m: int, time_us: float, touched: int, seed: int = 0, **extra) -> dict:
    n, k = {"expert_gate_up": (28672, 4096), "expert_down": (4096, 14336)}[layer]
    return {"gpu_key": "h100-sxm", "kernel": kernel, "layer": f"mixtral-8x7b/{layer}", "M": m, "N": n, "K": k,
            "experts": 8, "top_k": 2, "routing": "uniform", "routing_seed": seed, "touched_experts": touched,
            "mode": "cold", "throttled": False, "ref_error_rel": 1e-3, "time_median_s": time_us * US, **extra}


def _frame() -> pd.DataFrame:
    rows = [
        _row("grouped_bf16_tc", "expert_gate_up", 8, 100.0, 6), _row("grouped_bf16_tc", "expert_down", 8, 50.0, 6),
        _row("grouped_w4a16_tc", "expert_gate_up", 8, 40.0, 6), _row("grouped_w4a16_tc", "expert_down", 8, 20.0, 6),
        # a second seed of the bf16 down layer: the median of 50 and 70 is 60
        _row("grouped_bf16_tc", "expert_down", 8, 70.0, 6, seed=1),
        # batch 4: only gate_up measured, so not a point of the gate_up + down sum
        _row("grouped_bf16_tc", "expert_gate_up", 4, 90.0, 5),
        # a throttled point and a dense row: never read
        _row("grouped_bf16_tc", "expert_gate_up", 2, 1.0, 3, throttled=True),
        {**_row("gemv_bf16", "expert_down", 8, 1.0, 1), "layer": "", "experts": 1},
    ]
    return pd.DataFrame(rows)


def test_measured_sum_speedup_and_touched_by_hand():
    got = curves("mixtral-8x7b", "experts", ["w4a16"], "uniform", ["h100-sxm"], [1, 2, 4, 8], _frame())
    meas = got[got["source"] == "measured"].set_index("scheme")
    assert list(meas["batch"]) == [8, 8]  # batch 4 lacks the down layer; batch 2 is throttled
    assert meas.loc["bf16", "time_s"] == pytest.approx(160.0 * US)  # 100 + median(50, 70)
    assert meas.loc["w4a16", "time_s"] == pytest.approx(60.0 * US)  # 40 + 20
    assert meas.loc["w4a16", "speedup"] == pytest.approx(160.0 / 60.0)
    assert meas.loc["bf16", "speedup"] == pytest.approx(1.0)
    assert list(meas["touched"]) == [6.0, 6.0]
    # a second bf16 kernel (sm_90: the wgmma one) at the same batch: its own measured curve, and the speedup's
    # baseline is the faster bf16 kernel (here wg: 80 + 40 = 120 against tc's 160)
    two = pd.concat([_frame(), pd.DataFrame([_row("grouped_bf16_wg", "expert_gate_up", 8, 80.0, 6),
                                            _row("grouped_bf16_wg", "expert_down", 8, 40.0, 6)])], ignore_index=True)
    both = curves("mixtral-8x7b", "experts", ["w4a16"], "uniform", ["h100-sxm"], [8], two)
    both = both[both["source"] == "measured"].set_index("kernel")
    assert both.loc["grouped_bf16_wg", "time_s"] == pytest.approx(120.0 * US)
    assert both.loc["grouped_bf16_tc", "speedup"] == pytest.approx(120.0 / 160.0)
    assert both.loc["grouped_w4a16_tc", "speedup"] == pytest.approx(120.0 / 60.0)
    down = curves("mixtral-8x7b", "down", ["w4a16"], "uniform", ["h100-sxm"], [8], _frame())
    assert down[(down["source"] == "measured") & (down["scheme"] == "bf16")]["time_s"].iloc[0] == pytest.approx(60 * US)


def test_predicted_touched_experts_and_layer_sum():
    from models.workloads import get_model
    from workbench.analysis import moe_tier

    got = curves("mixtral-8x7b", "experts", ["w4a16"], "uniform", ["h100-sxm"], [1, 2], None)
    pred = got[(got["source"] == "predicted") & (got["scheme"] == "w4a16")].set_index("batch")
    # uniform top-2 of 8: E·(1 − (1 − k/E)^B) = 8·(1 − 0.75^B): 2 at B = 1, 3.5 at B = 2
    assert pred.loc[1, "touched"] == pytest.approx(2.0)
    assert pred.loc[2, "touched"] == pytest.approx(3.5)
    assert set(pred["tier"]) == {"kernel"}
    layers = moe_tier.layers(get_model("mixtral-8x7b"), "h100-sxm", ["w4a16"], [1, 2])
    summed = layers.groupby("batch")["time_kernel_s"].sum()
    assert np.allclose(pred["time_s"].to_numpy(), summed.to_numpy())
    # a scheme without a grouped kernel is predicted with a roofline tier (H100: no calibration -> datasheet)
    w8 = curves("mixtral-8x7b", "experts", ["w8a16"], "zipf:1", ["h100-sxm"], [1], None)
    assert set(w8[w8["scheme"] == "w8a16"]["tier"]) == {"datasheet"}
    assert (w8["time_s"] > 0).all()
    fp8 = curves("mixtral-8x7b", "experts", ["fp8"], "uniform", ["h100-sxm"], [1], None)  # grouped_fp8_tc
    assert set(fp8[fp8["scheme"] == "fp8"]["tier"]) == {"kernel"}


def test_bad_layer_or_routing_is_one_line_error():
    from models.errors import InputError

    with pytest.raises(InputError, match="layer 'up'"):
        curves("mixtral-8x7b", "up", [], "uniform", ["h100-sxm"], [1], None)
    with pytest.raises(InputError, match="'uniform' or 'zipf:S'"):
        curves("mixtral-8x7b", "experts", [], "/etc/passwd", ["h100-sxm"], [1], None)


def test_moe_view_on_shipped_data_and_dense_views_stay_dense():
    from models.moe_kernel import GROUPED
    from workbench.interfaces.dashboard import callbacks, views_moe
    from workbench.interfaces.dashboard.data import load_data
    from workbench.interfaces.dashboard.queries import default_selection

    data = load_data(None)
    assert not data.comparison["kernel"].astype(str).isin(list(GROUPED)).any()  # MoE rows: only in the MoE view
    d = default_selection(data)
    controls = (["h100-sxm", "h200-sxm", "a100-sxm-80gb"], "h100-sxm", ["bf16", "w4a16"], [], "best", d.shape, 1,
                256, d.baseline, "kernel", "cold")  # fmt: skip
    fig = callbacks.view_figure(callbacks.AppState(data), "moe", controls, [], "time",
                                ("qwen3-30b-a3b", "experts", "uniform"))
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert "w4a16 measured (grouped_w4a16_tc)" in names and "w4a16 predicted (kernel, grouped_w4a16_tc)" in names
    assert any("A100" in a.text and "predictions only" in a.text for a in fig.layout.annotations)
    assert not any("H200" in a.text and "predictions only" in a.text for a in fig.layout.annotations)
    measured_axes = {t.xaxis for t in fig.data if t.name == "w4a16 measured (grouped_w4a16_tc)"}
    assert {"x", "x2"} <= measured_axes and "x3" not in measured_axes  # columns: H100, H200 measured; A100 not
    # three GPUs' time and speedup axes first (y1-y6), then the touched-experts overlays
    assert fig.layout.yaxis7.title.text == "touched experts" and fig.layout.yaxis7.overlaying == "y"
    measured = [t for t in fig.data if t.name == "w4a16 measured (grouped_w4a16_tc)" and t.yaxis == "y"][0]
    rows = views_moe.moe_rows(data, callbacks.AppState(data).frames([]), callbacks.AppState(data).selection(*controls),
                              views_moe.options("qwen3-30b-a3b"))
    want = rows[(rows["source"] == "measured") & (rows["scheme"] == "w4a16") & (rows["gpu"] == "h100-sxm")]
    assert np.allclose(np.asarray(measured.y), want["time_s"].to_numpy() * 1e6)
    assert views_moe.options("nope", 3, "/etc/passwd") == views_moe.options()  # unknown values fall back
