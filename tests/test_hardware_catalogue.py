"""The GPU catalogue parser and the calibration reader, message by message (issue 21): a bad catalogue or
calibration file must say which file, which entry and what is wrong; the parsed values are checked by hand."""

from __future__ import annotations

import json
import math

import pytest

from models.errors import InputError
from models.hardware import GPUS_TOML, get_gpu, load_calibrations, load_gpus, parse_calibration, resolve_ceiling
from tests.test_hardware import _calibration, _entry


def _load(tmp_path, text, name="g.toml"):
    p = tmp_path / name
    p.write_text(text)
    return load_gpus(p), p


def test_first_entry_parsed_by_hand(tmp_path):
    gpus, _ = _load(tmp_path, _entry(sources=None))
    g = gpus["h200-sxm"]
    assert (g.key, g.name, g.bandwidth, g.l2_bytes, g.sms, g.boost_clock_hz, g.cc, g.memory_bytes) == (
        "h200-sxm", "NVIDIA H200 SXM 141GB", 4.8e12, 62914560, 132, 1.98e9, "9.0", 141e9)
    assert g.device_names == ("NVIDIA H200",) and g.cc_int == 90
    assert g.peaks == {"fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12, "int8": 1978.9e12,
                       "fp8": 1978.9e12, "fp4": 0.0}
    assert g.peak("fp4") == 0.0 and g.peak("int8_dp4a") == 0.0 and isinstance(g.peak("fp32"), float)
    assert g.sources["source"].startswith("NVIDIA H200 Tensor Core GPU datasheet")
    assert g.ridge("fp16") == pytest.approx(989.4e12 / 4.8e12, rel=1e-12)


@pytest.mark.parametrize("over, message", [
    ({"key": None}, "gpu #1 (?): missing field 'key'"),
    ({"name": None}, "gpu #1 (h200-sxm): missing field 'name'"),
    ({"bandwidth_bytes_per_s": "true"}, "gpu #1 (h200-sxm): field 'bandwidth_bytes_per_s' has the wrong type (bool)"),
    ({"device_names": '"NVIDIA H200"'}, "gpu #1 (h200-sxm): field 'device_names' has the wrong type (str)"),
    ({"sms": 0}, "gpu #1 (h200-sxm): field 'sms' must be > 0, got 0"),
    ({"memory_bytes": 0.0}, "gpu #1 (h200-sxm): field 'memory_bytes' must be > 0, got 0.0"),
    ({"l2_bytes": -1}, "gpu #1 (h200-sxm): field 'l2_bytes' must be > 0, got -1"),
    ({"boost_clock_hz": 0}, "gpu #1 (h200-sxm): field 'boost_clock_hz' must be > 0, got 0"),
    ({"compute_capability": '"9"'}, "gpu #1 (h200-sxm): compute_capability must look like '9.0', got '9'"),
    ({"compute_capability": '"9.x"'}, "gpu #1 (h200-sxm): compute_capability must look like '9.0', got '9.x'"),
    ({"compute_capability": '"9.0.1"'}, "gpu #1 (h200-sxm): compute_capability must look like '9.0', got '9.0.1'"),
])
def test_bad_entries_name_file_entry_and_field(tmp_path, over, message):
    with pytest.raises(InputError) as info:
        _load(tmp_path, _entry(**over))
    assert str(info.value) == f"{tmp_path / 'g.toml'}: {message}"


@pytest.mark.parametrize("old, new, message", [
    ("fp4 = 0.0", "fp4 = -1.0", "peak fp4 must be a number >= 0 FLOP/s, got -1.0"),
    ("fp4 = 0.0", "fp4 = true", "peak fp4 must be a number >= 0 FLOP/s, got True"),
    ("fp4 = 0.0", 'fp4 = "0"', "peak fp4 must be a number >= 0 FLOP/s, got '0'"),
    ("fp4 = 0.0", "fp4 = 0.0\nfp2 = 1.0", "unknown peak 'fp2'; valid: fp32, tf32, fp16, bf16, int8, fp8, fp4, "
                                          "int8_dp4a"),
    ("fp4 = 0.0\n", "", "missing peaks fp4 (write 0 where the chip has no such unit)"),
    ("fp32 = 67e12", "fp32 = 0.0", "peak fp32 must be > 0"),
])
def test_bad_peaks(tmp_path, old, new, message):
    with pytest.raises(InputError) as info:
        _load(tmp_path, _entry().replace(old, new, 1))
    assert str(info.value) == f"{tmp_path / 'g.toml'}: gpu #1 (h200-sxm): {message}"


