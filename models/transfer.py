"""Speaking for GPUs never calibrated: the kernel tier's GPU terms transferred from a calibrated reference GPU by a
few factors that each have a meaning, fitted where timings exist (models/transfer_fit.py) and kept with their
provenance and residuals in data/model/transfer-factors.json.

For a GPU g with datasheet figures and no calibration, from the calibrated reference GPU r (the H200):
  bandwidth    B_g = datasheet bandwidth x read_fraction[memory technology of g]: the achieved share of the
               datasheet DRAM bandwidth, per technology (HBM3e: the reference's calibrate read; others fitted on
               public timings of library kernels at small M). A technology without timings takes the median of its
               class (HBM, GDDR); a class without any, the median of every technology.
  read curve   r's measured L2-cold read curve with its bytes scaled by B_g / B_r and its times unchanged: the first
               bytes take as long on g as on r (graph launch and DRAM latency are alike), the ramp to full rate
               covers the bytes in flight of g's bandwidth, and the asymptote is B_g.
  tensor       every instruction path at r's measured share of its datasheet peak, times tensor_fraction[arch of g]
               (how much of its datasheet tensor peak an architecture sustains relative to the reference: clocks
               under tensor load, power limits; fitted on library GEMMs at every M; 1 for the reference's own
               architecture); before sm_90 mma.sync is the native tensor instruction, so mma_sync_* take the
               library share of the same type there.
  CUDA cores   FP32 FMA at r's share of the datasheet FP32 peak; conversion (dequantization) rates scale with
               SMs x clock (64 integer lanes per SM from sm_80 to sm_90).
  L2           r's ratio of L2 to DRAM read bandwidth, times B_g.
  clusters     an sm_90 GPU with r's SM count: r's resident clusters; any other: SMs // cluster size.
Every term's source is "transferred". Pure Python and NumPy; nothing here touches CUDA.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from models.errors import InputError
from models.hardware import GPU, MEMORY_TECHS
from models.kernel_model import KernelParams
from models.kernel_terms import CLUSTER_PIECES_MAX, PATHS, GpuTerms

TRANSFER_SCHEMA_VERSION = 1
FACTORS_FILE = Path("model") / "transfer-factors.json"  # under the data directory
# Before sm_90 the library's tensor instruction is mma.sync itself: these paths take the library path's share.
NATIVE_BEFORE_SM90 = {"mma_sync_f16": "wgmma_f16", "mma_sync_bf16": "wgmma_bf16", "mma_sync_s8": "wgmma_s8"}


@dataclass(frozen=True)
class Factor:
    """One fitted factor: its value, where it came from (GPUs, points) and the fit's residuals there."""

    value: float
    how: str
    gpus: tuple[str, ...] = ()
    points: int = 0
    residual_median: float = float("nan")  # signed median of log(pred / meas) of the points it was fitted on
    residual_p90: float = float("nan")  # p90 of |log(pred / meas)|

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "how": self.how, "gpus": list(self.gpus), "points": self.points,
                "residual_median": _rounded(self.residual_median), "residual_p90": _rounded(self.residual_p90)}


@dataclass(frozen=True)
class TransferFactors:
    """The transfer factors and the vendor-library kernels' parameters fitted on public timings."""

    reference_gpu: str
    read_fraction: dict[str, Factor]  # memory technology -> achieved share of the datasheet bandwidth
    tensor_fraction: dict[str, Factor] = field(default_factory=dict)  # architecture ("sm_80") -> tensor share
    kernels: dict[str, KernelParams] = field(default_factory=dict)  # library kernels fitted on public timings
    provenance: dict[str, Any] = field(default_factory=dict)

    def read_fraction_for(self, tech: str) -> tuple[float, str]:
        """(share, how it was chosen) for a memory technology: its own factor, else its class's median, else all."""
        return _pick(self.read_fraction, tech, MEMORY_TECHS.get(tech, ""), lambda t: MEMORY_TECHS.get(t, ""))

    def tensor_fraction_for(self, arch: str) -> tuple[float, str]:
        """(share, how it was chosen) for an architecture: its own factor, else the median of every architecture."""
        return _pick(self.tensor_fraction, arch, "", lambda a: "")

    def to_json(self) -> str:
        doc = {"schema_version": TRANSFER_SCHEMA_VERSION, "reference_gpu": self.reference_gpu,
               "read_fraction": {t: f.to_dict() for t, f in sorted(self.read_fraction.items())},
               "tensor_fraction": {a: f.to_dict() for a, f in sorted(self.tensor_fraction.items())},
               "kernels": {k: vars(p) for k, p in sorted(self.kernels.items())},
               "provenance": self.provenance}
        return json.dumps(doc, indent=1) + "\n"


def _rounded(x: float) -> float | None:
    return round(float(x), 4) if np.isfinite(x) else None


