"""The GPU catalogue (dense datasheet peaks, fallbacks, validation) and the calibrated ceilings."""

import json

import pytest

from models.errors import InputError
from models.hardware import (
    CALIBRATION_SCHEMA_VERSION,
    GPUS_TOML,
    PEAK_UNITS,
    get_gpu,
    load_calibrations,
    load_gpus,
    parse_calibration,
)

REQUIRED_KEYS = {"h200-sxm", "h100-sxm", "h100-pcie", "a100-sxm-80gb", "a100-pcie-40gb", "l40s", "l4", "a10",
                 "rtx-4090", "rtx-3090", "v100-sxm2", "t4", "b200"}


def test_catalogue_has_every_required_gpu_with_sources():
    gpus = load_gpus()
    assert REQUIRED_KEYS <= set(gpus)
    for g in gpus.values():
        assert g.sources["source"]
        assert g.bandwidth > 0 and g.l2_bytes > 0 and g.sms > 0 and g.boost_clock_hz > 0 and g.device_names
        assert set(PEAK_UNITS) <= set(g.peaks)
        assert g.peak("fp16") > g.peak("fp32")  # every listed chip has fp16 tensor cores
        # Sparse datasheet figures would make fp16 tensor / fp32 above ~16 on these parts; dense stays below.
        assert g.peak("fp16") / g.peak("fp32") <= 32


def test_dense_peaks_of_the_chapter_gpus():
    h100 = get_gpu("h100-sxm")
    assert h100.bandwidth == 3.35e12 and h100.sms == 132 and h100.cc == "9.0"
    assert h100.peak("bf16") == pytest.approx(989e12, rel=0.01)
    assert h100.peak("fp8") == pytest.approx(1979e12, rel=0.01)
    assert h100.peak("int8") == pytest.approx(1979e12, rel=0.01)
    assert h100.peak("fp32") == pytest.approx(67e12, rel=0.01)
    h200 = get_gpu("h200-sxm")
    assert h200.bandwidth == 4.8e12 and h200.l2_bytes == 60 * 2**20 and h200.peaks == h100.peaks | {"fp32": 67e12}
    assert get_gpu("a100-sxm-80gb").peak("fp8") == 0 and get_gpu("rtx-3090").peak("fp8") == 0
    assert all(get_gpu(k).peak("fp8") > 0 for k in ("rtx-4090", "l40s", "l4"))
    assert get_gpu("b200").peak("fp4") > 0 and get_gpu("h200-sxm").peak("fp4") == 0


@pytest.mark.parametrize("key,unit,used", [
    ("a100-sxm-80gb", "fp8", "fp16"),
    ("h200-sxm", "fp4", "fp8"),
    ("a100-sxm-80gb", "fp4", "fp16"),
    ("b200", "fp4", "fp4"),
    ("v100-sxm2", "int8", "int8_dp4a"),
    ("v100-sxm2", "bf16", "fp32"),
    ("t4", "bf16", "fp32"),
    ("t4", "int8", "int8"),
    ("h100-sxm", "fp8", "fp8"),
])
def test_fallback_ceilings(key, unit, used):
    got, peak = get_gpu(key).ceiling(unit)
    assert got == used and peak == get_gpu(key).peak(used) > 0


def test_get_gpu_by_cuda_name_and_unknown():
    assert get_gpu("NVIDIA H200").key == "h200-sxm"
    assert get_gpu("nvidia h100 80gb hbm3").key == "h100-sxm"
    assert get_gpu("Tesla T4").key == "t4"
    with pytest.raises(InputError, match=r"unknown GPU 'h300'; valid: .*h200-sxm"):
        get_gpu("h300")


def _entry(**over):
    text = GPUS_TOML.read_text()
    first = text[text.index("[[gpu]]"):text.index("[[gpu]]", text.index("[[gpu]]") + 1)]
    for k, v in over.items():
        lines = [ln for ln in first.splitlines() if not ln.startswith(f"{k} =")]
        first = "\n".join(lines[:1] + ([f"{k} = {v}"] if v is not None else []) + lines[1:]) + "\n"
    return first


