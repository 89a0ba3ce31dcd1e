"""The transfer tier (models/transfer.py, transfer_fit.py): GPU terms of a GPU never calibrated, derived from a
calibrated reference and a few factors, against numbers worked out by hand; the factors' fallbacks, file and fit.

The made-up reference R (on h200-sxm: datasheet 4.8e12 B/s, fp16/bf16 989.4e12, int8/fp8 1978.9e12, fp32 67e12,
132 SMs at 1.98 GHz) reads 4 KiB in 2 us, 1e6 B in 3 us, 1e9 B in 1003 us (asymptote (1e9 - 1e6) / 1000e-6 =
0.999e12 B/s); its library paths reach half their datasheet peak, its mma.sync paths a quarter, its FP32 half.
The targets' datasheet figures (data/gpus.toml): l40s 864e9 B/s, fp16 362.05e12, fp8 733e12, fp32 91.6e12, 142 SMs at
2.52 GHz, sm_89, GDDR6; a100-sxm-80gb 2.039e12 B/s, fp16 312e12, sm_80, HBM2e; b200 sm_100, HBM3e.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models.errors import InputError
from models.hardware import Calibration, get_gpu
from models.kernel_fit import predict_kernels
from models.kernel_model import KernelParams, ParamTable
from models.kernel_terms import GpuTerms, KernelFacts
from models.transfer import Factor, TransferFactors, arch_of, parse_factors, transfer_terms

H = {"fp16": 989.4e12, "int8": 1978.9e12, "fp32": 67e12}
R = GpuTerms("h200-sxm", np.array([4096.0, 1e6, 1e9]), np.array([2e-6, 3e-6, 1003e-6]),
             {"w4": 1e13, "w8": 2e13, "e4m3": 4e13}, fma_per_s=H["fp32"] / 4,
             path_flops={"cuda_core": H["fp32"] / 2, "library_fp32": H["fp32"] / 2,
                         "mma_sync_f16": H["fp16"] / 4, "mma_sync_bf16": H["fp16"] / 4,
                         "mma_sync_s8": H["int8"] / 4, "wgmma_f16": H["fp16"] / 2, "wgmma_bf16": H["fp16"] / 2,
                         "wgmma_s8": H["int8"] / 2, "wgmma_e4m3": H["int8"] / 2},
             sources={"memory": "calibrated"}, sms=132, l2_bytes_per_s=1.998e12,
             resident_clusters={2: 66, 3: 39, 4: 30})
F = TransferFactors("h200-sxm", {"HBM3e": Factor(0.9, "x"), "HBM2e": Factor(0.7, "x"), "GDDR6": Factor(0.8, "x")},
                    {"sm_90": Factor(1.0, "x"), "sm_89": Factor(0.5, "x")})


def test_l40s_terms_by_hand():
    g = transfer_terms(get_gpu("l40s"), R, get_gpu("h200-sxm"), F)
    bw = 864e9 * 0.8  # GDDR6 factor
    ratio = bw / 0.999e12
    assert np.allclose(g.curve_bytes, [4096 * ratio, 1e6 * ratio, 1e9 * ratio])
    assert g.curve_time_s.tolist() == [2e-6, 3e-6, 1003e-6]  # the reference's times: same latency, same ramp
    assert g.asymptotic_bandwidth() == pytest.approx(bw)
    assert g.read_time(np.array([2e9]))[0] == pytest.approx(1003e-6 + (2e9 - 1e9 * ratio) / bw)
    # sm_89 < sm_90: mma.sync takes the library share (1/2), times the sm_89 tensor factor 0.5
    assert g.path_flops["mma_sync_f16"] == pytest.approx(362.05e12 * 0.5 * 0.5)
    assert g.path_flops["wgmma_e4m3"] == pytest.approx(733e12 * 0.5 * 0.5)
    assert g.path_flops["cuda_core"] == pytest.approx(91.6e12 * 0.5)  # FP32 share, no tensor factor
    assert g.fma_per_s == pytest.approx(91.6e12 / 2 * 0.5)
    issue = (142 * 2.52e9) / (132 * 1.98e9)  # dequantization scales with SMs x clock
    assert g.dequant_weights_per_s["w4"] == pytest.approx(1e13 * issue)
    assert g.l2_bytes_per_s == pytest.approx(2.0 * bw)  # the reference's L2 / DRAM ratio 1.998e12 / 0.999e12
    assert g.resident_clusters == {2: 71, 3: 47, 4: 35} and g.sms == 142  # not the reference's chip: SMs // size
    assert set(g.sources.values()) == {"transferred"}


def test_a100_takes_its_technology_and_the_fallback_architecture():
    g = transfer_terms(get_gpu("a100-sxm-80gb"), R, get_gpu("h200-sxm"), F)
    assert g.asymptotic_bandwidth() == pytest.approx(2.039e12 * 0.7)
    # sm_80 has no tensor factor: the median of sm_90's 1.0 and sm_89's 0.5
    assert g.path_flops["mma_sync_bf16"] == pytest.approx(312e12 * 0.5 * 0.75)


def test_the_reference_transferred_is_the_reference():
    g = transfer_terms(get_gpu("h200-sxm"), R, get_gpu("h200-sxm"),
                       TransferFactors("h200-sxm", {"HBM3e": Factor(0.999e12 / 4.8e12, "own")}, {}))
    assert np.allclose(g.curve_bytes, R.curve_bytes) and g.path_flops == pytest.approx(R.path_flops)
    assert g.resident_clusters == R.resident_clusters and g.dequant_weights_per_s == R.dequant_weights_per_s


def test_fallbacks_technology_class_then_all():
    assert F.read_fraction_for("GDDR6") == (0.8, "GDDR6 (x)")
    assert F.read_fraction_for("GDDR6X")[0] == 0.8  # the GDDR class: GDDR6 alone
    assert F.read_fraction_for("HBM3")[0] == pytest.approx(0.8)  # HBM class: median of 0.9 and 0.7
    only_hbm = TransferFactors("h200-sxm", {"HBM3e": Factor(0.9, "x"), "HBM2e": Factor(0.6, "x")})
    assert only_hbm.read_fraction_for("GDDR7")[0] == pytest.approx(0.75)  # no GDDR factor: every factor's median
    assert TransferFactors("h200-sxm", {}).read_fraction_for("HBM3")[0] == 1.0  # no factor: the datasheet
    assert F.tensor_fraction_for("sm_100")[0] == pytest.approx(0.75) and arch_of(get_gpu("b200")) == "sm_100"


def test_factor_file_round_trip_and_refusals():
    f = TransferFactors("h200-sxm", {"GDDR6": Factor(0.8, "fitted", ("l40s",), 60, 0.01, 0.09)},
                        {"sm_89": Factor(0.56, "fitted")}, {"trtllm_wo_int8": KernelParams(mem_scale=0.9)},
                        {"rows": 3})
    back = parse_factors(f.to_json(), "t")
    assert back.read_fraction["GDDR6"] == f.read_fraction["GDDR6"] and back.kernels == f.kernels
    assert back.tensor_fraction["sm_89"].value == 0.56 and back.provenance == {"rows": 3}
    for text, message in [('{"schema_version": 9}', "schema_version not understood"),
                          ('{"schema_version": 1, "read_fraction": {"DDR4": {"value": 1}}}', "unknown memory tech"),
                          ('{"schema_version": 1, "read_fraction": {"HBM3": {"value": "x"}}}', "numeric 'value'"),
                          ('{"schema_version": 1, "read_fraction": {}, "tensor_fraction": {"ampere": {}}}',
                           "architectures"),
                          ("{", "not valid JSON")]:
        with pytest.raises(InputError, match=message):
            parse_factors(text, "t")


def _ref_cal() -> Calibration:
    ceilings = {"fp32_flops": H["fp32"] / 2, "fp16_mma_flops": H["fp16"] / 4, "bf16_mma_flops": H["fp16"] / 4,
                "int8_mma_ops": H["int8"] / 4, "library_bf16_flops": H["fp16"] / 2, "library_int8_ops": H["int8"] / 2,
                "library_fp8_flops": H["int8"] / 2, "dequant_w4_weights_per_s": 1e13,
                "dequant_w8_weights_per_s": 2e13, "dequant_e4m3_weights_per_s": 4e13, "l2_bytes_per_s": 1.998e12}
    return Calibration("h200-sxm", "NVIDIA H200", 1.98e9, ceilings,
                       read_curve={"bytes": [4096, 1e6, 1e9], "time_s": [2e-6, 3e-6, 1003e-6]})


def test_fit_recovers_the_factors_it_was_made_with_and_leaves_a_gpu_out():
    from models.transfer_fit import fit_factors, leave_one_gpu_out, predict_rows, with_bytes

    facts = {"lib": KernelFacts("library", "wgmma_bf16")}
    table = ParamTable({"lib": KernelParams(mem_scale=1.0, tc_eff=1.0, overlap=1.0)}, {})
    truth = TransferFactors("h200-sxm", {"HBM3e": Factor(0.999e12 / 4.8e12, "own"), "GDDR6": Factor(0.7, "t"),
                                         "HBM2e": Factor(0.6, "t")},
                            {"sm_90": Factor(1.0, "own"), "sm_89": Factor(0.4, "t"), "sm_80": Factor(0.9, "t")})
    grid = [(g, m, n) for g in ("l40s", "a100-sxm-80gb") for m in (1, 4, 16, 64, 128, 256)
            for n in (4096, 16384)]
    rows = with_bytes(pd.DataFrame([{"gpu": g, "kernel": "lib", "scheme": "bf16", "M": m, "N": n, "K": 8192,
                                     "time_s": 1.0} for g, m, n in grid]))
    rows["time_s"] = predict_rows(rows, truth, _ref_cal(), facts, table)
    got = fit_factors(rows, "h200-sxm", _ref_cal(), facts, table)
    assert got.read_fraction["GDDR6"].value == pytest.approx(0.7, rel=1e-3)
    assert got.read_fraction["HBM2e"].value == pytest.approx(0.6, rel=1e-3)
    assert got.tensor_fraction["sm_89"].value == pytest.approx(0.4, rel=1e-2)
    assert got.read_fraction["GDDR6"].gpus == ("l40s",) and got.read_fraction["GDDR6"].points == 6
    logo = leave_one_gpu_out(rows, "h200-sxm", _ref_cal(), facts, table)
    small = (rows["gpu"] == "a100-sxm-80gb") & (rows["M"] == 1)
    # without its own rows, HBM2e takes the HBM class's other factor, the reference's own (0.999e12 / 4.8e12)
    want = predict_rows(rows[small].reset_index(drop=True),
                        TransferFactors("h200-sxm", {"HBM3e": truth.read_fraction["HBM3e"]},
                                        {"sm_90": Factor(1.0, "x"), "sm_89": got.tensor_fraction["sm_89"]}),
                        _ref_cal(), facts, table)
    assert np.allclose(logo[small.to_numpy()], want)


def _cal(key: str, bandwidth: float) -> Calibration:
    """A calibration of `key` like the reference's whose read curve tends to `bandwidth` B/s."""
    ref = _ref_cal()
    times = [2e-6, 3e-6, 3e-6 + (1e9 - 1e6) / bandwidth]
    return Calibration(key, key, 1.98e9, ref.ceilings, read_curve={"bytes": [4096, 1e6, 1e9], "time_s": times})