def _pick(table: dict[str, Factor], key: str, cls: str, class_of: Any) -> tuple[float, str]:
    if key in table:
        return table[key].value, f"{key} ({table[key].how})"
    same = [f.value for k, f in table.items() if cls and class_of(k) == cls]
    if same:
        return float(np.median(same)), f"median of the {cls.upper()} factors"
    if table:
        return float(np.median([f.value for f in table.values()])), "median of every factor"
    return 1.0, "no factor: the datasheet figure"


def _factor(d: Any, where: str) -> Factor:
    if not isinstance(d, dict) or not isinstance(d.get("value"), (int, float)) or isinstance(d.get("value"), bool):
        raise InputError(f"{where}: a factor must be an object with a numeric 'value'")
    if not 0 < d["value"] <= 10:
        raise InputError(f"{where}: value {d['value']} is out of range (a share: > 0, at most 10)")

    def residual(key: str) -> float:
        v = d.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan")

    return Factor(float(d["value"]), str(d.get("how", "")), tuple(str(g) for g in d.get("gpus", [])),
                  int(d.get("points", 0)), residual("residual_median"), residual("residual_p90"))


def parse_factors(text: str, where: str) -> TransferFactors:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != TRANSFER_SCHEMA_VERSION:
        raise InputError(f"{where}: schema_version not understood (this workbench reads {TRANSFER_SCHEMA_VERSION})")
    fractions = doc.get("read_fraction")
    if not isinstance(fractions, dict):
        raise InputError(f"{where}: no 'read_fraction' object")
    bad = [t for t in fractions if t not in MEMORY_TECHS]
    if bad:
        raise InputError(f"{where}: unknown memory technology {bad[0]!r}; valid: {', '.join(MEMORY_TECHS)}")
    archs = doc.get("tensor_fraction") or {}
    if not isinstance(archs, dict) or any(not str(a).startswith("sm_") for a in archs):
        raise InputError(f"{where}: 'tensor_fraction' must map architectures ('sm_80') to factors")
    kernels = doc.get("kernels") or {}
    return TransferFactors(
        reference_gpu=str(doc.get("reference_gpu", "")),
        read_fraction={t: _factor(v, f"{where}: read_fraction.{t}") for t, v in fractions.items()},
        tensor_fraction={a: _factor(v, f"{where}: tensor_fraction.{a}") for a, v in archs.items()},
        kernels={k: KernelParams.from_dict(v, f"{where}: {k}") for k, v in kernels.items()},
        provenance=dict(doc.get("provenance") or {}))


def load_factors(path: str | Path) -> TransferFactors | None:
    """The factors at `path`; None when the file does not exist (GPUs without a calibration then use datasheets)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"{path}: not readable ({exc.strerror})") from None
    return parse_factors(text, str(path))


def arch_of(gpu: GPU) -> str:
    """The architecture key of transfer factors: "sm_" and the compute capability's digits ("sm_89")."""
    return f"sm_{gpu.cc_int}"


def transfer_terms(gpu: GPU, ref: GpuTerms, ref_gpu: GPU, factors: TransferFactors) -> GpuTerms:
    """The kernel-tier figures of an uncalibrated `gpu`, transferred from the calibrated reference (module doc)."""
    frac, _ = factors.read_fraction_for(gpu.memory_tech)
    bw = gpu.bandwidth * frac
    ratio = bw / ref.asymptotic_bandwidth()
    tensor, _ = factors.tensor_fraction_for(arch_of(gpu))
    flops: dict[str, float] = {}
    for path, (_, unit) in PATHS.items():
        like = NATIVE_BEFORE_SM90.get(path, path) if gpu.cc_int < 90 else path
        share = ref.path_flops[like] / ref_gpu.ceiling(PATHS[like][1])[1]
        flops[path] = gpu.ceiling(unit)[1] * share * (tensor if path != "cuda_core" and path != "library_fp32"
                                                      else 1.0)
    fma = gpu.peak("fp32") / 2.0 * (2.0 * ref.fma_per_s / ref_gpu.peak("fp32"))
    issue = (gpu.sms * gpu.boost_clock_hz) / (ref_gpu.sms * ref_gpu.boost_clock_hz)
    dequant = {k: v * issue for k, v in ref.dequant_weights_per_s.items()}
    l2 = ref.l2_bytes_per_s / ref.asymptotic_bandwidth() * bw
    same_chip = gpu.cc_int == 90 and gpu.sms == ref.sms
    clusters = {c: (ref.resident_clusters.get(c, gpu.sms // c) if same_chip else float(gpu.sms // c))
                for c in range(2, CLUSTER_PIECES_MAX + 1)}
    sources = {k: "transferred" for k in ("memory", "fma", "alu", "tensor", "l2", "clusters")}
    sources.update({f"tensor:{p}": "transferred" for p in PATHS})
    return GpuTerms(gpu.key, ref.curve_bytes * ratio, ref.curve_time_s.copy(), dequant, fma, flops, sources, gpu.sms,
                    l2, clusters)
