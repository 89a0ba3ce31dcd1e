"""The kernel registry: every kernel the profiler can run, with its scheme, source, geometry and batch range.

Each provider module (listed in PROVIDERS) defines `SPECS: tuple[KernelSpec, ...]` at module level and must import
without CuPy or a GPU. A spec's `runner` names a factory ("module:function") that returns a `Runner`; it is imported
only when the kernel is run.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

from models.errors import InputError, unknown
from models.kernel_catalogue import KernelEntry
from models.kernel_terms import KernelFacts

PROVIDERS = (
    "kernels.gemv.gemv",  # GEMV-class kernels, batch 1-16 (and the chapter's reference kernels)
    "kernels.tcgemv.tc_gemv",  # the W4A16 GEMV-class kernel on tensor cores, batch 1-16
    "kernels.tcgemv.tc_gemv_q8",  # the FP8 and W8A8 GEMV-class kernels on tensor cores, batch 1-16
    "kernels.tcgemv.tc_gemv_f16",  # the BF16 and FP16 GEMV-class kernels on tensor cores, batch 1-16
    "kernels.tcgemv.tc_gemv_w8a16",  # the W8A16 GEMV-class kernels on tensor cores, batch 1-32
    "kernels.gemv.ladder",  # the W4A16 production-tricks ladder between the chapter's kernel and ours, batch 1-16
    "kernels.tensorcore.tensorcore",  # mma.sync GEMM kernels, batch 16-256
    "kernels.wgmma.wgmma",  # wgmma GEMM kernels (sm_90a: H100 / H200 only), batch 1-256, preferred from 16
    "kernels.wgmma.wg_w8a16",  # the W8A16 wgmma GEMMs (fp16 and bf16 activations), sm_90a, batch 1-256
    "kernels.wgmma.wg_fp8_block",  # FP8 with 128x128 block scales (DeepSeek-V3 style), wgmma, sm_90a
    "kernels.peers",  # cuBLAS through CuPy, torch's kernels
)


# What ties a kernel to its minimum compute capability (KernelSpec.min_cc), the one line a GPU below it is told.
# tests/test_ptx_gpu.py runs every kernel from PTX of its min_cc and checks that it fails from the one below.
NEEDS: dict[int, str] = {
    75: "CUDA-core code only",
    80: "mma.sync m16n8k16 with f16/bf16/s8 operands, bf16 and cp.async",
    89: "e4m3 conversions and mma.sync",
    90: "wgmma, TMA and thread-block clusters: sm_90a code",
}


@dataclass(frozen=True)
class KernelSpec:
    name: str  # unique, e.g. "w4a16_gemv"
    scheme: str  # a models.schemes name
    backend: str  # "nvrtc" (our .cu through CuPy RawModule), "cublas" (CuPy), "torch"
    role: str  # "reference" (the chapter's before), "ladder" (kernels/gemv/ladder.py), "optimized", "peer"
    runner: str  # "module:function" returning a Runner
    m_min: int = 1
    m_max: int = 16
    prefer_from: int | None = None  # without measurements, the dispatcher prefers it from this batch (m_min)
    min_cc: int = 80  # 80 = sm_80: the oldest architecture whose PTX runs it (a key of NEEDS)
    max_cc: int | None = None  # architecture-specific code (sm_90a: 90) runs on that compute capability only
    source: str | None = None  # file name in kernels/, for nvrtc kernels
    entry: str | None = None  # extern "C" __global__ name
    geometry: str = ""  # launch geometry in words (block, grid, split-K, ...)
    notes: str = ""  # e.g. "fp8 weights converted to fp16; e4m3 mma is emulated on sm_90"
    facts: KernelFacts | None = None  # what the kernel-aware model needs (family, instruction path, tiles, dequant)

    def supports(self, M: int, cc: int | None = None) -> bool:
        return self.m_min <= M <= self.m_max and (cc is None or self.min_cc <= cc <= (self.max_cc or cc))

    def unsupported(self, cc: int) -> str:
        """Why this kernel cannot run on compute capability `cc` (e.g. 75), in one line; "" when it can."""
        if self.min_cc <= cc <= (self.max_cc or cc):
            return ""
        span = f"sm_{self.min_cc}" + ("" if self.max_cc is None else
                                      " only" if self.max_cc == self.min_cc else f" to sm_{self.max_cc}")
        why = NEEDS.get(self.min_cc, "") if self.backend == "nvrtc" else f"a {self.backend} library kernel"
        why = why or f"declared min_cc {self.min_cc}"
        return f"{self.name} needs {span} ({why}); this GPU is sm_{cc}"


@dataclass
class Problem:
    """One input set on the device, ready to launch: fresh random data, never zeros."""

    M: int
    N: int
    K: int
    arrays: dict[str, Any]  # CuPy (or torch) device arrays the kernel reads
    out: Any  # device output, M x N
    nbytes: int  # device bytes of the inputs (for sizing the L2-cold rotation)
    ref: Any = None  # float64 reference y (M x N) from the *dequantized* weights, when asked for
    quant_error_rel: float = float("nan")  # quantization error, when a float weight was quantized
    bytes: int = 0  # bytes the launch reads and writes: its input arrays and its output (what the profiler stores)


class Runner(Protocol):
    spec: KernelSpec

    def check(self, M: int, N: int, K: int) -> None:
        """Raise InputError for a shape this kernel refuses, before anything is allocated."""

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        """Allocate and fill one input set on the device (with the float64 reference when asked)."""

    def launch(self, problem: Problem) -> None:
        """Enqueue one launch on the current stream: no sync, no allocation (CUDA-graph capturable)."""

    def output(self, problem: Problem) -> Any:
        """The output as a float64 NumPy array, M x N."""


def _load_specs() -> dict[str, KernelSpec]:
    specs: dict[str, KernelSpec] = {}
    for module_name in PROVIDERS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        for spec in module.SPECS:
            if spec.name in specs:
                raise RuntimeError(f"kernel {spec.name!r} registered twice")
            specs[spec.name] = spec
    return specs


def specs(scheme: str | None = None, role: str | None = None) -> list[KernelSpec]:
    """All registered kernels, optionally filtered by scheme and role."""
    return [
        s for s in _load_specs().values() if (scheme is None or s.scheme == scheme) and (role is None or s.role == role)
    ]


def catalogue() -> dict[str, KernelEntry]:
    """Every registered kernel as the analysis side sees it: what `workbench kernel-facts` writes to
    data/model/kernel-facts.json (models.kernel_catalogue reads it back without importing this registry), less the
    code fingerprints, which kernels.fingerprint.catalogue() adds."""
    return {
        name: KernelEntry(name=name, scheme=s.scheme, role=s.role, backend=s.backend, m_min=s.m_min, m_max=s.m_max,
                          min_cc=s.min_cc, max_cc=s.max_cc, facts=s.facts)
        for name, s in _load_specs().items()
    }


def get(name: str) -> KernelSpec:
    table = _load_specs()
    if name not in table:
        raise unknown("kernel", name, list(table))
    return table[name]


def runner(name: str, group_size: int | None = None) -> Runner:
    """Instantiate the runner of a kernel (imports CuPy / torch as that runner needs); `group_size` (w4a16 kernels:
    None for the scheme's default) is checked by the runner's `check`."""
    spec = get(name)
    module_name, _, func = spec.runner.partition(":")
    factory = getattr(importlib.import_module(module_name), func)
    return factory(spec, group_size=group_size) if spec.scheme == "w4a16" and group_size else factory(spec)


def check_batch(spec: KernelSpec, M: int) -> None:
    if not spec.m_min <= M <= spec.m_max:
        raise InputError(f"kernel {spec.name} supports M in [{spec.m_min}, {spec.m_max}], got M={M}")