def test_catalogue_level_errors(tmp_path):
    with pytest.raises(InputError) as info:
        _load(tmp_path, _entry() + _entry(), "dup.toml")
    assert str(info.value) == f"{tmp_path / 'dup.toml'}: gpu #2: duplicate key 'h200-sxm'"
    second = _entry(key='"other"', name='"Other"')
    with pytest.raises(InputError) as info:
        _load(tmp_path, _entry() + second, "names.toml")
    assert str(info.value) == (f"{tmp_path / 'names.toml'}: gpu #2 (other): name 'NVIDIA H200' already belongs to "
                               f"h200-sxm")
    with pytest.raises(InputError, match=r"^.*empty\.toml: no \[\[gpu\]\] entries$"):
        _load(tmp_path, "title = 'x'\n", "empty.toml")
    with pytest.raises(InputError, match=r"^cannot read the GPU catalogue .*missing\.toml: No such file"):
        load_gpus(tmp_path / "missing.toml")
    two, _ = _load(tmp_path, _entry() + _entry(key='"other"', name='"Other"', device_names='["Other X"]'), "ok.toml")
    assert list(two) == ["h200-sxm", "other"]
    assert get_gpu("  other x ", tmp_path / "ok.toml").key == "other"  # device name, case and spaces folded
    assert get_gpu("OTHER", tmp_path / "ok.toml").key == "other"
    with pytest.raises(InputError, match=r"^unknown GPU 'nope'; valid: h200-sxm, other$"):
        get_gpu("nope", tmp_path / "ok.toml")
    # the cache returns a copy: changing the result does not change the catalogue
    first = load_gpus(GPUS_TOML)
    first.clear()
    assert "h200-sxm" in load_gpus(GPUS_TOML)


def test_resolve_ceiling_skips_zero_nan_and_none():
    assert resolve_ceiling({"fp8": 0.0, "fp16": 5.0}, "fp8") == ("fp16", 5.0)
    assert resolve_ceiling({"fp8": float("nan"), "fp16": None, "fp32": 2}, "fp8") == ("fp32", 2.0)
    assert resolve_ceiling({"int8": 0.0, "int8_dp4a": 3.0}, "int8") == ("int8_dp4a", 3.0)
    unit, value = resolve_ceiling({}, "fp4")
    assert unit == "fp4" and math.isnan(value)
    assert resolve_ceiling({"fp4": 7}, "fp4") == ("fp4", 7.0) and isinstance(resolve_ceiling({"fp4": 7}, "fp4")[1],
                                                                             float)
    with pytest.raises(InputError, match=r"^unknown compute unit 'fp64'; valid: bf16, fp16, fp32, fp4, fp8, int8, "
                                         r"tf32$"):
        resolve_ceiling({}, "fp64")


@pytest.mark.parametrize("over, message", [
    ({"schema_version": True}, "schema_version True not understood (this workbench reads <= 1)"),
    ({"schema_version": "1"}, "schema_version '1' not understood (this workbench reads <= 1)"),
    ({"schema_version": 2}, "schema_version 2 not understood (this workbench reads <= 1)"),
    ({"ceilings": []}, "no 'ceilings' object"),
    ({"sm_clock_hz": True}, "sm_clock_hz must be a positive number, got True"),
    ({"sm_clock_hz": "2e9"}, "sm_clock_hz must be a positive number, got '2e9'"),
    ({"sm_clock_hz": 0.0}, "sm_clock_hz must be a positive number, got 0.0"),
    ({"gpu_key": "", "gpu_name": ""}, "neither gpu_key nor gpu_name is set"),
])
def test_bad_calibrations(over, message):
    with pytest.raises(InputError) as info:
        parse_calibration(_calibration(**over), "c.json")
    assert str(info.value) == f"c.json: {message}"
    with pytest.raises(InputError) as info:
        parse_calibration(_calibration(**over))
    assert str(info.value) == f"calibration: {message}"


def test_calibration_fields_by_hand():
    c = parse_calibration(_calibration(mem_clock_hz=True, environment=None), "x.json")
    assert (c.gpu_key, c.gpu_name, c.gpu_uuid, c.timestamp, c.path) == ("h200-sxm", "NVIDIA H200", "GPU-1234",
                                                                        "2026-12-02T10:00:00Z", "x.json")
    assert c.sm_clock_hz == 1.98e9 and isinstance(c.sm_clock_hz, float) and math.isnan(c.mem_clock_hz)
    assert c.environment == {} and c.fp8_mma_emulated is True and "fp8_mma_emulated" not in c.ceilings
    assert parse_calibration(_calibration(mem_clock_hz=3)).mem_clock_hz == 3.0
    assert parse_calibration(_calibration(sm_clock_hz=2)).sm_clock_hz == 2.0
    unknown_name = parse_calibration(_calibration(gpu_key=None, gpu_name="Mystery GPU"))
    assert unknown_name.gpu_key == "Mystery GPU"  # not in the catalogue: keyed by its name
    odd = parse_calibration(_calibration(ceilings={"read_bytes_per_s": True, "fp32_flops": "5"}))
    assert math.isnan(odd.bandwidth) and math.isnan(odd.peaks["fp32"]) and odd.fp8_mma_emulated is False
    assert parse_calibration(_calibration(schema_version=0)).gpu_key == "h200-sxm"