def test_every_calibrated_gpu_gives_its_technology_a_read_fraction():
    from models.transfer_fit import calibrated_read_fractions, fit_factors, leave_one_gpu_out, predict_rows, with_bytes

    h100 = _cal("h100-sxm", 2.68e12)  # HBM3, datasheet 3.35e12: 0.8
    got = calibrated_read_fractions("h200-sxm", _ref_cal(), {"h100-sxm": h100})
    assert got["HBM3"].value == pytest.approx(0.8) and got["HBM3"].how == "calibrate read on h100-sxm"
    assert got["HBM3e"].value == pytest.approx(0.999e12 / 4.8e12) and got["HBM3e"].gpus == ("h200-sxm",)
    both = calibrated_read_fractions("h200-sxm", _ref_cal(), {"b200": _cal("b200", 4.0e12)})  # b200: HBM3e, 8e12
    assert both["HBM3e"].value == pytest.approx(np.median([0.999e12 / 4.8e12, 0.5]))
    assert both["HBM3e"].gpus == ("b200", "h200-sxm")

    facts = {"lib": KernelFacts("library", "wgmma_bf16")}
    table = ParamTable({"lib": KernelParams(mem_scale=1.0, tc_eff=1.0, overlap=1.0)}, {})
    rows = with_bytes(pd.DataFrame([{"gpu": g, "kernel": "lib", "scheme": "bf16", "M": m, "N": 4096, "K": 8192,
                                     "time_s": 1e-4} for g in ("a100-sxm-80gb", "h100-sxm") for m in (1, 4, 16)]))
    cals = {"h100-sxm": h100}
    fitted = fit_factors(rows, "h200-sxm", _ref_cal(), facts, table, calibrations=cals)
    assert fitted.read_fraction["HBM3"].value == pytest.approx(0.8)  # the calibration, not the h100 rows
    # a calibrated GPU's rows take its measured terms: the same time whatever the factors say
    other = TransferFactors("h200-sxm", {"HBM3": Factor(0.1, "x")}, {"sm_90": Factor(1.0, "x")})
    h = (rows["gpu"] == "h100-sxm").to_numpy()
    assert np.allclose(predict_rows(rows, fitted, _ref_cal(), facts, table, cals)[h],
                       predict_rows(rows, other, _ref_cal(), facts, table, cals)[h])
    # left out, the a100 (HBM2e) takes the HBM class's median of the two calibrated GPUs' reads
    logo = leave_one_gpu_out(rows, "h200-sxm", _ref_cal(), facts, table, calibrations=cals)
    a = ~h
    want = predict_rows(rows[a].reset_index(drop=True), TransferFactors(
        "h200-sxm", {"HBM2e": Factor(float(np.median([0.8, 0.999e12 / 4.8e12])), "x")},
        {"sm_90": Factor(1.0, "x")}), _ref_cal(), facts, table)
    assert np.allclose(logo[a], want)
    # left out, the h100 loses its calibration too: its terms are transferred by factors fitted without either
    alone = fit_factors(rows[a], "h200-sxm", _ref_cal(), facts, table)
    assert "HBM3" not in alone.read_fraction
    want_h = predict_rows(rows[h].reset_index(drop=True), alone, _ref_cal(), facts, table)
    assert np.allclose(logo[h], want_h) and not np.allclose(logo[h], predict_rows(rows, fitted, _ref_cal(), facts,
                                                                                 table, cals)[h])


def test_rows_say_where_their_gpu_terms_came_from():
    facts = {"k": KernelFacts("gemv", "cuda_core")}
    points = pd.DataFrame({"gpu": ["a", "b", "c"], "kernel": "k", "M": 1, "N": 64, "K": 64, "bytes": 8192.0})
    srcs = {"a": {"memory": "calibrated", "alu": "calibrated", "tensor": "calibrated"},
            "b": {"memory": "transferred", "alu": "transferred", "tensor": "transferred"},
            "c": {"memory": "datasheet", "alu": "calibrated", "tensor": "calibrated"}}

    def lookup(key: str) -> GpuTerms:
        return GpuTerms(key, R.curve_bytes, R.curve_time_s, R.dequant_weights_per_s, R.fma_per_s, R.path_flops,
                        srcs[key])

    got = predict_kernels(points, facts, lookup, ParamTable({}, {}))
    assert got["kernel_terms_source"].tolist() == ["measured", "transferred", "datasheet: memory"]
