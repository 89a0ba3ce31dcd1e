"""The kernel-aware tier: every term on hand-computed cases, the overlap rule and attribution, the datasheet fallback,
the parameter file's refusals, the fit on data it can recover, and every registered kernel declaring its facts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from models.hardware import Calibration
from models.kernel_fit import fit_table, leave_one_shape_out, predict_kernels
from models.kernel_model import (
    KernelParams,
    ParamTable,
    active_params,
    combine,
    kernel_ceilings,
    load_params,
    raw_terms,
)
from models.kernel_terms import DATASHEET_FIXED_S, GpuTerms, KernelFacts, gpu_terms, m_tiles_from

# A made-up GPU: 2 us to read 4 KiB, 1 TB/s beyond 1 MB (times: 2 us, 3 us at 1e6 B, 1003 us at 1e9 B).
CURVE_B = np.array([4096.0, 1e6, 1e9])
CURVE_T = np.array([2e-6, 3e-6, 1003e-6])
GPU = GpuTerms("test", CURVE_B, CURVE_T, {"w4": 1e13, "w8": 2e13, "e4m3": 4e13}, fma_per_s=1e13,
               path_flops={"cuda_core": 2e13, "mma_sync_f16": 1e15, "wgmma_bf16": 2e15}, sources={})


def test_facts_refuse_unknown_names_and_bad_tiles():
    with pytest.raises(InputError, match="family 'warp'"):
        KernelFacts("warp", "cuda_core")
    with pytest.raises(InputError, match="instruction path 'hmma'"):
        KernelFacts("gemv", "hmma")
    with pytest.raises(InputError, match="dequantization 'w3'"):
        KernelFacts("gemv", "cuda_core", "w3")
    with pytest.raises(InputError, match="m_tiles"):
        KernelFacts("gemv", "cuda_core", m_tiles=((16, 0),))


def test_tile_padding_and_passes_by_hand():
    f = KernelFacts("mma_sync", "mma_sync_f16", m_tiles=((16, 16), (32, 32), (256, 64)), bn=128)
    M = np.array([1, 17, 100, 256])
    assert f.tile_rows(M).tolist() == [16, 32, 64, 64]
    assert f.padded_m(M).tolist() == [16, 32, 128, 256]  # 100 -> 2 tiles of 64
    assert f.m_passes(M).tolist() == [1, 1, 2, 4]
    assert f.padded_n(np.array([100, 128, 129])).tolist() == [128, 128, 256]
    # the table compressed from a tile function: rows 16 up to 16, then 32
    assert m_tiles_from(lambda m: 16 if m <= 16 else 32, range(1, 41)) == ((16, 16), (40, 32))


def test_read_curve_interpolation_and_extrapolation_by_hand():
    assert GPU.fixed_s == 2e-6
    # at a curve point: the point; below the first: the first
    assert GPU.read_time(np.array([1e6, 10.0])).tolist() == pytest.approx([3e-6, 2e-6])
    # log-log between 1e6 (3 us) and 1e9 (1003 us): at 1e7.5 (half-way in log) exp(mean(log 3e-6, log 1003e-6))
    assert GPU.read_time(np.array([10**7.5]))[0] == pytest.approx(np.sqrt(3e-6 * 1003e-6))
    # beyond 1e9: the last segment's bandwidth, (1e9 - 1e6) / (1000e-6 s) = 0.999e12 B/s
    assert GPU.read_time(np.array([2e9]))[0] == pytest.approx(1003e-6 + 1e9 / 0.999e12)


def test_terms_and_combination_by_hand():
    f = KernelFacts("gemv", "cuda_core", "w4", ((1, 1), (2, 2), (4, 4)), cuda_core_rows=True)
    t = raw_terms(f, GPU, M=[3], N=[1000], K=[1000], nbytes=[1e6])
    assert t.fixed[0] == 2e-6
    assert t.memory[0] == pytest.approx(1e-6)  # 3 us - 2 us
    assert t.dequant[0] == pytest.approx(1e6 / 1e13)  # N*K weights, one pass
    assert t.rows[0] == pytest.approx(1e6 * 4 / 1e13)  # M = 3 padded to 4 rows
    assert t.tensor[0] == 0.0
    p = KernelParams(extra_fixed_s=0.5e-6, mem_scale=2.0, alu_dq=2.0, alu_row=1.0, overlap=0.5)
    out = combine(t, p)
    # memory 2 us, alu 2*0.1 + 0.4 = 0.6 us, tensor 0: the largest (memory) whole, the others at half
    assert out["attr_memory_s"][0] == pytest.approx(2e-6)
    assert out["attr_alu_s"][0] == pytest.approx(0.3e-6)
    assert out["attr_tensor_s"][0] == 0.0
    assert out["time_kernel_s"][0] == pytest.approx(2e-6 + 0.5e-6 + 2e-6 + 0.3e-6)
    parts = sum(out[k][0] for k in ("attr_fixed_s", "attr_fixup_s", "attr_memory_s", "attr_alu_s", "attr_tensor_s"))
    assert parts == pytest.approx(out["time_kernel_s"][0])


def test_tensor_term_pads_m_and_n_and_uses_the_instruction_path():
    f = KernelFacts("wgmma", "wgmma_bf16", m_tiles=((16, 16), (256, 64)), bn=128)
    t = raw_terms(f, GPU, M=[20], N=[200], K=[4096], nbytes=[4096])  # no memory term: tensor is the largest
    # 20 rows -> 64 (tile of 64), 200 channels -> 256; 2 * 64 * 256 * 4096 FLOP at 2e15 FLOP/s
    assert t.tensor[0] == pytest.approx(2 * 64 * 256 * 4096 / 2e15)
    out = combine(t, KernelParams(tc_eff=0.5, overlap=1.0))
    assert out["attr_tensor_s"][0] == pytest.approx(2 * t.tensor[0])
    bw, peak = kernel_ceilings(f, GPU, KernelParams(mem_scale=2.0, tc_eff=0.5))
    assert bw == pytest.approx(0.999e12 / 2) and peak == pytest.approx(1e15)


def test_fp8_block_rescale_counts_one_fma_per_accumulator_and_k_block():
    f = KernelFacts("wgmma", "wgmma_bf16", m_tiles=((256, 16),), bn=128, k_block_rescale=128)
    t = raw_terms(f, GPU, M=[16], N=[256], K=[1024], nbytes=[1e6])
    assert t.rows[0] == pytest.approx(16 * 256 * 8 / 1e13)  # 8 K blocks
    assert "alu_row" in active_params(f) and "alu_dq" not in active_params(f)


def test_active_parameters_follow_the_declared_terms():
    assert active_params(KernelFacts("library", "wgmma_bf16")) == ("extra_fixed_s", "mem_scale", "overlap", "tc_eff")
    assert active_params(KernelFacts("gemv", "cuda_core", "w8", cuda_core_rows=True)) == (
        "extra_fixed_s", "mem_scale", "overlap", "alu_dq", "alu_row")


def test_datasheet_fallback_says_so():
    g = gpu_terms("h200-sxm", None)
    assert g.sources["memory"] == g.sources["alu"] == g.sources["tensor"] == "datasheet"
    assert g.fixed_s == pytest.approx(DATASHEET_FIXED_S + 4096 / 4.8e12)
    cal = Calibration("h200-sxm", "NVIDIA H200", 1.98e9, {"fp32_flops": 6e13, "dequant_w4_weights_per_s": 5e12},
                      read_curve={"bytes": [4096, 4096, 1e9], "ctas": [132, 264, 132], "time_s": [3e-6, 2e-6, 3e-4]})
    g = gpu_terms("h200-sxm", cal)
    assert g.sources["memory"] == "calibrated" and g.fixed_s == 2e-6  # the faster grid at each size
    assert g.dequant_weights_per_s["w4"] == 5e12 and g.sources["alu"] == "datasheet"  # w8/e4m3 not measured
    assert g.dequant_weights_per_s["w8"] == pytest.approx(6e13 / 2 / (7 / 4))
    assert g.fma_per_s == 3e13


def test_param_file_round_trip_and_refusals(tmp_path):
    table = ParamTable({"k": KernelParams(extra_fixed_s=1e-6, mem_scale=1.1)}, {"points": 3})
    path = tmp_path / "p.json"
    path.write_text(table.to_json())
    assert load_params(path).kernels["k"] == table.kernels["k"]
    assert load_params(tmp_path / "absent.json").kernels == {}
    bad = json.loads(table.to_json())
    bad["kernels"]["k"]["mem_scale"] = 99
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError, match=r"mem_scale must be a number in \[0.5, 4.0\], got 99"):
        load_params(path)
    bad["kernels"]["k"] = {"speed": 1}
    path.write_text(json.dumps(bad))
    with pytest.raises(InputError, match="unknown parameter"):
        load_params(path)
    path.write_text(json.dumps({"schema_version": 99, "kernels": {}}))
    with pytest.raises(InputError, match="schema_version 99"):
        load_params(path)


def _synthetic(facts, truth: KernelParams, shapes, batches=(1, 2, 4, 8, 16)) -> pd.DataFrame:
    rows = [{"gpu": "test", "kernel": "k", "M": m, "N": n, "K": k, "bytes": n * k * 0.5 + m * k * 2}
            for n, k in shapes for m in batches]
    df = pd.DataFrame(rows)
    t = raw_terms(facts, GPU, df["M"], df["N"], df["K"], df["bytes"])
    return df.assign(time_median_s=combine(t, truth)["time_kernel_s"])


def test_fit_recovers_parameters_and_predicts_a_left_out_shape():
    facts = {"k": KernelFacts("gemv", "cuda_core", "w4", ((1, 1), (2, 2), (4, 4), (8, 8), (16, 16)),
                              cuda_core_rows=True)}
    truth = KernelParams(extra_fixed_s=1e-6, mem_scale=1.2, alu_dq=3.0, alu_row=2.0, overlap=0.6)
    df = _synthetic(facts["k"], truth, [(4096, 4096), (8192, 4096), (4096, 11008), (22016, 4096), (2048, 2048)])
    table = fit_table(df, facts, lambda _: GPU, priors=False)
    got = predict_kernels(df, facts, lambda _: GPU, table)
    assert np.allclose(got["time_kernel_s"], df["time_median_s"], rtol=1e-3)
    assert table.kernels["k"].alu_dq == pytest.approx(3.0, rel=0.02)
    oos = leave_one_shape_out(df, facts, lambda _: GPU, priors=False)
    assert np.allclose(oos, df["time_median_s"], rtol=1e-2)
    assert table.provenance["points"] == len(df)
    # the weak priors (pulling mem_scale and alu_dq towards 1) cost little where the data decide
    shrunk = predict_kernels(df, facts, lambda _: GPU, fit_table(df, facts, lambda _: GPU))
    assert np.allclose(shrunk["time_kernel_s"], df["time_median_s"], rtol=0.05)


def test_kernels_without_facts_or_parameters_say_so():
    facts = {"k": KernelFacts("library", "wgmma_bf16")}
    df = pd.DataFrame({"gpu": ["test"] * 2, "kernel": ["k", "mystery"], "M": [1, 1], "N": [128, 128],
                       "K": [128, 128], "bytes": [1e6, 1e6]})
    got = predict_kernels(df, facts, lambda _: GPU, ParamTable({}, {}))
    assert got["kernel_params_source"].tolist() == ["neutral (microbenchmarks only)", "no kernel facts"]
    assert np.isfinite(got["time_kernel_s"][0]) and np.isnan(got["time_kernel_s"][1])
    fam = ParamTable({"other": KernelParams(mem_scale=2.0)}, {})
    got = predict_kernels(df.iloc[:1], {**facts, "other": KernelFacts("library", "wgmma_bf16")}, lambda _: GPU, fam)
    assert got["kernel_params_source"][0] == "family median (library)"
    with pytest.raises(InputError, match="lack column"):
        predict_kernels(df.drop(columns=["bytes"]), facts, lambda _: GPU, fam)


def test_every_registered_kernel_declares_its_facts():
    from kernels import registry

    undeclared = [s.name for s in registry.specs() if s.facts is None]
    assert undeclared == []
