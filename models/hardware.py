"""GPU specifications: the datasheet catalogue (data/gpus.toml) and the calibrated ceilings (data/calibration/*.json).

A scheme names the compute unit whose ceiling applies (models.schemes.COMPUTE_UNITS). Where a GPU lacks that unit
(peak 0 or absent) the next unit in FALLBACK applies — fp8 on Ampere runs on the fp16 tensor cores after conversion,
fp4 off Blackwell on fp8 (or fp16), bf16 on Volta/Turing through fp32 — and the model reports which one it used.

Calibrated ceilings (written by `workbench calibrate`, keys in workbench.storage.schema.CALIBRATION_CEILINGS) override
the datasheet per GPU: bandwidth ← read_bytes_per_s; fp16/bf16 ← fp16/bf16_mma_flops (what mma.sync reaches; the
cuBLAS figure is kept as `cublas_fp16_flops`); int8 ← int8_mma_ops; fp32 ← fp32_flops; fp8 ← fp8_mma_flops unless
the mma is emulated (sm_90 has no e4m3 mma.sync), then the fp16 mma ceiling (a kernel converts e4m3 to fp16).
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.errors import InputError, unknown
from models.paths import catalogue_dir, dataset_dir

GPUS_TOML = catalogue_dir() / "gpus.toml"

# Equals workbench.storage.schema.SCHEMA_VERSION (a test checks it); models must not import from workbench
# (a layer above).
CALIBRATION_SCHEMA_VERSION = 1

# Memory technologies the catalogue names (field memory_tech), each with its class: the kernel tier's transfer
# factors (models/transfer.py) are per technology, falling back to the class where a technology has no timings.
MEMORY_TECHS: dict[str, str] = {"HBM2": "hbm", "HBM2e": "hbm", "HBM3": "hbm", "HBM3e": "hbm",
                                "GDDR6": "gddr", "GDDR6X": "gddr", "GDDR7": "gddr"}
PEAK_UNITS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8", "fp4")
EXTRA_PEAKS: tuple[str, ...] = ("int8_dp4a",)
FALLBACK: dict[str, tuple[str, ...]] = {
    "fp32": ("fp32",),
    "tf32": ("tf32", "fp32"),
    "fp16": ("fp16", "fp32"),
    "bf16": ("bf16", "fp32"),
    "int8": ("int8", "int8_dp4a", "fp32"),
    "fp8": ("fp8", "fp16", "fp32"),
    "fp4": ("fp4", "fp8", "fp16", "fp32"),
}
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "key": str,
    "name": str,
    "device_names": list,
    "bandwidth_bytes_per_s": (int, float),
    "memory_bytes": (int, float),
    "l2_bytes": (int, float),
    "sms": int,
    "boost_clock_hz": (int, float),
    "compute_capability": str,
    "source": str,
    "peaks": dict,
}


@dataclass(frozen=True)
class GPU:
    key: str
    name: str
    bandwidth: float  # bytes/s, datasheet
    l2_bytes: int
    sms: int
    boost_clock_hz: float
    cc: str  # "9.0"
    peaks: dict[str, float]  # unit -> dense FLOP/s (OPS) at boost clock; 0 where absent
    sources: dict[str, str]  # "source" (whole entry) and per-figure overrides
    device_names: tuple[str, ...] = ()
    memory_bytes: float = 0.0
    memory_tech: str = ""  # MEMORY_TECHS key ("" where the catalogue entry does not say)

    @property
    def cc_int(self) -> int:
        """Compute capability as an int, e.g. 90 for "9.0"."""
        major, minor = self.cc.split(".")
        return int(major) * 10 + int(minor)

    def peak(self, unit: str) -> float:
        return float(self.peaks.get(unit, 0.0))

    def ceiling(self, compute_unit: str) -> tuple[str, float]:
        """(unit used, peak FLOP/s) for a scheme's compute unit, following FALLBACK where the GPU lacks it."""
        return resolve_ceiling(self.peaks, compute_unit)

    def ridge(self, compute_unit: str) -> float:
        """FLOP per byte where the datasheet roofline turns from memory- to compute-bound."""
        return self.ceiling(compute_unit)[1] / self.bandwidth


def resolve_ceiling(peaks: dict[str, float], compute_unit: str) -> tuple[str, float]:
    if compute_unit not in FALLBACK:
        raise unknown("compute unit", compute_unit, list(FALLBACK))
    for unit in FALLBACK[compute_unit]:
        value = peaks.get(unit, 0.0)
        if value is not None and math.isfinite(value) and value > 0:
            return unit, float(value)
    return compute_unit, float("nan")


def _bad(path: Path, where: str, what: str) -> InputError:
    return InputError(f"{path}: {where}: {what}")