@pytest.mark.parametrize("over,message", [
    ({"sms": None}, "missing field 'sms'"),
    ({"bandwidth_bytes_per_s": -1.0}, "must be > 0"),
    ({"compute_capability": '"nine"'}, "compute_capability"),
    ({"sms": '"many"'}, "wrong type"),
])
def test_loader_rejects_bad_entries(tmp_path, over, message):
    path = tmp_path / "gpus.toml"
    path.write_text(_entry(**over))
    with pytest.raises(InputError, match=message):
        load_gpus(path)


def test_loader_rejects_unknown_peak_duplicates_and_bad_toml(tmp_path):
    p = tmp_path / "a.toml"
    p.write_text(_entry().replace("fp4 = 0.0", "fp4 = 0.0\nfp2 = 1.0"))
    with pytest.raises(InputError, match="unknown peak 'fp2'"):
        load_gpus(p)
    p = tmp_path / "b.toml"
    p.write_text(_entry() + _entry())
    with pytest.raises(InputError, match="duplicate key"):
        load_gpus(p)
    p = tmp_path / "c.toml"
    p.write_text("[[gpu]\n")
    with pytest.raises(InputError, match="not valid TOML"):
        load_gpus(p)


def _calibration(**over):
    data = {
        "schema_version": 1, "gpu_name": "NVIDIA H200", "gpu_key": "h200-sxm", "gpu_uuid": "GPU-1234",
        "timestamp": "2026-12-02T10:00:00Z", "sm_clock_hz": 1.98e9, "mem_clock_hz": 3.201e9, "environment": {},
        "ceilings": {"read_bytes_per_s": 4.45e12, "graph_launch_floor_s": 2.0e-6, "fp32_flops": 51e12,
                     "fp16_mma_flops": 630e12, "bf16_mma_flops": 625e12, "int8_mma_ops": 1250e12,
                     "fp8_mma_flops": 485e12, "cublas_fp16_flops": 750e12, "fp8_mma_emulated": True},
    }
    data.update(over)
    return data


def test_calibration_schema_version_matches_the_workbench_schema():
    from workbench.storage.schema import SCHEMA_VERSION

    assert CALIBRATION_SCHEMA_VERSION == SCHEMA_VERSION


def test_calibration_ceilings_map_to_units(tmp_path):
    cal = parse_calibration(_calibration())
    assert cal.bandwidth == 4.45e12 and cal.floor_s == 2e-6
    assert cal.ceiling("bf16") == ("bf16", 625e12)
    assert cal.ceiling("fp16") == ("fp16", 630e12)
    assert cal.ceiling("int8") == ("int8", 1250e12)
    assert cal.ceiling("fp8") == ("fp8", 630e12)  # emulated e4m3 mma: the fp16 mma ceiling applies
    assert cal.ceiling("fp4") == ("fp8", 630e12)
    native = parse_calibration(_calibration(ceilings={**_calibration()["ceilings"], "fp8_mma_emulated": False}))
    assert native.ceiling("fp8") == ("fp8", 485e12)
    by_name = parse_calibration(_calibration(gpu_key=""))
    assert by_name.gpu_key == "h200-sxm"


def test_load_calibrations_keeps_the_latest_and_rejects_bad_files(tmp_path):
    folder = tmp_path / "calibration"
    folder.mkdir()
    assert load_calibrations(tmp_path) == {}
    (folder / "old.json").write_text(json.dumps(_calibration(timestamp="2026-01-01T00:00:00Z", sm_clock_hz=1.5e9)))
    (folder / "new.json").write_text(json.dumps(_calibration()))
    cals = load_calibrations(tmp_path)
    assert list(cals) == ["h200-sxm"] and cals["h200-sxm"].sm_clock_hz == 1.98e9
    (folder / "future.json").write_text(json.dumps(_calibration(schema_version=99)))
    with pytest.raises(InputError, match="schema_version 99 not understood"):
        load_calibrations(tmp_path)
    (folder / "future.json").write_text("{not json")
    with pytest.raises(InputError, match="not a readable calibration"):
        load_calibrations(tmp_path)
