"""The kernel-aware tier: what a real kernel takes, as a sum of terms that each have a meaning and a measurement.

For a kernel with facts F (models.kernel_terms.KernelFacts) on a GPU with figures G (GpuTerms), at (M, N, K) reading
V bytes:
  fixed    G.fixed_s x (1 + F.extra_launches) + p.extra_fixed_s
                                              launch in a graph, first bytes and drain (the read curve at 4 KiB) of
                                              each kernel in the timed call, plus the kernel's own
                                              prologue/epilogue/split-tile fix-up
  memory   p.mem_scale * (G.read_time(V) - G.fixed_s)
                                              the L2-cold read curve of exactly these bytes (calibrate's microbench)
  alu      N*K*passes * p.alu_dq / G.dequant[F.dequant]  +  N*K*M_pad * p.alu_row / G.fma_per_s   (when declared)
                                              conversion work per weight against its microbenchmark's issue rate;
                                              CUDA-core products per weight and batch row in FMA units (GEMV class);
                                              block-scaled FP8: M_pad*N_pad*K/k_block rescale FMAs in the same units
  tensor   2*M_pad*N_pad*K / (G.path_flops[F.path] * p.tc_eff)
                                              the tile-padded work at the ceiling of the instruction the kernel issues
  stretch  alu and tensor x S / C for a tensor-core GEMV launching C < S CTAs on S SMs (models.parallelism
           .idle_stretch): its per-SM work runs on C SMs; reads are global and not stretched
  time     fixed + fixup + max(memory, alu, tensor) + (1 - p.overlap) * (the other two)
Parameters `p` (KernelParams) are per kernel and are the only numbers estimated from kernel timings: extra fixed
cost, memory and ALU multipliers (how far the kernel is from its microbenchmark), tensor efficiency and the overlap
of the terms. `models.kernel_fit` estimates them (with leave-one-shape-out validation); a kernel without fitted
parameters gets its family's median, or the neutral defaults below, and says which. A library's GEMV at small M is
a code path of its own (models.kernel_terms.kernel_paths): its facts, its parameters (key `<kernel>@gemv`).
  fixup    stream-K kernels: slots the busiest tile's owner sums x (tile rows x BN x 4 bytes) / (L2 rate / SMs),
           x p.fixup_scale, after the main loop (added, not overlapped); a split tile summed in a cluster of its s
           pieces counts (s - 1) / s slots (each CTA receives that share of a tile through distributed shared memory,
           priced at the same rate: the fitted fixup_scale covers both)
Attribution: fixed (G.fixed_s), fixup (p.extra_fixed_s + the split-tile term), memory, alu and tensor (the largest
term whole, the others scaled by 1 - overlap), so the parts add up to the predicted time; the remainder (measured -
predicted) is added where a measurement exists.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from models.errors import InputError
from models.kernel_terms import GpuTerms, KernelFacts
from models.parallelism import idle_stretch

PARAMS_SCHEMA_VERSION = 1
ATTRIBUTION = ("attr_fixed_s", "attr_fixup_s", "attr_memory_s", "attr_alu_s", "attr_tensor_s")
# (name, lower bound, upper bound, neutral default): the neutral default is a kernel at its microbenchmarks.
PARAM_BOUNDS: dict[str, tuple[float, float, float]] = {
    "extra_fixed_s": (0.0, 50e-6, 0.0),
    "mem_scale": (0.5, 4.0, 1.0),
    "alu_dq": (0.0, 40.0, 1.0),
    "alu_row": (0.0, 60.0, 1.0),
    "tc_eff": (0.02, 1.5, 1.0),
    "overlap": (0.0, 1.0, 1.0),
    "fixup_scale": (0.0, 20.0, 1.0),
}


@dataclass(frozen=True)
class KernelParams:
    extra_fixed_s: float = 0.0
    mem_scale: float = 1.0
    alu_dq: float = 1.0
    alu_row: float = 1.0
    tc_eff: float = 1.0
    overlap: float = 1.0
    fixup_scale: float = 1.0

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "kernel params") -> KernelParams:
        unknown_keys = set(data) - {f.name for f in fields(cls)}
        if unknown_keys:
            raise InputError(f"{where}: unknown parameter(s) {', '.join(sorted(unknown_keys))}; valid: "
                             f"{', '.join(PARAM_BOUNDS)}")
        values = {}
        for k, v in data.items():
            lo, hi, _ = PARAM_BOUNDS[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise InputError(f"{where}: {k} must be a number in [{lo}, {hi}], got {v!r}")
            values[k] = float(v)
        return cls(**values)


def active_params(facts: KernelFacts) -> tuple[str, ...]:
    """The parameters that act on this kernel (the others multiply a term it does not have)."""
    names = ["extra_fixed_s", "mem_scale", "overlap"]
    if facts.dequant != "none":
        names.append("alu_dq")
    if facts.cuda_core_rows or facts.k_block_rescale:
        names.append("alu_row")
    if facts.path != "cuda_core":
        names.append("tc_eff")
    if facts.stream_k_ctas:
        names.append("fixup_scale")
    return tuple(names)


@dataclass(frozen=True)
class Terms:
    """The unscaled terms of one kernel at many points (seconds, parameters not applied)."""

    fixed: np.ndarray
    memory: np.ndarray
    dequant: np.ndarray
    rows: np.ndarray
    tensor: np.ndarray
    fixup: np.ndarray


def raw_terms(facts: KernelFacts, gpu: GpuTerms, M: Any, N: Any, K: Any, nbytes: Any) -> Terms:
    M, N, K, V = (np.asarray(a, dtype=np.float64) for a in (M, N, K, nbytes))
    fixed = np.full(M.shape, gpu.fixed_s * (1 + facts.extra_launches))
    memory = np.maximum(gpu.read_time(V) - gpu.fixed_s, 0.0)
    zero = np.zeros(M.shape)
    m_pad = facts.padded_m(M, N)
    dequant = (N * K * facts.m_passes(M, N) / gpu.dequant_weights_per_s[facts.dequant]
               if facts.dequant != "none" else zero)
    rows = N * K * m_pad / gpu.fma_per_s if facts.cuda_core_rows else zero
    if facts.k_block_rescale:  # one FMA per accumulator and K block: m_pad x n_pad x K / k_block
        rows = rows + m_pad * facts.padded_n(N) * np.ceil(K / facts.k_block_rescale) / gpu.fma_per_s
    tensor = (2.0 * m_pad * facts.padded_n(N) * K / gpu.path_flops[facts.path]
              if facts.path != "cuda_core" else zero)
    # per-SM work on the SMs the grid occupies: a tensor-core GEMV with C < S CTAs converts and multiplies on C SMs
    stretch = idle_stretch(facts, M, N, gpu.sms)
    dequant, rows, tensor = dequant * stretch, rows * stretch, tensor * stretch
    # split tiles: the owner of the busiest tile reads its slots (m_pad x n-tile fp32 sums each) from L2 at one SM's
    # share of the L2 bandwidth, after its own main loop (not overlapped)
    slot = facts.tile_rows(M, N) * facts.bn_at(N) * 4.0
    fixup = (facts.fixup_slots(M, N, gpu.sms, gpu.resident_clusters) * slot / (gpu.l2_bytes_per_s / gpu.sms)
             if facts.stream_k_ctas else zero)
    return Terms(fixed, memory, dequant, rows, tensor, fixup)


def combine(t: Terms, p: KernelParams) -> dict[str, np.ndarray]:
    """Predicted time and its attribution (columns of ATTRIBUTION plus time_kernel_s)."""
    mem = p.mem_scale * t.memory
    alu = p.alu_dq * t.dequant + p.alu_row * t.rows
    tc = t.tensor / p.tc_eff
    body = np.stack([mem, alu, tc])
    top = body.max(axis=0)
    is_top = body == top
    first = is_top & (np.cumsum(is_top, axis=0) == 1)  # the largest term counted whole (ties: the first)
    shares = np.where(first, body, (1.0 - p.overlap) * body)
    fixup = p.extra_fixed_s + p.fixup_scale * t.fixup
    out = {"attr_fixed_s": t.fixed, "attr_fixup_s": fixup, "attr_memory_s": shares[0], "attr_alu_s": shares[1],
           "attr_tensor_s": shares[2]}
    out["time_kernel_s"] = t.fixed + fixup + shares.sum(axis=0)
    return out


def kernel_ceilings(facts: KernelFacts, gpu: GpuTerms, p: KernelParams) -> tuple[float, float]:
    """(bytes/s, FLOP/s) the kernel's own roofline: the read curve's asymptote over mem_scale, the path over tc_eff
    (CUDA-core products: the FMA rate over alu_row)."""
    bw = gpu.asymptotic_bandwidth() / p.mem_scale
    if facts.path == "cuda_core":
        peak = 2.0 * gpu.fma_per_s / p.alu_row if facts.cuda_core_rows and p.alu_row > 0 else float("nan")
    else:
        peak = gpu.path_flops[facts.path] * p.tc_eff
    return bw, peak


@dataclass(frozen=True)
class ParamTable:
    """Fitted parameters per kernel with where they came from (data/model/kernel-params.json)."""

    kernels: dict[str, KernelParams]
    provenance: dict[str, Any]

    def lookup(self, name: str, facts: KernelFacts, family_of: dict[str, str]) -> tuple[KernelParams, str]:
        if name in self.kernels:
            return self.kernels[name], "fitted"
        same = [self.kernels[k] for k, fam in family_of.items() if fam == facts.family and k in self.kernels]
        if same:
            med = {f.name: float(np.median([getattr(q, f.name) for q in same])) for f in fields(KernelParams)}
            return KernelParams(**med), f"family median ({facts.family})"
        return KernelParams(), "neutral (microbenchmarks only)"

    def to_json(self) -> str:
        doc = {"schema_version": PARAMS_SCHEMA_VERSION, "provenance": self.provenance,
               "kernels": {k: asdict(v) for k, v in sorted(self.kernels.items())}}
        return json.dumps(doc, indent=1, sort_keys=False) + "\n"


def load_params(path: str | Path) -> ParamTable:
    """The parameter table at `path`; an empty table when the file does not exist."""
    path = Path(path)
    if not path.exists():
        return ParamTable({}, {})
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable kernel-parameter JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != PARAMS_SCHEMA_VERSION:
        raise InputError(f"{path}: schema_version {doc.get('schema_version') if isinstance(doc, dict) else None!r} "
                         f"not understood (this workbench reads {PARAMS_SCHEMA_VERSION})")
    kernels = doc.get("kernels")
    if not isinstance(kernels, dict):
        raise InputError(f"{path}: no 'kernels' object")
    return ParamTable({k: KernelParams.from_dict(v, f"{path}: {k}") for k, v in kernels.items()},
                      dict(doc.get("provenance") or {}))
