"""A library's GEMV path (KernelFacts.gemv_m, models.kernel_terms.kernel_paths): cuBLAS SGEMM with one batch row is a
matrix-vector product, priced as one read of the weights with its own parameters; above gemv_m the declared GEMM path.
Hand-computed on a made-up GPU, then on the shipped facts, parameters and H200 calibration (CPU only).

The made-up GPU G: reads 4 KiB in 2 us, 1e6 B in 3 us, 1e9 B in 1003 us; 1e13 FMA/s; library_fp32 2e13 FLOP/s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from models.kernel_fit import fit_table, predict_kernels
from models.kernel_model import KernelParams, ParamTable, combine, raw_terms
from models.kernel_terms import GEMV_PATH_KEY, GpuTerms, KernelFacts, kernel_paths

G = GpuTerms("test", np.array([4096.0, 1e6, 1e9]), np.array([2e-6, 3e-6, 1003e-6]),
             {"w4": 1e13, "w8": 2e13, "e4m3": 4e13}, fma_per_s=1e13,
             path_flops={"cuda_core": 2e13, "library_fp32": 2e13}, sources={}, sms=100, l2_bytes_per_s=4e12)
SGEMM = KernelFacts("library", "library_fp32", gemv_m=1)
GEMV_P = KernelParams(extra_fixed_s=1e-6, mem_scale=1.1, alu_row=1.0, overlap=1.0)
GEMM_P = KernelParams(extra_fixed_s=10e-6, mem_scale=1.5, tc_eff=0.5, overlap=0.0)
TABLE = ParamTable({"sgemm" + GEMV_PATH_KEY: GEMV_P, "sgemm": GEMM_P}, {})


def _points(M: list[int]) -> pd.DataFrame:
    # N = 1000, K = 250000: 2.5e8 fp32 weights = 1e9 B (the activations left out of the bytes, to keep it by hand)
    return pd.DataFrame({"gpu": "test", "kernel": "sgemm", "M": M, "N": 1000, "K": 250000, "bytes": 1e9})


def test_paths_split_at_gemv_m():
    (k1, f1, lo1, hi1), (k2, f2, lo2, hi2) = kernel_paths("sgemm", SGEMM)
    assert (k1, lo1, hi1) == ("sgemm@gemv", 1, 1) and (k2, lo2, hi2) == ("sgemm", 2, 1 << 30)
    assert f1 == KernelFacts("library", "cuda_core", cuda_core_rows=True) and f2 is SGEMM
    plain = KernelFacts("library", "wgmma_bf16")
    assert kernel_paths("cublas_bf16", plain) == (("cublas_bf16", plain, 1, 1 << 30),)
    with pytest.raises(InputError, match=r"gemv_m \(the largest M of a library's GEMV path; 0: none\) must be >= 0"):
        KernelFacts("library", "library_fp32", gemv_m=-1)


def test_gemv_path_is_a_read_of_the_weights_by_hand():
    got = predict_kernels(_points([1, 256]), {"sgemm": SGEMM}, lambda _: G, TABLE)
    m1, m256 = got.iloc[0], got.iloc[1]
    # M = 1, GEMV: fixed 2 us + extra 1 us + max(1.1 x (1003 - 2) us memory, 2.5e8 FMA / 1e13 = 25 us rows), no tensor
    assert m1["time_kernel_s"] == pytest.approx(2e-6 + 1e-6 + 1.1 * 1001e-6, rel=1e-12)
    # the read counted whole; the 25 us of products hide under it (overlap 1: (1 - 1) x 25 us); no tensor term
    assert m1["attr_memory_s"] == pytest.approx(1.1 * 1001e-6, rel=1e-12)
    assert m1["attr_alu_s"] == 0 and m1["attr_tensor_s"] == 0
    # M = 256, GEMM: 2 + 10 us + 1.5 x 1001 us memory + 2 x 256 x 2.5e8 / 2e13 / 0.5 = 12.8 ms tensor (overlap 0: sum)
    assert m256["time_kernel_s"] == pytest.approx(12e-6 + 1.5 * 1001e-6 + 12.8e-3, rel=1e-12)
    assert set(got["kernel_params_source"]) == {"fitted"}
    # without the GEMV fact, M = 1 is the GEMM: 12 us + 1501.5 us + 2 x 2.5e8 / 2e13 / 0.5 = 50 us
    one = predict_kernels(_points([1]), {"sgemm": KernelFacts("library", "library_fp32")}, lambda _: G, TABLE)
    assert one["time_kernel_s"].iloc[0] == pytest.approx(12e-6 + 1501.5e-6 + 50e-6, rel=1e-12)


def test_gemv_path_attribution_adds_up():
    got = predict_kernels(_points([1, 2, 256]), {"sgemm": SGEMM}, lambda _: G, TABLE)
    parts = got[["attr_fixed_s", "attr_fixup_s", "attr_memory_s", "attr_alu_s", "attr_tensor_s"]].sum(axis=1)
    assert np.allclose(parts, got["time_kernel_s"], rtol=1e-12)


def test_a_table_without_the_gemv_key_falls_back_and_says_so():
    got = predict_kernels(_points([1, 2]), {"sgemm": SGEMM}, lambda _: G, ParamTable({"sgemm": GEMM_P}, {}))
    assert got["kernel_params_source"].tolist() == ["family median (library)", "fitted"]
    assert np.isfinite(got["time_kernel_s"]).all()


def test_each_path_is_fitted_on_its_own_rows():
    shapes = [(1000, 250000), (2000, 100000), (4000, 4096), (512, 8192), (8192, 8192), (3000, 30000), (640, 640)]
    rows = []
    for M in (1, 2, 8, 64, 256):
        for N, K in shapes:
            rows.append({"gpu": "test", "kernel": "sgemm", "M": M, "N": N, "K": K, "bytes": 4.0 * N * K})
    rows = pd.DataFrame(rows)
    truth = []
    for key, f, lo, hi in kernel_paths("sgemm", SGEMM):
        sub = rows[rows["M"].between(lo, hi)]
        t = combine(raw_terms(f, G, sub["M"], sub["N"], sub["K"], sub["bytes"]), TABLE.kernels[key])
        truth.append(pd.Series(t["time_kernel_s"], index=sub.index))
    rows["time_median_s"] = pd.concat(truth).sort_index()
    table = fit_table(rows, {"sgemm": SGEMM}, lambda _: G, priors=False)
    assert set(table.kernels) == {"sgemm", "sgemm@gemv"}
    assert table.kernels["sgemm@gemv"].mem_scale == pytest.approx(1.1, rel=1e-3)
    assert table.kernels["sgemm"].mem_scale == pytest.approx(1.5, rel=1e-2)
    back = predict_kernels(rows, {"sgemm": SGEMM}, lambda _: G, table)
    assert np.allclose(back["time_kernel_s"], rows["time_median_s"], rtol=1e-3)


def test_shipped_cublas_fp32_at_m1_is_a_read_and_at_m256_the_gemm():
    from models.hardware import load_calibrations
    from models.kernel_model import load_params
    from models.paths import catalogue_dir
    from workbench.analysis.kernel_tier import gpu_lookup, kernel_facts, kernel_tier, params_path

    facts = kernel_facts()
    assert facts["cublas_fp32"].gemv_m == 1
    assert [k for k, f in facts.items() if f.gemv_m] == ["cublas_fp32"]  # the 16-bit GEMMs: same time at M = 1, 2
    cals = load_calibrations(catalogue_dir())
    g = gpu_lookup(cals)("h200-sxm")
    table = load_params(params_path())
    p1, p256 = table.kernels["cublas_fp32@gemv"], table.kernels["cublas_fp32"]
    N, K = 22016, 4096
    pts = pd.DataFrame({"gpu": "h200-sxm", "kernel": "cublas_fp32", "M": [1, 256], "N": N, "K": K,
                        "bytes": [4.0 * (N * K + K + N), 4.0 * (N * K + 256 * K + 256 * N)]})
    got = kernel_tier(pts, cals)
    read = float(g.read_time(np.array([pts["bytes"][0]]))[0]) - g.fixed_s
    rows = N * K / g.fma_per_s * p1.alu_row
    body = max(p1.mem_scale * read, rows) + (1 - p1.overlap) * min(p1.mem_scale * read, rows)
    assert got["time_kernel_s"][0] == pytest.approx(g.fixed_s + p1.extra_fixed_s + body, rel=1e-9)
    assert got["attr_tensor_s"][0] == 0
    read256 = float(g.read_time(np.array([pts["bytes"][1]]))[0]) - g.fixed_s
    tensor = 2.0 * 256 * N * K / g.path_flops["library_fp32"] / p256.tc_eff
    terms = [p256.mem_scale * read256, tensor]
    want = g.fixed_s + p256.extra_fixed_s + max(terms) + (1 - p256.overlap) * min(terms)
    assert got["time_kernel_s"][1] == pytest.approx(want, rel=1e-9) and got["attr_tensor_s"][1] > 0
