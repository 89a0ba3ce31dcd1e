"""The best-kernel-per-batch dispatcher (CPU only)."""

from __future__ import annotations

import pandas as pd
import pytest

from kernels import dispatch
from kernels.registry import KernelSpec
from models.errors import InputError

SPECS = [
    KernelSpec("g", "w4a16", "nvrtc", "optimized", "x:y", m_min=1, m_max=16),
    KernelSpec("t", "w4a16", "nvrtc", "optimized", "x:y", m_min=16, m_max=256),
    KernelSpec("ref", "w4a16", "nvrtc", "reference", "x:y", m_min=1, m_max=256),
    KernelSpec("t90", "fp8", "nvrtc", "optimized", "x:y", m_min=16, m_max=256, min_cc=90),
]


def _rows(points):
    return pd.DataFrame([{"kernel": k, "M": m, "N": n, "K": kk, "time_median_s": t} for k, m, n, kk, t in points])


def test_range_rule_prefers_the_most_specialized_kernel():
    assert dispatch.best_kernel("w4a16", 1, specs=SPECS).name == "g"
    assert dispatch.best_kernel("w4a16", 16, specs=SPECS).name == "t"
    assert dispatch.best_kernel("w4a16", 200, specs=SPECS).name == "t"
    assert dispatch.best_kernel("w4a16", 300, specs=SPECS) is None  # reference kernels are never chosen


def test_range_rule_follows_prefer_from_for_kernels_that_run_every_batch():
    wide = (SPECS[0], KernelSpec("t1", "w4a16", "nvrtc", "optimized", "x:y", m_min=1, m_max=256, prefer_from=16))
    assert [dispatch.best_kernel("w4a16", m, specs=wide).name for m in (1, 15, 16, 200)] == ["g", "g", "t1", "t1"]
    assert [r["kernel"] for r in dispatch.dispatch_table(["w4a16"], [4, 16], specs=wide)] == ["g", "t1"]
    # a measurement at M = 4 overrides the preference
    meas = _rows([("g", 4, 4096, 4096, 9e-6), ("t1", 4, 4096, 4096, 7e-6)])
    assert dispatch.best_kernel("w4a16", 4, meas, specs=wide).name == "t1"


def test_compute_capability_filters():
    assert dispatch.best_kernel("fp8", 32, cc=80, specs=SPECS) is None
    assert dispatch.best_kernel("fp8", 32, cc=90, specs=SPECS).name == "t90"


def test_measurements_decide_where_they_exist():
    meas = _rows([("g", 16, 4096, 4096, 9e-6), ("t", 16, 4096, 4096, 11e-6), ("t", 32, 4096, 4096, 12e-6)])
    assert dispatch.best_kernel("w4a16", 16, meas, specs=SPECS).name == "g"
    assert dispatch.best_kernel("w4a16", 32, meas, specs=SPECS).name == "t"
    # a shape only one candidate was measured on does not count
    meas2 = pd.concat([meas, _rows([("t", 16, 8192, 8192, 1e-6)])])
    assert dispatch.best_kernel("w4a16", 16, meas2, specs=SPECS).name == "g"
    assert dispatch.best_kernel("w4a16", 16, meas2, shape=(8192, 8192), specs=SPECS).name == "t"


def test_table_says_how_each_kernel_was_chosen():
    meas = _rows([("g", 16, 4096, 4096, 9e-6), ("t", 16, 4096, 4096, 11e-6)])
    rows = dispatch.dispatch_table(["w4a16"], [1, 16, 64], meas, specs=SPECS)
    assert [(r["M"], r["kernel"], r["chosen_by"]) for r in rows] == [(1, "g", "range"), (16, "g", "measured"),
                                                                     (64, "t", "range")]


def test_bad_input():
    with pytest.raises(InputError):
        dispatch.best_kernel("w4a16", 0, specs=SPECS)
    with pytest.raises(InputError):
        dispatch.best_kernel("w4a16", 16, pd.DataFrame({"kernel": ["t"], "M": [16]}), specs=SPECS)


def test_best_rows_picks_the_fastest_registered_kernel():
    meas = _rows([("tc_w4a16", 32, 4096, 4096, 12e-6), ("w4a16_gemv", 32, 4096, 4096, 20e-6),
                  ("nonexistent", 32, 4096, 4096, 1e-6)])
    meas["scheme"] = "w4a16"
    best = dispatch.best_rows(meas)
    assert list(best["kernel"]) == ["tc_w4a16"]


def test_architecture_specific_kernels_run_on_their_compute_capability_only():
    from kernels import registry

    wg = registry.get("wg_bf16")
    assert wg.supports(64, 90) and not wg.supports(64, 80) and not wg.supports(64, 100)
    assert wg.supports(64)  # no GPU named: the batch range alone
    assert "wg_bf16" not in [s.name for s in dispatch.candidates("bf16", 64, cc=100)]
    assert "wg_bf16" in [s.name for s in dispatch.candidates("bf16", 64, cc=90)]
