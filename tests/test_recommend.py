"""`workbench recommend` logic (workbench.analysis.recommend) on the shipped H200 data and on synthetic comparisons."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from workbench.analysis import recommend as rec
from workbench.analysis.speedup import crossovers, pair_speedups

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def shipped():
    from workbench.interfaces.cli_compare import load_comparison

    comparison, cals = load_comparison(DATA)
    h200 = comparison[(comparison["gpu_key"] == "h200-sxm") & (comparison["mode"] == "cold")]
    if h200.empty:
        pytest.skip("no shipped H200 measurements")
    return comparison, cals, sorted(set(zip(h200["N"], h200["K"], strict=True)))


def test_names_a_switch_batch_per_shape_that_agrees_with_the_speedup_curves(shipped):
    comparison, _, shapes = shipped
    assert len(shapes) >= 4
    for N, K in shapes:
        table = rec.by_batch(comparison, "h200-sxm", N, K)
        runs = rec.switch_points(table)
        switch = rec.switch_batch(table)
        assert np.isfinite(switch), f"{N}x{K}: one scheme wins every batch: {rec.describe(runs)}"
        a, b = runs[0]["scheme"], runs[1]["scheme"]
        assert switch == runs[1]["from"] and runs[0]["to"] < switch
        sp = pair_speedups(comparison[comparison["mode"] == "cold"], a, b)
        sp = sp[(sp["gpu_key"] == "h200-sxm") & (sp["N"] == N) & (sp["K"] == K)].set_index("M")
        # before the switch a is faster than b or inside the noise; at it, b is faster beyond the noise
        assert (sp.loc[sp.index < switch, "speedup_high"] > 1).all(), f"{N}x{K}: {a} over {b}"
        assert sp.loc[switch, "speedup_high"] <= 1 or sp.loc[switch, "speedup_measured"] < 1
        cross = crossovers(sp.reset_index())
        assert float(cross["crossover_high"].iloc[0]) >= switch or float(cross["crossover_measured"].iloc[0]) == switch


def test_chapter_pattern_on_the_h200_gate_up_layer(shipped):
    """22016x4096: a 4-bit weight scheme at small batch, an 8-bit tensor-core scheme (fp8/w8a8) once compute grows."""
    comparison, _, _ = shipped
    table = rec.by_batch(comparison, "h200-sxm", 22016, 4096)
    runs = rec.switch_points(table)
    assert runs[0]["scheme"] == "w4a16" and runs[0]["from"] == 1
    assert runs[-1]["scheme"] in ("fp8", "w8a8") and runs[-1]["to"] == 256
    assert rec.describe(runs).startswith("w4a16 up to ")
    row = table.set_index("M").loc[1]
    assert row["margin"] > 0.1 and not row["tie"] and row["agree"]


def test_model_plan_is_no_slower_than_the_best_single_scheme(shipped):
    comparison, cals, _ = shipped
    plan = rec.plan(comparison, "llama-2-7b", "h200-sxm", calibrations=cals)
    assert list(plan["M"]) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert (plan["n_predicted_layers"] == 0).all()  # every Llama-2-7B layer shape is in the shipped data
    assert (plan["time_step_s"] <= plan["time_step_single_s"] * (1 + 1e-12)).all()
    assert (plan["gain_over_single"] >= 1 - 1e-12).all()
    first = plan.iloc[0]
    assert set(part.split("=")[1] for part in first["layers"].split(";")) == {"w4a16"}


def _frame(times: dict[str, list[tuple[float, float, float]]], batches=(1, 8, 64)) -> pd.DataFrame:
    rows = []
    for scheme, per_m in times.items():
        for M, (t, p10, p90) in zip(batches, per_m, strict=True):
            rows.append(dict(gpu_key="g", N=128, K=128, mode="cold", M=M, scheme=scheme, kernel=f"{scheme}_k",
                             role="optimized", time_measured_s=t, time_p10_s=p10, time_p90_s=p90,
                             time_floor_s=t * 0.5, time_datasheet_s=t * 0.4, timestamp="2026"))
    return pd.DataFrame(rows)


def test_tie_keeps_the_previous_winner():
    c = _frame({"a": [(1.0, 0.99, 1.01), (2.0, 1.9, 2.1), (5.0, 4.9, 5.1)],
                "b": [(1.5, 1.49, 1.51), (1.95, 1.9, 2.0), (3.0, 2.9, 3.1)]})
    t = rec.by_batch(c, "g", 128, 128)
    assert list(t["best_measured"]) == ["a", "b", "b"] and list(t["tie"]) == [False, True, False]
    assert rec.winners(t) == ["a", "a", "b"] and rec.switch_batch(t) == 64
    assert rec.describe(rec.switch_points(t)) == "a up to 8, b from 64"
    assert rec.describe(rec.switch_points(t, noise_aware=False)) == "a up to 1, b from 8"
    assert t["margin"].iloc[0] == pytest.approx(0.5)


def test_one_winner_and_bad_input():
    c = _frame({"a": [(1.0, 1.0, 1.0)] * 3, "b": [(2.0, 2.0, 2.0)] * 3})
    t = rec.by_batch(c, "g", 128, 128)
    assert np.isnan(rec.switch_batch(t)) and rec.describe(rec.switch_points(t)) == "a at every batch (1-64)"
    with pytest.raises(InputError, match="no cold measurements"):
        rec.by_batch(c, "g", 256, 128)
    with pytest.raises(InputError):
        rec.by_batch(c, "g", 128, 128, schemes=[])
    with pytest.raises(InputError):
        rec.allowed_schemes({"a": 0.1}, -1.0)


def test_accuracy_constraint_excludes_w4a16_on_outlier_weights():
    from workbench.analysis.quant_error import make_weights

    w = make_weights("outliers", 256, 1024, seed=0, rate=0.01, magnitude=20.0)
    errors = rec.scheme_errors(w, ["bf16", "w4a16", "w8a16", "fp8", "fp32"])
    assert errors["fp32"] == 0 and errors["bf16"] < 0.01 < errors["w4a16"]
    assert rec.allowed_schemes(errors, 0.05) == ["bf16", "w8a16", "fp8", "fp32"]
