"""`model-check --by-gpu` tables (workbench/analysis/gpu_check.py) on points made by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.analysis.gpu_check import measured_points, public_points, speedup_errors, summarize


def _pts(rows):
    return pd.DataFrame(rows, columns=["view", "gpu", "scheme", "kernel", "N", "K", "M", "time_s", "time_pred_s"])


def test_speedup_error_is_predicted_over_measured_speedup():
    pts = _pts([("v", "g", "bf16", "cublas_bf16", 64, 64, 1, 10.0, 9.0),
                ("v", "g", "w4a16", "trtllm_wo_int4", 64, 64, 1, 4.0, 3.0),  # measured 2.5x, predicted 3x: +20 %
                ("v", "g", "w8a8", "trtllm_sq_int8", 64, 64, 2, 5.0, 5.0)])  # no bf16 at M = 2: no speedup
    sp = speedup_errors(pts)
    assert len(sp) == 1 and sp["speedup_measured"].iloc[0] == 2.5 and sp["speedup_predicted"].iloc[0] == 3.0
    assert sp["speedup_error"].iloc[0] == pytest.approx(0.2)


def test_summary_per_gpu_and_scheme():
    pts = _pts([("in sample", "g", "bf16", "b", 64, 64, m, 10.0, 10.0 * (1 + e)) for m, e in
                zip((1, 2, 4, 8), (-0.1, 0.0, 0.1, 0.3), strict=True)]
               + [("in sample", "g", "w8a16", "w", 64, 64, 1, 5.0, 4.5)])
    s = summarize(pts).set_index(["gpu", "scheme"])
    b = s.loc[("g", "bf16")]
    assert b["n"] == 4 and b["signed_median"] == pytest.approx(0.05) and b["median_abs"] == pytest.approx(0.1)
    assert b["p90_abs"] == pytest.approx(np.percentile([0.1, 0.0, 0.1, 0.3], 90))
    w = s.loc[("g", "w8a16")]  # speedup measured 2, predicted 9 / 4.5 = 2 (bf16 at M = 1 is 10 % fast): 0 error
    assert w["speedup_n"] == 1 and w["speedup_signed_median"] == pytest.approx(0.0)
    assert s.loc[("g", "all")]["n"] == 5


def test_public_rows_aggregate_per_kernel_and_point_and_take_aliases():
    pub = pd.DataFrame({"gpu": "l40s", "scheme": ["bf16", "bf16", "fp8"], "kernel": ["cublas_bf16", "cublas_bf16",
                                                                                     "cublaslt_fp8"],
                        "group_size": np.nan, "M": 1, "N": 4096, "K": 4096, "time_s": [1e-5, 3e-5, 5e-6]})
    pts = public_points(pub)
    assert len(pts) == 2 and set(pts["kernel"]) == {"cublas_bf16", "torch_fp8_scaled_mm"}
    assert pts.loc[pts["kernel"] == "cublas_bf16", "time_s"].iloc[0] == pytest.approx(2e-5)
    assert pts.loc[pts["kernel"] == "cublas_bf16", "bytes"].iloc[0] == 4096 * 4096 * 2 + 4096 * 2 * 2


def test_measured_points_name_their_view():
    cp = pd.DataFrame({"view": ["in sample", "LOSO", "holdout"], "gpu_key": "h200-sxm", "scheme": "bf16",
                       "kernel": "k", "N": 1, "K": 1, "M": 1, "time_measured_s": 1.0, "time_kernel_s": 1.1,
                       "time_kernel_loso_s": 1.2})
    got = measured_points(cp)
    assert got["view"].tolist() == ["in sample", "leave one shape out"]
    assert got["time_pred_s"].tolist() == [1.1, 1.2]
