"""MoE expert layers in the profiler sweep (`workbench profile --moe MODEL[,MODEL]`, issue 33 item 5).

Each expert layer of each model (gate+up and down, models/workloads.py) is measured with the grouped kernels
(kernels/grouped/grouped.py) at every batch M = B through the profiler's own loop (profiler.run_sweep ->
workbench.measure.timing.measure: float64 check, L2-cold rotation, CUDA-graph replays). A point carries a `MoeSetup`
(experts, top-k, routing, routing seed, gathered input or routed order): the sweep makes one runner per (kernel,
setup), keys the point by its routing label and seed besides the dense key (store.POINT_KEY), and records with every
row E, top-k, the routing label and seed, the touched-expert count and the busiest expert's rows of the routing drawn
with that seed (models.moe.draw: the problem the kernel ran), and 2·B·k·N·K FLOPs. Layers are named
"<model>/expert_gate_up" and "<model>/expert_down"; the output defaults to measurements/<gpu>/moe-<mode>.parquet.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels.registry import KernelSpec
from models.errors import InputError
from models.moe import Routing, draw, parse_routing
from workbench.measure.profiler import Point, Shape

# scheme -> the grouped kernels the sweep measures it with (the tensor-core ones, docs/moe.md; bf16 also the wgmma
# GEMM, which plan leaves out off sm_90)
SCHEME_KERNELS = {"bf16": ("grouped_bf16_tc", "grouped_bf16_wg"), "w4a16": ("grouped_w4a16_tc",),
                  "fp8": ("grouped_fp8_tc",)}
MOE_BATCH_MAX = 4096


@dataclass(frozen=True)
class MoeSetup:
    """One expert layer's grouped problem besides (M, N, K): what the runner and the recorded columns need."""

    model: str
    experts: int
    top_k: int
    routing: Routing
    routing_seed: int
    gather: bool  # gate+up: the kernel gathers the tokens' rows; down: its input is already in routed order

    def key(self) -> tuple[str, int]:
        return self.routing.label, int(self.routing_seed)

    def drawn(self, batch: int) -> tuple[int, int]:
        """(touched experts, busiest expert's rows) of the routing drawn with the seed at this batch."""
        counts = np.bincount(draw(batch, self.experts, self.top_k, self.routing, self.routing_seed).ravel(),
                             minlength=self.experts)
        return int(np.count_nonzero(counts)), int(counts.max())

    def columns(self, p: Point) -> dict[str, Any]:
        touched, busiest = self.drawn(p.M)
        return {"experts": self.experts, "top_k": self.top_k, "routing": self.routing.label,
                "routing_seed": int(self.routing_seed), "touched_experts": touched, "busiest_rows": busiest,
                "flops": 2.0 * p.M * self.top_k * p.shape.N * p.shape.K}

    def runner(self, kernel: str) -> Any:
        return _runner_class()(kernel, self.experts, self.top_k, self.routing, routing_seed=self.routing_seed,
                               gather=self.gather)


@functools.cache
def _runner_class() -> type:
    """GroupedRunner with the compile_jobs the sweep's parallel precompile asks runners for (kernel_prep.compile_jobs):
    every launch configuration the planned batches need compiles before the first point, in parallel."""
    from kernels.grouped.grouped import GroupedRunner
    from kernels.toolchain import build

    class Runner(GroupedRunner):
        def compile_jobs(self, M: int, N: int, K: int) -> list[build.Job]:
            return [self.compile_job(M, N, K)]

    return Runner


def spec(kernel: str) -> KernelSpec:
    """A KernelSpec for a grouped kernel (they are not in the registry's PROVIDERS: their problems need a setup)."""
    from kernels.grouped.grouped import ENTRY, KERNELS, MAX_CC, MIN_CC

    if kernel not in KERNELS:
        raise InputError(f"unknown grouped kernel {kernel!r}; valid with --moe: {', '.join(KERNELS)}")
    scheme, source, tc = KERNELS[kernel]
    return KernelSpec(name=kernel, scheme=scheme, backend="nvrtc", role="optimized",
                      runner="workbench.measure.moe_points:runner_factory", m_min=1, m_max=MOE_BATCH_MAX,
                      min_cc=MIN_CC.get(kernel, 80), max_cc=MAX_CC.get(kernel), source=source,
                      entry=ENTRY[(kernel, True)],
                      geometry="persistent grid over (touched expert, row tile) items, one launch per layer")


