"""The W4A16 tricks-ladder figure (workbench.dashboard.fig_lessons.ladder) on synthetic rows, and its dashboard view
on the shipped data (where rungs 0, 4 and 5 were measured)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("plotly")

from dataclasses import replace  # noqa: E402

from models.ladder import RUNGS  # noqa: E402
from workbench.interfaces.dashboard import fig_lessons  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
TIMES_US = {  # synthetic, not measured: kernel -> {M: µs}
    "gemv_w4_ref": {1: 60.0, 4: 80.0, 16: 240.0},
    "ladder_w4_vec16": {1: 40.0, 4: 64.0},
    "ladder_w4_magic": {1: 30.0, 4: 40.0, 16: 120.0},
    "w4a16_gemv": {1: 15.0, 4: 40.0, 16: 120.0, 32: 1.0},
    "wg_w4a16": {1: 20.0, 4: 20.0, 16: 24.0},  # in LADDER rung 5 is shown from M = 16 only
    "tc_w4a16": {16: 30.0},  # slower than wg at M = 16: the rung takes its fastest kernel
    "cublas_bf16": {1: 46.0},  # not on the ladder
}


LADDER = RUNGS[:-1] + (replace(RUNGS[-1], m_from=16),)  # a rung shown from M = 16 (the m_from rule)


def _rows() -> pd.DataFrame:
    rows = [{"kernel": k, "M": m, "time_measured_s": t * 1e-6} for k, by in TIMES_US.items() for m, t in by.items()]
    return pd.DataFrame(rows)


def test_ladder_table_speedups_over_rung_0():
    t = fig_lessons.ladder_table(_rows(), LADDER)
    got = {(r.rung, r.M): (r.kernel, r.time_s * 1e6, r.speedup) for r in t.itertuples()}
    assert got[(1, 1)] == ("ladder_w4_vec16", pytest.approx(40.0), pytest.approx(1.5))
    assert got[(4, 16)][2] == pytest.approx(2.0)
    assert got[(5, 16)] == ("wg_w4a16", pytest.approx(24.0), pytest.approx(10.0))
    assert (5, 1) not in got and (5, 4) not in got and (3, 1) not in got and (1, 16) not in got
    assert set(t["M"]) == {1, 4, 16} and "cublas_bf16" not in set(t["kernel"])
    no_base = fig_lessons.ladder_table(_rows()[lambda d: d["kernel"] != "gemv_w4_ref"], LADDER)
    assert len(no_base) and no_base["speedup"].isna().all()


def test_the_shipped_tensor_core_rung_starts_at_batch_1():
    t = fig_lessons.ladder_table(_rows(), RUNGS)
    got = {(r.rung, r.M): r.kernel for r in t.itertuples()}
    assert got[(5, 1)] == "wg_w4a16" and got[(5, 16)] == "wg_w4a16"


def test_ladder_figure_two_panels_one_bar_trace_per_batch():
    fig = fig_lessons.ladder(_rows(), LADDER, title="ladder")
    assert len(fig.data) == 6  # 3 batches x (speedup, time)
    speed = [t for t in fig.data if t.yaxis == "y"]
    times = [t for t in fig.data if t.yaxis == "y2"]
    assert [t.name for t in speed] == ["M = 1", "M = 4", "M = 16"] and all(t.type == "bar" for t in fig.data)
    m1 = speed[0]
    assert list(m1.x) == ["0 chapter kernel", "1 16-byte loads", "2 fast INT4→FP16", "4 our best GEMV"]
    np.testing.assert_allclose(m1.y, [1.0, 1.5, 2.0, 4.0])
    assert list(m1.text) == ["1.00×", "1.50×", "2.00×", "4.00×"]
    np.testing.assert_allclose(times[2].y, [240.0, 120.0, 120.0, 24.0])  # M = 16 (rung 5 = wg, the faster)
    assert not any(t.showlegend for t in times) and fig.layout.yaxis2.type == "log" and fig.layout.yaxis.type == "log"
    assert list(fig.layout.xaxis.categoryarray) == [f"{r.index} {r.trick}" for r in LADDER]
    assert fig.layout.barmode == "group" and fig.layout.title.text == "ladder"
    assert "0x6400" in m1.customdata[2][2]  # hover says what the rung adds


def test_ladder_figure_without_ladder_rows_says_why():
    fig = fig_lessons.ladder(_rows()[lambda d: d["kernel"] == "cublas_bf16"], LADDER)
    assert not fig.data and "no kernel of the W4A16 ladder" in fig.layout.annotations[0].text


def test_ladder_view_on_the_shipped_data():
    pytest.importorskip("dash")
    from workbench.interfaces.dashboard import callbacks
    from workbench.interfaces.dashboard.callbacks import AppState
    from workbench.interfaces.dashboard.data import build_data
    from workbench.interfaces.dashboard.queries import default_selection

    state = AppState(build_data(DATA))
    d = default_selection(state.data)
    if state.data.latest.empty:
        pytest.skip("no shipped measurements")
    controls = (list(d.gpus), None, list(d.schemes), [], "all", "22016x4096", 1, 256, d.baseline, d.tier, "cold")
    fig = callbacks.view_figure(state, "ladder", controls, [])
    assert fig.data and "ladder" in fig.layout.title.text and "22016×4096" in fig.layout.title.text
    labels = {x for t in fig.data for x in t.x}
    assert {"0 chapter kernel", "4 our best GEMV"} <= labels
    model = callbacks.view_figure(state, "ladder", tuple(controls[:5]) + ("model:llama-2-7b",) + tuple(controls[6:]),
                                  [])
    assert not model.data and "per layer shape" in model.layout.annotations[0].text