def _parse_gpu(path: Path, index: int, entry: dict[str, Any]) -> GPU:
    where = f"gpu #{index + 1} ({entry.get('key', '?')})"
    for name, typ in _REQUIRED.items():
        if name not in entry:
            raise _bad(path, where, f"missing field {name!r}")
        if not isinstance(entry[name], typ) or isinstance(entry[name], bool):
            raise _bad(path, where, f"field {name!r} has the wrong type ({type(entry[name]).__name__})")
    for name in ("bandwidth_bytes_per_s", "memory_bytes", "l2_bytes", "sms", "boost_clock_hz"):
        if not entry[name] > 0:
            raise _bad(path, where, f"field {name!r} must be > 0, got {entry[name]}")
    cc = entry["compute_capability"]
    if len(cc.split(".")) != 2 or not all(p.isdigit() for p in cc.split(".")):
        raise _bad(path, where, f"compute_capability must look like '9.0', got {cc!r}")
    peaks: dict[str, float] = {}
    for unit, value in entry["peaks"].items():
        if unit not in PEAK_UNITS + EXTRA_PEAKS:
            raise _bad(path, where, f"unknown peak {unit!r}; valid: {', '.join(PEAK_UNITS + EXTRA_PEAKS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise _bad(path, where, f"peak {unit} must be a number >= 0 FLOP/s, got {value!r}")
        peaks[unit] = float(value)
    missing = [u for u in PEAK_UNITS if u not in peaks]
    if missing:
        raise _bad(path, where, f"missing peaks {', '.join(missing)} (write 0 where the chip has no such unit)")
    if peaks["fp32"] <= 0:
        raise _bad(path, where, "peak fp32 must be > 0")
    tech = entry.get("memory_tech", "")
    if tech and tech not in MEMORY_TECHS:
        raise _bad(path, where, f"unknown memory_tech {tech!r}; valid: {', '.join(MEMORY_TECHS)}")
    sources = {"source": entry["source"], **{str(k): str(v) for k, v in entry.get("sources", {}).items()}}
    return GPU(
        key=entry["key"],
        name=entry["name"],
        bandwidth=float(entry["bandwidth_bytes_per_s"]),
        l2_bytes=int(entry["l2_bytes"]),
        sms=int(entry["sms"]),
        boost_clock_hz=float(entry["boost_clock_hz"]),
        cc=cc,
        peaks=peaks,
        sources=sources,
        device_names=tuple(str(n) for n in entry["device_names"]),
        memory_bytes=float(entry["memory_bytes"]),
        memory_tech=str(tech),
    )


_CACHE: dict[Path, dict[str, GPU]] = {}


def load_gpus(path: str | Path | None = None) -> dict[str, GPU]:
    """The catalogue, key -> GPU, in file order; validated (InputError naming the file and entry on a bad one)."""
    p = Path(path) if path is not None else GPUS_TOML
    if p in _CACHE:
        return dict(_CACHE[p])
    try:
        raw = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{p}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise InputError(f"cannot read the GPU catalogue {p}: {exc.strerror}") from None
    entries = raw.get("gpu")
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{p}: no [[gpu]] entries")
    gpus: dict[str, GPU] = {}
    seen_names: dict[str, str] = {}
    for i, entry in enumerate(entries):
        gpu = _parse_gpu(p, i, entry)
        if gpu.key in gpus:
            raise _bad(p, f"gpu #{i + 1}", f"duplicate key {gpu.key!r}")
        for n in (gpu.key, gpu.name, *gpu.device_names):
            folded = n.strip().casefold()
            if seen_names.get(folded, gpu.key) != gpu.key:
                raise _bad(p, f"gpu #{i + 1} ({gpu.key})", f"name {n!r} already belongs to {seen_names[folded]}")
            seen_names[folded] = gpu.key
        gpus[gpu.key] = gpu
    _CACHE[p] = gpus
    return dict(gpus)


def find_gpu(key_or_device_name: str, path: str | Path | None = None) -> GPU | None:
    """The GPU whose key, name or CUDA device name matches (case-insensitive), or None."""
    wanted = str(key_or_device_name).strip().casefold()
    for gpu in load_gpus(path).values():
        if wanted in {n.strip().casefold() for n in (gpu.key, gpu.name, *gpu.device_names)}:
            return gpu
    return None


def get_gpu(key_or_device_name: str, path: str | Path | None = None) -> GPU:
    """The GPU for a catalogue key ("h200-sxm") or a CUDA device name ("NVIDIA H200"); InputError otherwise."""
    gpu = find_gpu(key_or_device_name, path)
    if gpu is None:
        raise unknown("GPU", key_or_device_name, list(load_gpus(path)))
    return gpu


@dataclass(frozen=True)
class Calibration:
    """Ceilings measured on one GPU by `workbench calibrate` (SI units), with the SM clock they were measured at."""

    gpu_key: str
    gpu_name: str
    sm_clock_hz: float
    ceilings: dict[str, float]
    fp8_mma_emulated: bool = False
    gpu_uuid: str = ""
    timestamp: str = ""
    mem_clock_hz: float = float("nan")
    path: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    read_curve: dict[str, list] = field(default_factory=dict)  # L2-cold read time vs bytes and CTAs (microbench)

    def _get(self, name: str) -> float:
        value = self.ceilings.get(name)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")

    @property
    def bandwidth(self) -> float:
        return self._get("read_bytes_per_s")

    @property
    def floor_s(self) -> float:
        """Per-launch floor: an empty kernel replayed in a CUDA graph (NaN if not measured)."""
        return self._get("graph_launch_floor_s")

    @property
    def peaks(self) -> dict[str, float]:
        """Calibrated ceilings per compute unit (NaN where not measured)."""
        fp16 = self._get("fp16_mma_flops")
        fp8 = fp16 if self.fp8_mma_emulated else self._get("fp8_mma_flops")
        return {
            "fp32": self._get("fp32_flops"),
            "fp16": fp16,
            "bf16": self._get("bf16_mma_flops"),
            "int8": self._get("int8_mma_ops"),
            "fp8": fp8,
        }

    def ceiling(self, compute_unit: str) -> tuple[str, float]:
        """(unit used, calibrated peak) with the same FALLBACK as the datasheet."""
        return resolve_ceiling(self.peaks, compute_unit)


def parse_calibration(data: dict[str, Any], path: str = "") -> Calibration:
    """A Calibration from the JSON object `workbench calibrate` writes; InputError on a file it cannot use."""
    where = path or "calibration"
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version > CALIBRATION_SCHEMA_VERSION:
        raise InputError(f"{where}: schema_version {version!r} not understood (this workbench reads <= "
                         f"{CALIBRATION_SCHEMA_VERSION})")
    ceilings = data.get("ceilings")
    if not isinstance(ceilings, dict):
        raise InputError(f"{where}: no 'ceilings' object")
    clock = data.get("sm_clock_hz")
    if isinstance(clock, bool) or not isinstance(clock, (int, float)) or not clock > 0:
        raise InputError(f"{where}: sm_clock_hz must be a positive number, got {clock!r}")
    name = str(data.get("gpu_name", ""))
    key = str(data.get("gpu_key") or "")
    if not key:
        found = find_gpu(name) if name else None
        key = found.key if found else name
    if not key:
        raise InputError(f"{where}: neither gpu_key nor gpu_name is set")
    mem = data.get("mem_clock_hz")
    curve = data.get("read_curve") or {}
    if curve and (not isinstance(curve, dict) or not all(isinstance(curve.get(k), list) for k in ("bytes", "time_s"))
                  or len(curve["bytes"]) != len(curve["time_s"])):
        raise InputError(f"{where}: read_curve must hold equally long lists 'bytes' and 'time_s'")
    return Calibration(
        gpu_key=key,
        gpu_name=name,
        sm_clock_hz=float(clock),
        ceilings={k: v for k, v in ceilings.items() if k != "fp8_mma_emulated"},
        fp8_mma_emulated=bool(ceilings.get("fp8_mma_emulated", False)),
        gpu_uuid=str(data.get("gpu_uuid", "")),
        timestamp=str(data.get("timestamp", "")),
        mem_clock_hz=float(mem) if isinstance(mem, (int, float)) and not isinstance(mem, bool) else float("nan"),
        path=path,
        environment=dict(data.get("environment") or {}),
        read_curve=dict(curve),
    )


def load_calibrations(data_dir: str | Path | None = None) -> dict[str, Calibration]:
    """gpu key -> the latest calibration among data_dir/calibration/*.json (empty if there is none); data_dir None:
    the dataset models.paths.dataset_dir finds (WORKBENCH_DATA, else the checkout's data/)."""
    folder = dataset_dir(data_dir) / "calibration"
    result: dict[str, Calibration] = {}
    for file in sorted(folder.glob("*.json")):
        try:
            data = json.loads(file.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"{file}: not a readable calibration JSON ({exc})") from None
        if not isinstance(data, dict):
            raise InputError(f"{file}: a calibration must be a JSON object")
        cal = parse_calibration(data, str(file))
        if cal.gpu_key not in result or cal.timestamp >= result[cal.gpu_key].timestamp:
            result[cal.gpu_key] = cal
    return result