def select(schemes: list[str], kernels: list[str]) -> list[KernelSpec]:
    """The grouped kernels to run: named ones, else the scheme's kernels (default: all of SCHEME_KERNELS; plan
    leaves out those the GPU's compute capability cannot run: fp8 below sm_89, the wgmma kernel off sm_90)."""
    if kernels:
        specs = [spec(k) for k in kernels]
        return [s for s in specs if not schemes or s.scheme in schemes] or _none(schemes)
    for s in schemes:
        if s not in SCHEME_KERNELS:
            raise InputError(f"--moe measures schemes {', '.join(SCHEME_KERNELS)} (grouped kernels), not {s!r}")
    return [spec(k) for s in (schemes or list(SCHEME_KERNELS)) for k in SCHEME_KERNELS[s]]


def _none(schemes: list[str]) -> list[KernelSpec]:
    raise InputError(f"no selected grouped kernel runs scheme(s) {', '.join(schemes)}")


def parse_models(text: str) -> list[str]:
    """'mixtral-8x7b,qwen3-30b-a3b' -> model keys, each an MoE model of data/workloads.toml."""
    from models.workloads import get_model

    keys = [t.strip() for t in str(text).split(",") if t.strip()]
    if not keys:
        raise InputError("--moe: give one or more MoE model keys, e.g. --moe mixtral-8x7b,qwen3-30b-a3b")
    for k in keys:
        if not any(layer.experts > 1 for layer in get_model(k).layers):  # unknown key: get_model's InputError
            raise InputError(f"--moe {k}: the model has no MoE expert layers")
    return list(dict.fromkeys(keys))


def setups(models: list[str], routing: str | Routing | None, seed: int) -> list[tuple[Shape, MoeSetup]]:
    """(shape, setup) of every expert layer of the models, the routing checked against each layer's E and top-k."""
    from models.moe import moe_model
    from models.workloads import get_model

    if isinstance(seed, bool) or not 0 <= int(seed) < 2**32:
        raise InputError(f"--routing-seed {seed}: give an integer in [0, 2^32)")
    r = parse_routing(routing)
    out = []
    for key in models:
        model, _ = moe_model(get_model(key), r)  # InputError: top-k > E, a histogram that does not fit E
        for layer in (x for x in model.layers if x.experts > 1):
            shape = Shape(f"{key}/{layer.name}", int(layer.N), int(layer.K))
            out.append((shape, MoeSetup(key, int(layer.experts), int(layer.top_k), r, int(seed),
                                        gather=not layer.name.endswith("down"))))
    return out


def plan(specs: list[KernelSpec], layers: list[tuple[Shape, MoeSetup]], batches: list[int],
         cc: int | None) -> list[Point]:
    """Every (kernel, expert layer, M), kernel-major: the profiler's points, each with its MoeSetup."""
    if not batches or any(int(m) < 1 for m in batches):
        raise InputError(f"batches must be positive integers, got {batches}")
    return [Point(s, shape, int(m), setup) for s in specs for shape, setup in layers for m in batches
            if s.supports(int(m), cc)]


def runner_factory(name: str, group_size: int | None = None, *, setup: MoeSetup | None = None) -> Any:
    """profiler.run_sweep's runner_factory for MoE points: the grouped runner of (kernel, setup)."""
    if setup is None:
        from kernels import registry

        return registry.runner(name, group_size) if group_size else registry.runner(name)
    return setup.runner(name)


def device_bytes(point: Point, l2_bytes: int) -> float:
    """Device memory one MoE point needs: every expert's weights (the input sets share them), its activations,
    output and float64 reference (8 bytes a value), plus slack."""
    from kernels.grouped.grouped_config import expert_bytes

    setup: MoeSetup = point.setup
    rows = point.M * setup.top_k
    weights = setup.experts * expert_bytes(point.spec.scheme, point.shape.N, point.shape.K)
    return float(weights + 4 * rows * (point.shape.N + point.shape.K) + 8 * rows * point.shape.N + (256 << 20))


def check_memory(points: list[Point], free_bytes: int, l2_bytes: int) -> None:
    """Refuse, before allocating anything, a layer whose experts cannot fit in free device memory."""
    for p in points:
        need = device_bytes(p, l2_bytes)
        if need > free_bytes:
            raise InputError(f"{p.spec.name} {p.shape.layer} M={p.M} needs ~{need / 1e9:.1f} GB of device memory, "
                             f"{free_bytes / 1e9:.1f} GB free")