def test_load_calibrations_ties_and_bad_files(tmp_path):
    folder = tmp_path / "calibration"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(_calibration(sm_clock_hz=1.0e9)))
    (folder / "b.json").write_text(json.dumps(_calibration(sm_clock_hz=2.0e9)))  # same timestamp: the later file
    (folder / "c.json").write_text(json.dumps(_calibration(gpu_key="b200", timestamp="2020-01-01")))
    cals = load_calibrations(tmp_path)
    assert cals["h200-sxm"].sm_clock_hz == 2.0e9 and cals["h200-sxm"].path == str(folder / "b.json")
    assert sorted(cals) == ["b200", "h200-sxm"]
    (folder / "d.json").write_text("[1, 2]")
    with pytest.raises(InputError) as info:
        load_calibrations(tmp_path)
    assert str(info.value) == f"{folder / 'd.json'}: a calibration must be a JSON object"
    (folder / "d.json").write_text("{")
    with pytest.raises(InputError, match=r"^.*d\.json: not a readable calibration JSON \("):
        load_calibrations(tmp_path)


def test_optional_fields_default_to_empty(tmp_path):
    data = _calibration(environment={"driver": "580"})
    for key in ("gpu_uuid", "timestamp", "mem_clock_hz"):
        del data[key]
    del data["ceilings"]["fp8_mma_emulated"]
    c = parse_calibration(data)
    assert (c.gpu_uuid, c.timestamp, c.environment, c.fp8_mma_emulated) == ("", "", {"driver": "580"}, False)
    del data["gpu_name"]
    assert parse_calibration(data).gpu_name == ""
    gpus, _ = _load(tmp_path, _entry())
    assert gpus["h200-sxm"].sources["sms"] == "device-reported on the lent H200 (REFERENCE.md)"
    assert load_gpus(GPUS_TOML)["a100-sxm-80gb"].peak("fp8") == 0.0


def test_size_and_peak_checks_are_greater_than_zero_exactly(tmp_path):
    # the rule is "> 0": one SM, and an fp32 peak of 1 FLOP/s, are accepted (the smallest positive integers)
    gpus, _ = _load(tmp_path, _entry(sms=1).replace("fp32 = 67e12", "fp32 = 1.0", 1))
    assert gpus["h200-sxm"].sms == 1 and gpus["h200-sxm"].peak("fp32") == 1.0
    assert resolve_ceiling({"fp4": 0.5}, "fp4") == ("fp4", 0.5)  # any positive ceiling is a ceiling
    assert parse_calibration(_calibration(sm_clock_hz=1)).sm_clock_hz == 1.0


def test_two_missing_peaks_are_listed_with_a_comma(tmp_path):
    with pytest.raises(InputError) as info:
        _load(tmp_path, _entry().replace("fp8 = 1978.9e12\n", "", 1).replace("fp4 = 0.0\n", "", 1))
    assert str(info.value).endswith("gpu #1 (h200-sxm): missing peaks fp8, fp4 (write 0 where the chip has no such "
                                    "unit)")


@pytest.mark.parametrize("text", ["gpu = 'x'\n", "gpu = []\n", "[gpu]\nkey = 'a'\n"])
def test_a_catalogue_whose_gpu_is_not_a_list_of_tables_is_refused(tmp_path, text):
    with pytest.raises(InputError) as info:
        _load(tmp_path, text)
    assert str(info.value) == f"{tmp_path / 'g.toml'}: no [[gpu]] entries"


def test_load_calibrations_defaults_to_the_shipped_data_folder():
    from models.paths import checkout_data_dir

    DATA_DIR = checkout_data_dir()

    shipped = load_calibrations()
    assert shipped and {k: c.path for k, c in shipped.items()} == {k: c.path for k, c in
                                                                   load_calibrations(DATA_DIR).items()}
    assert all(c.path.startswith(str(DATA_DIR / "calibration")) for c in shipped.values())


@pytest.mark.parametrize("curve", [[1, 2], {"bytes": [1, 2]}, {"bytes": [1, 2], "time_s": 3},
                                   {"bytes": [1, 2], "time_s": [1e-6]}])
def test_bad_read_curves_are_refused(curve):
    with pytest.raises(InputError) as info:
        parse_calibration(_calibration(read_curve=curve), "c.json")
    assert str(info.value) == "c.json: read_curve must hold equally long lists 'bytes' and 'time_s'"


def test_read_curve_is_kept_and_defaults_to_empty():
    curve = {"bytes": [4096, 1e6], "time_s": [2e-6, 3e-6], "ctas": [132, 132]}
    assert parse_calibration(_calibration(read_curve=curve)).read_curve == curve
    assert parse_calibration(_calibration()).read_curve == {}
    assert parse_calibration(_calibration(read_curve=None)).read_curve == {}


def test_an_entry_without_per_figure_sources_has_only_its_source(tmp_path):
    text = _entry()
    gpus, _ = _load(tmp_path, text[:text.index("[gpu.sources]")])  # [gpu.sources] is optional
    assert gpus["h200-sxm"].sources == {"source": "NVIDIA H200 Tensor Core GPU datasheet (2024), SXM column; sparse "
                                                  "tensor figures halved"}
