"""The dashboard against the kernel-aware tier the model layer is adding: tiers come from models.roofline.TIERS, the
kernel tier is the default when the data carries it, and the attribution view and kernel ceilings draw from the
comparison's columns (a synthetic frame here; without the columns the view says so)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("dash")

from models import roofline  # noqa: E402
from tests.dashboard_synthetic import synthetic_measurements, write_dataset  # noqa: E402
from workbench.interfaces.dashboard import callbacks  # noqa: E402
from workbench.interfaces.dashboard.callbacks import AppState  # noqa: E402
from workbench.interfaces.dashboard.data import build_data  # noqa: E402
from workbench.interfaces.dashboard.queries import default_selection, make_selection, tier_options  # noqa: E402

ATTR = ("attr_fixed_s", "attr_memory_s", "attr_alu_s", "attr_tensor_s", "attr_fixup_s", "attr_remainder_s")


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_dataset(root, synthetic_measurements(gpus=("h200-sxm",)))
    return build_data(root)


@pytest.fixture()
def kernel_tier(monkeypatch):
    monkeypatch.setitem(roofline.TIERS, "kernel", "time_kernel_s")


def _with_kernel_columns(data):
    from workbench.analysis.compare import latest_points

    cmp = data.comparison.copy()
    t = cmp["time_measured_s"].to_numpy(dtype=float)
    predicted = 0.9 * t
    cmp["time_kernel_s"] = predicted
    cmp["ratio_kernel"] = predicted / t
    cmp["attr_fixed_s"] = 2e-6
    cmp["attr_memory_s"] = predicted - 2e-6 - 1e-6
    cmp["attr_alu_s"] = 1e-6
    cmp["attr_tensor_s"] = 0.0
    cmp["attr_fixup_s"] = 0.0
    cmp["attr_remainder_s"] = t - predicted
    cmp.loc[cmp.index[::7], "attr_remainder_s"] = -1e-6  # a kernel faster than predicted
    cmp["kernel_bandwidth_bytes_per_s"] = 4.2e12
    cmp["kernel_peak_flops_per_s"] = 600e12
    return replace(data, comparison=cmp, latest=latest_points(cmp))


def _controls(data, **over):
    d = default_selection(data)
    values = {"gpus": ["h200-sxm"], "primary": None, "schemes": list(d.schemes), "kernels": [], "kernel_view": "best",
              "shape": d.shape, "m_lo": 1, "m_hi": 256, "baseline": d.baseline, "tier": d.tier, "mode": d.mode}
    values.update(over)
    return tuple(values.values())


def test_tier_options_iterate_over_tiers(plain, kernel_tier):
    values = [o["value"] for o in tier_options(plain)]
    assert values == list(roofline.TIERS) and "kernel" in values
    # the comparison carries the kernel tier for every registered kernel: it is offered and the default
    assert not next(o for o in tier_options(plain) if o["value"] == "kernel")["disabled"]
    assert default_selection(plain).tier == "kernel"
    bare = _without_kernel_columns(plain)
    assert next(o for o in tier_options(bare) if o["value"] == "kernel")["disabled"]
    assert default_selection(bare).tier == "floor"


def test_kernel_tier_is_the_default_and_drawn(plain, kernel_tier):
    # a grid without the tier: the predicted curve is the drawn kernels' own (synthetic: 0.9 x measured)
    data = _with_kernel_columns(_without_kernel_columns(plain))
    assert default_selection(data).tier == "kernel"
    assert not next(o for o in tier_options(data) if o["value"] == "kernel")["disabled"]
    state = AppState(data)
    fig = callbacks.view_figure(state, "roofline", _controls(data), [])
    names = [t.name for t in fig.data]
    assert any(n.endswith("predicted (kernel)") for n in names)
    ceilings = [t for t in fig.data if t.name.endswith(" ceiling")]
    assert ceilings and all(t.line.dash == "dash" for t in ceilings)  # the kernels' own ceilings, dashed
    time = callbacks.view_figure(state, "time", _controls(data), [])
    pred = next(t for t in time.data if t.name == "bf16 predicted (kernel)")
    meas = next(t for t in time.data if t.name == "bf16 measured (best kernel)")
    assert np.allclose(np.asarray(pred.y), 0.9 * np.asarray(meas.y), rtol=1e-6)


def test_attribution_view_stacks_the_terms(plain, kernel_tier):
    data = _with_kernel_columns(plain)
    state = AppState(data)
    fig = callbacks.view_figure(state, "attribution", _controls(data), [])
    assert fig.layout.barmode == "relative"
    rem = [t for t in fig.data if "remainder" in t.name]
    assert rem and any(min(t.y) < 0 for t in rem) and rem[0].marker.pattern.shape == "/"
    panels = {a.text for a in fig.layout.annotations}
    assert "w4a16 (best kernel)" in panels
    one = callbacks.view_figure(state, "attribution", _controls(data, kernels=["gemv_w4a16"]), [])
    assert {a.text for a in one.layout.annotations} == {"gemv_w4a16"}


def _without_kernel_columns(data):
    """The data as a comparison written before the kernel tier existed (and a prediction grid without it)."""
    from workbench.analysis.compare import latest_points

    cols = [c for c in data.comparison.columns if c.startswith(("attr_", "kernel_")) or c.endswith("_kernel")
            or c == "time_kernel_s"]
    cmp = data.comparison.drop(columns=cols)
    grid = data.predictions
    pred = grid.drop(columns=[c for c in grid.columns if "kernel" in c or c.startswith("attr_")])
    return replace(data, comparison=cmp, latest=latest_points(cmp), predictions=pred)


def test_attribution_without_the_columns_says_so(plain):
    bare = _without_kernel_columns(plain)
    fig = callbacks.view_figure(AppState(bare), "attribution", _controls(bare), [])
    assert not fig.data and "no kernel-aware prediction in this data" in fig.layout.annotations[0].text


@pytest.mark.parametrize(
    "junk",
    [None, 5, "x", [1, 2], {"a": 1}, ["h200-sxm", 7, None], "9" * 400, 1e308, float("nan"), True],
)
def test_selection_drops_values_of_the_wrong_type(plain, junk):
    sel = make_selection(plain, junk, junk, junk, junk, junk, junk, junk, junk, junk, junk, junk)
    d = default_selection(plain)
    assert sel.gpus and sel.primary in sel.gpus and sel.shape and 1 <= sel.m_lo <= sel.m_hi <= 4096
    assert sel.tier in roofline.TIERS and sel.mode in ("cold", "hot")
    assert sel.gpus == (("h200-sxm",) if isinstance(junk, list) and "h200-sxm" in junk else d.gpus)


def test_error_view_of_a_tier_without_its_ratio_column(plain, kernel_tier):
    from workbench.analysis.compare import latest_points

    data = _with_kernel_columns(plain)
    cmp = data.comparison.drop(columns=["ratio_kernel"])
    data = replace(data, comparison=cmp, latest=latest_points(cmp))
    fig = callbacks.view_figure(AppState(data), "error", _controls(data), [])
    assert "Model error (kernel)" in fig.layout.title.text
    assert np.allclose(np.asarray(fig.data[0].customdata, dtype=float)[np.isfinite(fig.data[0].customdata)], 0.9)


def test_whole_model_view_draws_the_tier_its_title_names(plain):
    """The kernel tier has no precomputed roll-up: the whole-model curve is the layers' fastest registered kernels
    (workbench.analysis.model_tier.model_steps_kernel_tier), not the floor roll-up standing in under a kernel title."""
    from workbench.analysis.model_tier import model_steps_kernel_tier

    state = AppState(plain)
    schemes = ["bf16", "w4a16"]
    fig = callbacks.view_figure(state, "rollup", _controls(plain, schemes=schemes, tier="kernel", m_lo=1, m_hi=16), [])
    assert "kernel" in fig.layout.title.text
    want = model_steps_kernel_tier("llama-2-7b", "h200-sxm", schemes, [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 16],
                                   plain.calibrations, plain.params)
    floor = callbacks.view_figure(state, "rollup", _controls(plain, schemes=schemes, tier="floor", m_lo=1, m_hi=16), [])
    for scheme in schemes:
        got = next(t for t in fig.data if t.name.startswith(scheme) and "predicted" in t.name and t.xaxis == "x")
        ref = want[want["scheme"] == scheme].set_index("batch")["time_step_s"]
        step = dict(zip(got.x, got.y, strict=True))
        batches = sorted(set(step) & set(ref.index))
        assert batches and np.allclose([step[b] for b in batches], [ref[b] * 1e3 for b in batches], rtol=1e-9)
        other = next(t for t in floor.data if t.name.startswith(scheme) and "predicted" in t.name and t.xaxis == "x")
        assert not np.allclose(np.asarray(other.y, dtype=float), np.asarray(got.y, dtype=float), rtol=1e-3)
