"""The kernel-aware tier (models/kernel_terms.py, kernel_model.py, kernel_fit.py) against numbers worked out by hand
(issue 21): every expected value is arithmetic on the constants written here, with the arithmetic in a comment.

The made-up GPU G: reads 4 KiB in 2 us, 1e6 B in 3 us, 1e9 B in 1003 us (1 TB/s beyond 1 MB; the last segment's rate
is (1e9 - 1e6) B / 1000e-6 s = 0.999e12 B/s); conversion rates w4 1e13, w8 2e13, e4m3 4e13 weights/s; 1e13 FMA/s;
products: cuda_core 2e13, mma_sync_f16 1e15, wgmma_bf16 2e15 FLOP/s; 100 SMs; L2 4e12 B/s.
The datasheet figures of h200-sxm (data/gpus.toml): 4.8e12 B/s, fp32 67e12, fp16/bf16 989.4e12, int8/fp8 1978.9e12,
132 SMs.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from models.hardware import Calibration
from models.kernel_fit import FIT_MIN_POINTS, OUTPUT_COLUMNS, fit_table, param_frame, predict_kernels
from models.kernel_model import (
    KernelParams,
    ParamTable,
    Terms,
    active_params,
    combine,
    kernel_ceilings,
    load_params,
    raw_terms,
)
from models.kernel_terms import GpuTerms, KernelFacts, gpu_terms, m_tiles_from

G = GpuTerms("test", np.array([4096.0, 1e6, 1e9]), np.array([2e-6, 3e-6, 1003e-6]),
             {"w4": 1e13, "w8": 2e13, "e4m3": 4e13}, fma_per_s=1e13,
             path_flops={"cuda_core": 2e13, "mma_sync_f16": 1e15, "wgmma_bf16": 2e15}, sources={}, sms=100,
             l2_bytes_per_s=4e12)
BIG = 1 << 30
H200 = {"bw": 4.8e12, "fp32": 67e12, "fp16": 989.4e12, "int8": 1978.9e12}


# ---------------------------------------------------------------------------------------------------- facts
@pytest.mark.parametrize("args, kw, message", [
    (("warp", "cuda_core"), {}, "kernel family 'warp' unknown; valid: gemv, mma_sync, wgmma, library"),
    (("gemv", "hmma"), {}, "instruction path 'hmma' unknown; valid: cuda_core, mma_sync_f16, mma_sync_bf16, "
                           "mma_sync_s8, wgmma_f16, wgmma_bf16, wgmma_s8, wgmma_e4m3, library_fp32"),
    (("gemv", "cuda_core", "w3"), {}, "dequantization 'w3' unknown; valid: none, w4, w8, e4m3"),
    (("gemv", "cuda_core"), {"m_tiles": ()}, "m_tiles must be ((largest M, tile rows), ...) of positive integers, "
                                             "got ()"),
    (("gemv", "cuda_core"), {"m_tiles": ((0, 1),)}, "m_tiles must be ((largest M, tile rows), ...) of positive "
                                                    "integers, got ((0, 1),)"),
    (("gemv", "cuda_core"), {"m_tiles": ((16, 0),)}, "m_tiles must be ((largest M, tile rows), ...) of positive "
                                                     "integers, got ((16, 0),)"),
    (("gemv", "cuda_core"), {"bn": -1}, "bn, k_block_rescale and extra_launches must be >= 0, got -1, 0, 0"),
    (("gemv", "cuda_core"), {"k_block_rescale": -1},
     "bn, k_block_rescale and extra_launches must be >= 0, got 0, -1, 0"),
    (("library", "wgmma_e4m3"), {"extra_launches": -1},
     "bn, k_block_rescale and extra_launches must be >= 0, got 0, 0, -1"),
])
def test_facts_refusals_word_for_word(args, kw, message):
    with pytest.raises(InputError) as info:
        KernelFacts(*args, **kw)
    assert str(info.value) == message


def test_facts_accept_the_smallest_valid_values():
    f = KernelFacts("gemv", "cuda_core", m_tiles=((1, 1),), bn=0, k_block_rescale=0)  # 1 and 0 are valid
    assert f.m_tiles == ((1, 1),) and f.dequant == "none" and f.stream_k_ctas == ()


def test_tile_rows_at_the_table_edges():
    f = KernelFacts("mma_sync", "mma_sync_f16", m_tiles=((16, 16), (32, 32), (256, 64)))
    M = np.array([16, 32, 33, 1000])
    # M equal to an entry's limit still uses that entry; beyond the table: the last tile (64)
    assert f.tile_rows(M).tolist() == [16, 32, 64, 64]
    assert f.padded_m(M).tolist() == [16, 32, 64, 1024]  # 1000 / 64 = 15.6 -> 16 tiles of 64
    assert f.m_passes(M).tolist() == [1, 1, 1, 16]
    untiled = KernelFacts("gemv", "cuda_core")  # bn = 0: N as it is, as float64
    n = untiled.padded_n(np.array([100, 129]))
    assert n.tolist() == [100.0, 129.0] and n.dtype == np.float64


def test_m_tiles_from_compresses_runs_and_reopens_a_run():
    assert m_tiles_from(lambda m: 8) == ((256, 8),)  # default batches 1..256
    rows = m_tiles_from(lambda m: 16 if m <= 16 else 32 if m <= 32 else 16, range(1, 41))
    assert rows == ((16, 16), (32, 32), (40, 16))


def test_fixup_slots_by_hand():
    f = KernelFacts("wgmma", "wgmma_bf16", m_tiles=((16, 16), (256, 64)), bn=128, stream_k_ctas=((BIG, 1),))
    # M = 1: one m-pass, 132 CTAs (1 per SM), 4096 / 128 = 32 tiles -> ceil(132 / 32) = 5 slots
    # M = 100: tile 64 -> 2 passes, floor(132 / 2) = 66 CTAs per pass -> ceil(66 / 32) = 3; N = 128: one tile, 132
    got = f.fixup_slots(np.array([1, 100, 1]), np.array([4096, 4096, 128]), 132)
    assert got.tolist() == [5, 3, 132]
    two = KernelFacts("wgmma", "wgmma_bf16", m_tiles=((16, 16), (256, 64)), bn=128, stream_k_ctas=((16, 2), (BIG, 1)))
    # M = 16: 2 CTAs per SM = 264 -> ceil(264 / 32) = 9; M = 17: 1 per SM, tile 64, 1 pass -> 132 / 32 -> 5
    assert two.fixup_slots(np.array([16, 17]), np.array([4096, 4096]), 132).tolist() == [9, 5]
    untiled = KernelFacts("wgmma", "wgmma_bf16", stream_k_ctas=((BIG, 1),))  # bn = 0: one tile per m-pass
    assert untiled.fixup_slots(np.array([1]), np.array([4096]), 132).tolist() == [132]
    beyond = KernelFacts("wgmma", "wgmma_bf16", m_tiles=((16, 16), (256, 64)), bn=128, stream_k_ctas=((16, 2),))
    # M = 17 lies beyond the CTA table (largest M 16): its last entry, 2 per SM = 264, tile 64 -> ceil(264 / 32) = 9
    assert beyond.fixup_slots(np.array([17]), np.array([4096]), 132).tolist() == [9]
    plain = KernelFacts("wgmma", "wgmma_bf16", bn=128)
    assert plain.fixup_slots(np.array([1, 2]), np.array([4096, 4096]), 132).tolist() == [0.0, 0.0]


# ---------------------------------------------------------------------------------------------------- GPU terms
def test_read_time_and_asymptote_by_hand():
    assert G.asymptotic_bandwidth() == pytest.approx(0.999e12, rel=1e-12)  # 999e6 B / 1e-3 s
    # at the last point exactly: the point (1003 us); twice beyond it by 1e9 B: + 1e9 / 0.999e12
    t = G.read_time(np.array([1e9, 3e9]))
    assert t[0] == pytest.approx(1003e-6, rel=1e-12)
    assert t[1] == pytest.approx(1003e-6 + 2e9 / 0.999e12, rel=1e-12)
    # between 4096 B and 1e6 B, log-log: at the geometric mean sqrt(4096e6) = 64000 B, sqrt(2e-6 * 3e-6)
    assert G.read_time(np.array([64000.0]))[0] == pytest.approx(math.sqrt(6e-12), rel=1e-9)


def test_gpu_terms_from_the_datasheet_by_hand():
    g = gpu_terms("h200-sxm", None)
    assert g.gpu_key == "h200-sxm" and g.sms == 132
    assert g.fma_per_s == 67e12 / 2  # FMA lanes: FLOP/s over 2
    # conversion from the FP32 lane rate: 33.5e12 FMA/s over 18/8, 7/4 and 5/4 instructions per weight
    assert g.dequant_weights_per_s == pytest.approx({"w4": 33.5e12 / 2.25, "w8": 33.5e12 / 1.75,
                                                     "e4m3": 33.5e12 / 1.25}, rel=1e-12)
    assert g.path_flops == {"cuda_core": 67e12, "mma_sync_f16": 989.4e12, "mma_sync_bf16": 989.4e12,
                            "mma_sync_s8": 1978.9e12, "wgmma_f16": 989.4e12, "wgmma_bf16": 989.4e12,
                            "wgmma_s8": 1978.9e12, "wgmma_e4m3": 1978.9e12, "library_fp32": 67e12}
    assert g.l2_bytes_per_s == pytest.approx(1.5 * 4.8e12, rel=1e-12)
    # 24 sizes from 4 KiB to 4 GiB, each 2 us + bytes at 4.8e12 B/s
    assert len(g.curve_bytes) == 24 and g.curve_bytes[0] == 4096.0 and g.curve_bytes[-1] == pytest.approx(4 * 2**30)
    assert g.curve_time_s[-1] == pytest.approx(2e-6 + 4 * 2**30 / 4.8e12, rel=1e-12)
    assert g.asymptotic_bandwidth() == pytest.approx(4.8e12, rel=1e-9)
    assert {k: g.sources[k] for k in ("memory", "fma", "alu", "tensor", "l2", "tensor:cuda_core")} == dict.fromkeys(
        ("memory", "fma", "alu", "tensor", "l2", "tensor:cuda_core"), "datasheet")
    assert g.resident_clusters == {2: 66, 3: 44, 4: 33} and g.sources["clusters"] == "datasheet"  # SMs // size


FULL = {"fp32_flops": 6e13, "dequant_w4_weights_per_s": 5e12, "dequant_w8_weights_per_s": 6e12,
        "dequant_e4m3_weights_per_s": 7e12, "fp16_mma_flops": 5e14, "bf16_mma_flops": 5.1e14, "int8_mma_ops": 9e14,
        "library_bf16_flops": 7e14, "cublas_fp16_flops": 6.5e14, "library_int8_ops": 1.2e15,
        "library_fp8_flops": 1.3e15, "l2_bytes_per_s": 8e12, "resident_clusters_2": 66, "resident_clusters_3": 39,
        "resident_clusters_4": 30}


def _cal(ceilings, curve=None):
    return Calibration("h200-sxm", "NVIDIA H200", 1.98e9, ceilings, read_curve=curve or {})


def test_gpu_terms_calibrated_everywhere_by_hand():
    curve = {"bytes": [4096, 1e6, 1e6, 1e9, 2e9], "time_s": [3e-6, 2.5e-6, 4e-6, 0.0, 5e-4]}
    g = gpu_terms("h200-sxm", _cal(FULL, curve))
    # the zero time is dropped; 1e6 B keeps its faster 2.5 us, then raised to 3 us (more bytes never read faster)
    assert g.curve_bytes.tolist() == [4096.0, 1e6, 2e9] and g.curve_time_s.tolist() == [3e-6, 3e-6, 5e-4]
    assert g.fma_per_s == 3e13 and g.dequant_weights_per_s == {"w4": 5e12, "w8": 6e12, "e4m3": 7e12}
    assert g.path_flops == {"cuda_core": 6e13, "mma_sync_f16": 5e14, "mma_sync_bf16": 5.1e14, "mma_sync_s8": 9e14,
                            "wgmma_f16": 7e14, "wgmma_bf16": 7e14, "wgmma_s8": 1.2e15, "wgmma_e4m3": 1.3e15,
                            "library_fp32": 6e13}
    assert g.l2_bytes_per_s == 8e12 and g.resident_clusters == {2: 66, 3: 39, 4: 30}
    assert all(v == "calibrated" for v in g.sources.values()) and len(g.sources) == 6 + 9  # 6 terms + 9 paths


def test_gpu_terms_mixed_and_refused_figures():
    # no library bf16 figure: the wgmma paths fall to cuBLAS fp16; a 0, a bool and a string are not figures
    ceilings = {**FULL, "library_bf16_flops": 0, "fp32_flops": True, "dequant_w8_weights_per_s": "6e12",
                "l2_bytes_per_s": -1.0, "library_fp8_flops": 0.5}
    g = gpu_terms("h200-sxm", _cal(ceilings, {"bytes": [4096], "time_s": [3e-6]}))  # one size: no curve
    assert g.path_flops["wgmma_bf16"] == g.path_flops["wgmma_f16"] == 6.5e14
    assert g.path_flops["wgmma_e4m3"] == 0.5  # any positive figure is taken as measured
    assert g.fma_per_s == 67e12 / 2 and g.dequant_weights_per_s["w8"] == pytest.approx(33.5e12 / 1.75)
    assert g.dequant_weights_per_s["w4"] == 5e12 and g.l2_bytes_per_s == pytest.approx(7.2e12)
    assert (g.sources["memory"], g.sources["fma"], g.sources["alu"], g.sources["l2"]) == ("datasheet",) * 4
    # one path on the datasheet (cuda_core: no FP32 figure) makes the tensor term "datasheet" as a whole
    assert g.sources["tensor"] == "datasheet" and g.sources["tensor:cuda_core"] == "datasheet"
    assert g.sources["tensor:wgmma_bf16"] == g.sources["tensor:wgmma_e4m3"] == "calibrated"
    only_w = gpu_terms("h200-sxm", _cal({k: v for k, v in FULL.items() if k != "int8_mma_ops"}))
    assert only_w.sources["tensor"] == "datasheet" and only_w.sources["tensor:mma_sync_s8"] == "datasheet"
    assert only_w.sources["alu"] == "calibrated" and only_w.path_flops["mma_sync_s8"] == 1978.9e12


# ---------------------------------------------------------------------------------------------------- terms
def test_stream_k_fixup_term_and_its_combination_by_hand():
    f = KernelFacts("wgmma", "wgmma_bf16", m_tiles=((16, 16), (256, 64)), bn=128, stream_k_ctas=((BIG, 1),))
    t = raw_terms(f, G, M=[1], N=[4096], K=[4096], nbytes=[1e6])
    # slots: 100 CTAs / 32 tiles -> 4; a slot is 16 rows x 128 channels x 4 B = 8192 B, read at 4e12 / 100 B/s
    assert t.fixup[0] == pytest.approx(4 * 8192 / 4e10, rel=1e-12)  # 8.192e-7 s
    assert t.tensor[0] == pytest.approx(2 * 16 * 4096 * 4096 / 2e15, rel=1e-12)  # M padded to 16
    assert t.memory[0] == pytest.approx(1e-6) and t.dequant[0] == 0.0 and t.rows[0] == 0.0
    out = combine(t, KernelParams(extra_fixed_s=1e-7, fixup_scale=2.0, overlap=0.5, tc_eff=0.5))
    # fixup 1e-7 + 2 x 8.192e-7 = 1.7384e-6; memory 1e-6 is the largest; tensor 5.36870912e-7 / 2 (overlap)
    assert out["attr_fixup_s"][0] == pytest.approx(1.7384e-6, rel=1e-12)
    assert out["attr_tensor_s"][0] == pytest.approx(2.68435456e-7, rel=1e-9)
    assert out["time_kernel_s"][0] == pytest.approx(2e-6 + 1.7384e-6 + 1e-6 + 2.68435456e-7, rel=1e-9)
    plain = raw_terms(KernelFacts("wgmma", "wgmma_bf16", bn=128), G, M=[1], N=[4096], K=[4096], nbytes=[1e6])
    assert plain.fixup.tolist() == [0.0]


def test_dequant_passes_rescale_and_small_reads_by_hand():
    f = KernelFacts("gemv", "cuda_core", "w8", m_tiles=((4, 4),))
    t = raw_terms(f, G, M=[10], N=[1000], K=[1000], nbytes=[10.0])
    assert t.dequant[0] == pytest.approx(1e6 * 3 / 2e13, rel=1e-12)  # 10 rows in tiles of 4: 3 passes
    assert t.memory[0] == pytest.approx(0.0, abs=1e-15) and t.memory[0] >= 0.0  # below 4 KiB: the fixed cost only
    assert t.rows[0] == 0.0 and t.tensor[0] == 0.0  # no CUDA-core rows declared, CUDA-core path
    e = raw_terms(KernelFacts("gemv", "cuda_core", "e4m3"), G, M=[1], N=[1000], K=[1000], nbytes=[1e6])
    assert e.dequant[0] == pytest.approx(1e6 / 4e13, rel=1e-12)
    r = KernelFacts("gemv", "cuda_core", cuda_core_rows=True, k_block_rescale=100)
    t = raw_terms(r, G, M=[2], N=[10], K=[250], nbytes=[1e6])
    # rows: 10 x 250 x 2 FMA + 2 x 10 x ceil(250 / 100) = 60 rescale FMA, at 1e13 FMA/s
    assert t.rows[0] == pytest.approx((5000 + 60) / 1e13, rel=1e-12)
    assert t.fixed.tolist() == [2e-6]


def test_combine_ties_and_an_alu_bound_kernel_by_hand():
    one = np.array
    tie = Terms(fixed=one([1e-6]), memory=one([2e-6]), dequant=one([0.0]), rows=one([0.0]), tensor=one([2e-6]),
                fixup=one([0.0]))
    out = combine(tie, KernelParams(overlap=0.25))
    # memory and tensor tie at 2 us: memory (the first) whole, tensor x (1 - 0.25)
    assert (out["attr_memory_s"][0], out["attr_tensor_s"][0]) == pytest.approx((2e-6, 1.5e-6))
    assert out["time_kernel_s"][0] == pytest.approx(4.5e-6)
    alu = Terms(fixed=one([1e-6]), memory=one([1e-6]), dequant=one([1e-6]), rows=one([2e-6]), tensor=one([2e-6]),
                fixup=one([1e-7]))
    p = KernelParams(extra_fixed_s=0.5e-6, mem_scale=3.0, alu_dq=3.0, alu_row=0.5, tc_eff=1.25, overlap=0.5,
                     fixup_scale=3.0)
    out = combine(alu, p)
    # alu 3 x 1 + 0.5 x 2 = 4 us (largest, whole); memory 3 us and tensor 2 / 1.25 = 1.6 us, each x 0.5
    expect = {"attr_fixed_s": 1e-6, "attr_fixup_s": 0.5e-6 + 3 * 1e-7, "attr_memory_s": 1.5e-6, "attr_alu_s": 4e-6,
              "attr_tensor_s": 0.8e-6, "time_kernel_s": 1e-6 + 0.8e-6 + 1.5e-6 + 4e-6 + 0.8e-6}
    assert {k: float(v[0]) for k, v in out.items()} == pytest.approx(expect, rel=1e-12)


def test_kernel_ceilings_of_each_path_by_hand():
    rows = KernelFacts("gemv", "cuda_core", cuda_core_rows=True)
    bw, peak = kernel_ceilings(rows, G, KernelParams(mem_scale=2.0, alu_row=4.0))
    assert bw == pytest.approx(0.999e12 / 2) and peak == pytest.approx(2 * 1e13 / 4)  # FMA rate x 2 / alu_row
    assert math.isnan(kernel_ceilings(rows, G, KernelParams(alu_row=0.0))[1])
    assert math.isnan(kernel_ceilings(KernelFacts("gemv", "cuda_core"), G, KernelParams())[1])
    assert kernel_ceilings(KernelFacts("mma_sync", "mma_sync_f16"), G, KernelParams(tc_eff=0.8))[1] == pytest.approx(
        0.8e15)


def test_active_parameters_of_every_term():
    every = KernelFacts("wgmma", "wgmma_bf16", "e4m3", bn=128, k_block_rescale=128, stream_k_ctas=((BIG, 1),))
    assert active_params(every) == ("extra_fixed_s", "mem_scale", "overlap", "alu_dq", "alu_row", "tc_eff",
                                    "fixup_scale")
    assert active_params(KernelFacts("gemv", "cuda_core")) == ("extra_fixed_s", "mem_scale", "overlap")


# ---------------------------------------------------------------------------------------------------- parameters
def test_params_from_dict_bounds_are_inclusive_and_values_become_floats():
    p = KernelParams.from_dict({"overlap": 0, "tc_eff": 1.5, "extra_fixed_s": 50e-6, "mem_scale": 2})
    assert (p.overlap, p.tc_eff, p.extra_fixed_s, p.mem_scale) == (0.0, 1.5, 50e-6, 2.0)
    assert isinstance(p.mem_scale, float) and isinstance(p.overlap, float) and p.alu_dq == 1.0


@pytest.mark.parametrize("data, message", [
    ({"tc_eff": 0.019}, "kernel params: tc_eff must be a number in [0.02, 1.5], got 0.019"),
    ({"overlap": 1.01}, "kernel params: overlap must be a number in [0.0, 1.0], got 1.01"),
    ({"mem_scale": True}, "kernel params: mem_scale must be a number in [0.5, 4.0], got True"),
    ({"alu_dq": "1"}, "kernel params: alu_dq must be a number in [0.0, 40.0], got '1'"),
    ({"speed": 1, "zeal": 2}, "kernel params: unknown parameter(s) speed, zeal; valid: extra_fixed_s, mem_scale, "
                              "alu_dq, alu_row, tc_eff, overlap, fixup_scale"),
])
def test_params_refusals_word_for_word(data, message):
    with pytest.raises(InputError) as info:
        KernelParams.from_dict(data)
    assert str(info.value) == message


def test_lookup_fitted_family_median_and_neutral():
    fam = {"a": "gemv", "b": "gemv", "c": "gemv", "d": "gemv", "x": "library"}
    table = ParamTable({"a": KernelParams(mem_scale=1.0, overlap=0.2), "b": KernelParams(mem_scale=2.0, overlap=0.9),
                        "c": KernelParams(mem_scale=4.0, overlap=0.4), "x": KernelParams(mem_scale=3.9)}, {})
    gemv = KernelFacts("gemv", "cuda_core")
    assert table.lookup("b", gemv, fam) == (table.kernels["b"], "fitted")
    # "d" is of the family but has no parameters; "x" is another family: the median of a, b, c
    p, how = table.lookup("d", gemv, fam)
    assert how == "family median (gemv)" and (p.mem_scale, p.overlap, p.tc_eff) == (2.0, 0.4, 1.0)
    assert table.lookup("new", KernelFacts("mma_sync", "mma_sync_f16"), fam) == (KernelParams(),
                                                                                  "neutral (microbenchmarks only)")


def test_param_table_json_by_hand(tmp_path):
    table = ParamTable({"b": KernelParams(mem_scale=2.0), "a": KernelParams()}, {"points": 3})
    text = table.to_json()
    assert text.startswith('{\n "schema_version": 1,\n "provenance": {\n  "points": 3\n }') and text.endswith("}\n")
    neutral = {"extra_fixed_s": 0.0, "mem_scale": 1.0, "alu_dq": 1.0, "alu_row": 1.0, "tc_eff": 1.0, "overlap": 1.0,
               "fixup_scale": 1.0}
    doc = json.loads(text)
    assert list(doc["kernels"]) == ["a", "b"] and doc["kernels"]["a"] == neutral
    assert doc["kernels"]["b"] == {**neutral, "mem_scale": 2.0}
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"schema_version": 1, "kernels": {"k": {"overlap": 0.5}}}))
    loaded = load_params(path)
    assert loaded.provenance == {} and loaded.kernels == {"k": KernelParams(overlap=0.5)}
    path.write_text(text)
    assert load_params(path).provenance == {"points": 3}
    absent = load_params(tmp_path / "absent.json")
    assert (absent.kernels, absent.provenance) == ({}, {})


@pytest.mark.parametrize("text, message", [
    ("[1]", "schema_version None not understood (this workbench reads 1)"),
    ('{"kernels": {}}', "schema_version None not understood (this workbench reads 1)"),
    ('{"schema_version": 1, "kernels": []}', "no 'kernels' object"),
    ('{"schema_version": 1}', "no 'kernels' object"),
    ('{"schema_version": 1, "kernels": {"k": {"overlap": 2}}}', "k: overlap must be a number in [0.0, 1.0], got 2"),
])
def test_load_params_refusals_word_for_word(tmp_path, text, message):
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_params(path)
    assert str(info.value) == f"{path}: {message}"
    path.write_text("{")
    with pytest.raises(InputError, match=r"^.*p\.json: not a readable kernel-parameter JSON \(Expecting"):
        load_params(path)


# ---------------------------------------------------------------------------------------------------- over a frame
def test_predict_kernels_columns_by_hand():
    facts = {"g": KernelFacts("gemv", "cuda_core", "w4", cuda_core_rows=True)}
    sheet = GpuTerms("sheet", G.curve_bytes, G.curve_time_s, G.dequant_weights_per_s, G.fma_per_s, G.path_flops,
                     {"memory": "datasheet", "alu": "calibrated", "tensor": "datasheet"})
    gpus = {"test": G, "sheet": sheet}
    pts = pd.DataFrame({"gpu": ["test", "sheet", "test"], "kernel": ["g", "g", "none"], "M": [1, 1, 1],
                        "N": [1000, 1000, 1000], "K": [1000, 1000, 1000], "bytes": [1e6, 1e6, 1e6]})
    table = ParamTable({"g": KernelParams(mem_scale=2.0, alu_dq=1.0, alu_row=1.0, overlap=1.0)}, {})
    out = predict_kernels(pts, facts, gpus.__getitem__, table)
    assert list(out.columns) == [*pts.columns, *OUTPUT_COLUMNS]
    # memory 2 x 1 us = 2 us (largest); alu 1e6 / 1e13 + 1e6 x 1 / 1e13 = 0.2 us hidden (overlap 1): 2 + 2 us
    assert out["time_kernel_s"].iloc[:2].tolist() == pytest.approx([4e-6, 4e-6])
    assert out["attr_alu_s"].iloc[0] == 0.0 and out["attr_memory_s"].iloc[0] == pytest.approx(2e-6)
    assert out["kernel_bandwidth_bytes_per_s"].iloc[0] == pytest.approx(0.999e12 / 2)
    assert out["kernel_peak_flops_per_s"].iloc[0] == pytest.approx(2e13)
    assert out["kernel_terms_source"].tolist() == ["measured", "datasheet: memory, tensor", ""]
    assert out["kernel_params_source"].tolist() == ["fitted", "fitted", "no kernel facts"]
    assert all(math.isnan(out[c].iloc[2]) for c in OUTPUT_COLUMNS[:-2])


def test_fit_needs_six_points_and_records_its_provenance():
    facts = {"k": KernelFacts("library", "wgmma_bf16")}
    rows = pd.DataFrame({"gpu": "test", "kernel": ["k"] * FIT_MIN_POINTS + ["j"] * 3 + ["few"] * 5,
                         "M": 1, "N": 4096, "K": 4096, "bytes": [1e6 * (i + 1) for i in range(14)]})
    facts["few"] = KernelFacts("library", "wgmma_bf16")
    t = raw_terms(facts["k"], G, rows["M"], rows["N"], rows["K"], rows["bytes"])
    rows["time_median_s"] = combine(t, KernelParams(extra_fixed_s=1e-6, mem_scale=1.5))["time_kernel_s"]
    table = fit_table(rows, facts, lambda _: G, provenance={"note": "x"}, priors=False)
    assert FIT_MIN_POINTS == 6 and list(table.kernels) == ["k"]  # "j" has no facts, "few" only 5 points
    assert table.kernels["k"].mem_scale == pytest.approx(1.5, rel=1e-3)
    assert table.provenance == {"note": "x", "points": 14, "rms_log_error": {"k": 0.0}}
    frame = param_frame(table)
    assert frame.columns.tolist() == ["kernel", "extra_fixed_s", "mem_scale", "alu_dq", "alu_row", "tc_eff",
                                      "overlap", "fixup_scale"]
    assert frame["kernel"].tolist() == ["k"] and frame["mem_scale"].iloc[0] == pytest.approx(1.5, rel=1e-3)


def _memory_only_rows(shapes=((4096, 4096),), truth=2.0):
    """A CUDA-core kernel without conversion or batch rows: time = fixed + extra_fixed_s + mem_scale x memory.
    Truth mem_scale = `truth`, extra_fixed_s = 0, at six sizes (2 MB ... 64 MB) for each shape."""
    f = KernelFacts("gemv", "cuda_core")
    rows = pd.DataFrame([{"gpu": "test", "kernel": "k", "M": 1, "N": n, "K": k, "bytes": b}
                         for n, k in shapes for b in (2e6, 4e6, 8e6, 16e6, 32e6, 64e6)])
    t = raw_terms(f, G, rows["M"], rows["N"], rows["K"], rows["bytes"])
    rows["time_median_s"] = combine(t, KernelParams(mem_scale=truth))["time_kernel_s"]
    return f, rows, t.memory[:6]


def _prior_oracle(memory, s0=2.0):
    """One Gauss-Newton step from the truth (e = 0, s = s0) of the fit's objective written out by hand: data
    residuals log(t_fit / t) / 0.05 with t = 2 us + e + s m_i, and the prior log(s / 1) / 0.5 on mem_scale. The problem
    is nearly linear there, so the step lands on the minimum; returns (e, s, rms of the data residuals in log time)."""
    t = 2e-6 + s0 * memory
    J = np.vstack([np.c_[1 / (0.05 * t), memory / (0.05 * t)], [[0.0, 1 / (0.5 * s0)]]])
    r = np.r_[np.zeros(len(t)), np.log(s0) / 0.5]
    d = -np.linalg.solve(J.T @ J, J.T @ r)
    if d[0] < 0:  # extra_fixed_s is bounded below by 0: held there, mem_scale moves alone
        d = np.r_[0.0, -np.linalg.solve(J[:, 1:].T @ J[:, 1:], J[:, 1:].T @ r)]
    return d[0], s0 + d[1], float(np.sqrt(np.mean((r + J @ d)[:-1] ** 2)) * 0.05)


def test_fit_priors_pull_towards_the_microbenchmark_by_the_hand_derived_amount():
    f, rows, memory = _memory_only_rows()
    e, s, rms = _prior_oracle(memory)  # about 2.65e-8 s, 1.99526, 0.00165
    got = fit_table(rows, {"k": f}, {"test": G}.__getitem__)  # priors on by default
    assert got.kernels["k"].mem_scale == pytest.approx(s, abs=1e-5)
    assert got.kernels["k"].extra_fixed_s == pytest.approx(e, abs=1e-10)
    assert got.provenance["rms_log_error"] == {"k": round(rms, 4)}  # 0.0017: four decimals
    # overlap acts on nothing here (memory is the only term): the table keeps the fit's start for it, 0.7
    assert got.kernels["k"].overlap == pytest.approx(0.7, abs=1e-9)
    free = fit_table(rows, {"k": f}, {"test": G}.__getitem__, priors=False)
    assert free.kernels["k"].mem_scale == pytest.approx(2.0, abs=1e-5)
    # below the neutral 1 the prior pulls up: truth 0.8
    f, rows, memory = _memory_only_rows(truth=0.8)
    _, s, _ = _prior_oracle(memory, 0.8)
    assert s > 0.8 and fit_table(rows, {"k": f}, {"test": G}.__getitem__).kernels["k"].mem_scale == pytest.approx(
        s, abs=1e-5)


def test_leave_one_shape_out_holds_out_exactly_one_shape_and_keeps_the_priors():
    from models.kernel_fit import leave_one_shape_out

    # two shapes sharing K, with the same six sizes: each is predicted by the fit on the other's six rows
    f, rows, memory = _memory_only_rows(((4096, 4096), (8192, 4096)))
    e, s, _ = _prior_oracle(memory)
    oos = leave_one_shape_out(rows, {"k": f}, {"test": G}.__getitem__)
    want = 2e-6 + e + s * np.r_[memory, memory]
    assert oos.to_numpy() == pytest.approx(want, rel=1e-5)  # without the priors: 2.4e-3 off (s = 2)
    free = leave_one_shape_out(rows, {"k": f}, {"test": G}.__getitem__, priors=False)
    assert free.to_numpy() == pytest.approx(rows["time_median_s"].to_numpy(), rel=1e-6)  # the truth, s = 2


def test_kernel_order_lookup_and_messages_of_the_frame_functions():
    f = KernelFacts("gemv", "cuda_core")
    _, rows, _ = _memory_only_rows()
    both = pd.concat([rows, rows.assign(kernel="a")], ignore_index=True)  # "k" first in the rows
    table = fit_table(both, {"k": f, "a": f}, {"test": G}.__getitem__, priors=False)
    assert list(table.kernels) == ["a", "k"]  # sorted by name
    pts = pd.DataFrame({"gpu": ["test", "test"], "kernel": ["none", "k"], "M": [1, 1], "N": [8, 8], "K": [8, 8],
                        "bytes": [1e6, 1e6]})
    out = predict_kernels(pts, {"k": f}, {"test": G}.__getitem__, ParamTable({}, {}))
    # the kernel without facts first does not stop the next one: 2 us + 1 us of memory at neutral parameters
    assert math.isnan(out["time_kernel_s"][0]) and out["time_kernel_s"][1] == pytest.approx(3e-6)
    alu_only = GpuTerms("a", G.curve_bytes, G.curve_time_s, G.dequant_weights_per_s, G.fma_per_s, G.path_flops,
                        {"memory": "calibrated", "alu": "datasheet", "tensor": "calibrated"})
    got = predict_kernels(pts.iloc[1:], {"k": f}, lambda _: alu_only, ParamTable({}, {}))
    assert got["kernel_terms_source"].tolist() == ["datasheet: alu"]
    with pytest.raises(InputError) as info:
        predict_kernels(pts.drop(columns=["K", "bytes"]), {"k": f}, {"test": G}.__getitem__, ParamTable({}, {}))
    assert str(info.value) == "kernel tier: points lack column(s) K, bytes"
