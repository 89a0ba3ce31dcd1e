"""Sweeps: schemes x kernels x batches x shapes, measured through `workbench.measure.timing`, one row per point.

Each point is appended to a JSONL journal beside the output Parquet as soon as it is measured; the journal is folded
into the Parquet at the end, on Ctrl-C, and at the start of the next run. Re-running the same sweep to the same
output skips every point already there (same GPU UUID, kernel, scheme, layer, M, N, K, mode): that is the resume.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from kernels import fingerprint, registry
from kernels.registry import KernelSpec
from models.errors import InputError, unknown
from workbench.measure import warm_up
from workbench.measure.environment import Environment
from workbench.measure.kernel_prep import free_inputs, make_runners, runner_key, start_compiles
from workbench.measure.nvml import ClockSummary, NvmlSampler
from workbench.measure.timing import PointTiming, TimingConfig, measure
from workbench.storage import store
from workbench.storage.locks import point_flags
from workbench.storage.schema import ADDED_COLUMNS, SCHEMA_VERSION

DEFAULT_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_MODEL = "llama-2-7b"
CHAPTER_SHAPE = (4096, 4096)
DEFAULT_LAYERS = ("qkv", "o", "gate_up", "down")
MEMORY_SLACK_BYTES = 256 << 20
MAX_CONSECUTIVE_FAILURES = 5


@dataclass(frozen=True)
class Shape:
    layer: str  # "llama-2-7b/gate_up", or "" for a bare --shape
    N: int
    K: int


@dataclass(frozen=True)
class Point:
    spec: KernelSpec
    shape: Shape
    M: int
    # a runner setup beyond the kernel's name (None: a dense point); workbench.measure.moe_points.MoeSetup: an MoE
    # expert layer (experts, top-k, routing, seed): its own runner, its key columns and recorded columns
    setup: Any = None


def variant(p: Point) -> tuple[str, int]:
    """The point-key columns a setup adds (routing label, routing seed); ("", 0) for a dense point."""
    return ("", 0) if p.setup is None else p.setup.key()


@dataclass
class SweepResult:
    frame: pd.DataFrame  # every row in the output file after the sweep
    measured: int = 0
    skipped_done: int = 0
    refused: list[str] = field(default_factory=list)  # kernel/shape combinations a runner refused, with the reason
    failed: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    run_id: str = ""
    nvml_warning: str = ""


# ---------------------------------------------------------------------------------------------------- planning
def parse_shapes(texts: Iterable[str]) -> list[Shape]:
    from models.workloads import parse_shape

    return [Shape("", *parse_shape(t)) for t in texts]


def model_shapes(model: str) -> list[Shape]:
    from models.workloads import get_model

    return [Shape(f"{model}/{layer.name}", int(layer.N), int(layer.K)) for layer in get_model(model).layers]


def default_shapes() -> list[Shape]:
    """The chapter's 4096x4096 and the Llama-2-7B block layers, each (N, K) once (o is 4096x4096 too).

    The once-per-token lm_head is left out of the default (ask for it with --model).
    """
    block = [s for s in model_shapes(DEFAULT_MODEL) if s.layer.rsplit("/", 1)[-1] in DEFAULT_LAYERS]
    return dedupe_shapes([Shape("", *CHAPTER_SHAPE), *block])


def dedupe_shapes(shapes: Iterable[Shape]) -> list[Shape]:
    seen: dict[tuple[int, int], Shape] = {}
    for s in shapes:
        seen.setdefault((s.N, s.K), s)
    return list(seen.values())


def select_kernels(schemes: Iterable[str] = (), kernels: Iterable[str] = (),
                   exclude: Iterable[str] = ()) -> list[KernelSpec]:
    """Registered kernels, by name and/or scheme; unknown names and schemes without a kernel are InputErrors."""
    from models.schemes import SCHEME_NAMES

    schemes, kernels, exclude = list(schemes), list(kernels), list(exclude)
    for k in exclude:
        registry.get(k)  # unknown -> InputError
    for s in schemes:
        if s not in SCHEME_NAMES:
            raise unknown("scheme", s, SCHEME_NAMES)
    chosen = [registry.get(k) for k in kernels] if kernels else registry.specs()
    if schemes:
        chosen = [s for s in chosen if s.scheme in schemes]
        missing = sorted(set(schemes) - {s.scheme for s in chosen})
        if missing:
            have = sorted({s.scheme for s in (registry.specs() if not kernels else chosen)})
            raise InputError(f"no selected kernel runs scheme(s) {', '.join(missing)}; runnable: {', '.join(have)}")
    chosen = [s for s in chosen if s.name not in exclude]
    if not chosen:
        raise InputError("no kernel matches the selection (is the kernel registry empty?)")
    return chosen


def plan(specs: Iterable[KernelSpec], shapes: Iterable[Shape], batches: Iterable[int], cc: int | None) -> list[Point]:
    """Every (kernel, shape, M) the kernels support on this compute capability, kernel-major (compile once)."""
    batches = list(batches)
    if not batches or any(int(m) < 1 for m in batches):
        raise InputError(f"batches must be positive integers, got {batches}")
    shapes = list(shapes)
    return [Point(s, sh, int(m)) for s in specs for sh in shapes for m in batches if s.supports(int(m), cc)]


def unsupported(specs: Iterable[KernelSpec], cc: int | None) -> list[str]:
    """One line per kernel that compute capability `cc` cannot run (KernelSpec.unsupported): what the sweep prints
    as skipped (plan leaves their points out)."""
    return [] if cc is None else [line for s in specs if (line := s.unsupported(cc))]


def point_key(gpu_uuid: str, spec_name: str, scheme: str, layer: str, M: int, N: int, K: int, mode: str,
              group_size: int, routing: str = "", routing_seed: int = 0) -> tuple:
    """A point's identity, in the order of store.POINT_KEY (the one definition of which columns make it)."""
    return (gpu_uuid, spec_name, scheme, layer, int(M), int(N), int(K), mode, int(group_size), str(routing),
            int(routing_seed))


def device_bytes_needed(point: Point, l2_bytes: int, cfg: TimingConfig) -> float:
    """Device memory one point needs: its input sets (>= rotate_factor x L2 in all), output and reference, and the
    inputs the kernels share (kernels.input_cache's bound)."""
    from kernels.input_cache import DEFAULT_MAX_BYTES
    from models.schemes import traffic

    one = float(traffic(point.spec.scheme, point.M, point.shape.N, point.shape.K).bytes)
    rotation = one if cfg.hot else max(one, cfg.rotate_factor * l2_bytes) + one
    return rotation + 8.0 * point.M * point.shape.N + MEMORY_SLACK_BYTES + DEFAULT_MAX_BYTES


def check_memory(points: Iterable[Point], free_bytes: int, l2_bytes: int, cfg: TimingConfig) -> None:
    """Refuse, before allocating anything, a point whose buffers cannot fit in free device memory."""
    for p in points:
        need = device_bytes_needed(p, l2_bytes, cfg)
        if need > free_bytes:
            raise InputError(
                f"{p.spec.name} M={p.M} {p.shape.N}x{p.shape.K} needs ~{need / 1e9:.1f} GB of device memory, "
                f"{free_bytes / 1e9:.1f} GB free; use a smaller shape or batch"
            )


# ---------------------------------------------------------------------------------------------------- rows
def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def make_row(env: Environment, point: Point, t: PointTiming, clocks: ClockSummary, *, run_id: str, mode: str,
             calibration_sm_clock_hz: float, group_size: int = 0) -> dict[str, Any]:
    """One measurement row (workbench.storage.schema.MEASUREMENT_COLUMNS): `bytes` what the kernel's device arrays
    hold (its inputs and output; the scheme's accounting at this group size when the runner does not say),
    FLOPs 2*M*N*K."""
    from models.schemes import get_scheme, traffic

    scheme = get_scheme(point.spec.scheme, group_size=group_size) if group_size else get_scheme(point.spec.scheme)
    tr = traffic(scheme, point.M, point.shape.N, point.shape.K)
    s = t.stats
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        **env.columns(),
        "scheme": point.spec.scheme,
        "kernel": point.spec.name,
        "backend": point.spec.backend,
        "role": point.spec.role,
        "layer": point.shape.layer,
        "M": point.M,
        "N": point.shape.N,
        "K": point.shape.K,
        "group_size": int(scheme.group_size),
        **{c: point.M if v is None else v for c, v in ADDED_COLUMNS.items()},  # a dense layer (MoE: setup.columns)
        "kernel_fingerprint": fingerprint.current(point.spec.name),
        "bytes": float(t.bytes) if t.bytes > 0 else float(tr.bytes),
        "flops": float(tr.flops),
        "mode": mode,
        "rotate_sets": t.rotate_sets,
        "rotate_bytes": t.rotate_bytes,
        "n_samples": s.n,
        "launches_per_sample": t.launches_per_sample,
        "timer": t.method,
        "time_median_s": s.median,
        "time_p10_s": s.p10,
        "time_p90_s": s.p90,
        "time_min_s": s.min,
        "time_mean_s": s.mean,
        "spread_rel": s.spread_rel,
        "time_single_call_s": t.time_single_call_s,
        **clocks.columns(),
        "calibration_sm_clock_hz": calibration_sm_clock_hz,
        "ref_error_rel": t.ref_error_rel,
        "ref_maxabs_rel": t.ref_maxabs_rel,
        "quant_error_rel": t.quant_error_rel,
    }


def calibration_clock(env: Environment, calibration_dir: str | Path | None) -> float:
    """The SM clock recorded by `workbench calibrate` for this GPU (by UUID, else by catalogue key); NaN if none."""
    if calibration_dir is None:
        return math.nan
    docs = store.load_calibrations(calibration_dir)
    by_uuid = [d for d in docs.values() if d.get("gpu_uuid") == env.gpu_uuid]
    doc = by_uuid[0] if by_uuid else docs.get(env.gpu_key or env.gpu_name)
    return float(doc["sm_clock_hz"]) if doc and doc.get("sm_clock_hz") else math.nan


# ---------------------------------------------------------------------------------------------------- the sweep
def _existing(out: Path, supersede: bool = False) -> pd.DataFrame:
    """Rows already in the output, folding a journal left by a killed run (with `supersede`: a --remeasure run's)."""
    if out.exists() or store.journal_path(out).exists():
        return store.fold_journal(out, supersede=supersede)
    return store.empty_measurements()


def run_sweep(
    points: list[Point],
    out: str | Path,
    env: Environment,
    *,
    cfg: TimingConfig,
    timer: Any,
    sampler: NvmlSampler,
    runner_factory: Callable[..., Any] = registry.runner,
    calibration_sm_clock_hz: float = math.nan,
    group_size: int | None = None,
    fresh: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    warm_threads: int = warm_up.WARM_THREADS,
    remeasure: bool = False,
) -> SweepResult:
    """Measure `points` (skipping those already in `out`), appending each row to the journal as it is measured.

    `remeasure`: measure every point, also those `out` holds; the new rows replace the old rows of the same points
    (of any GPU of this kind) when the journal is folded, at the end or on an interruption (store.fold_journal).

    `group_size` (w4a16 kernels; None: the scheme's default) is passed to their runners, which refuse one they
    cannot run. Every kernel the points need is compiled in background processes (start_compiles) and measured as
    soon as its cubins are there, in plan order among the ready ones (phase "compile": what measuring waited).
    While the first kernel compiles, `warm_threads` threads prepare every runner on tiny shapes
    (workbench.measure.warm_up; phase "warm-up": what measuring waited for them); nothing is timed before they end."""
    t_start = time.perf_counter()
    out = store.check_writable(out)
    jpath = store.journal_path(out)
    if fresh:
        out.unlink(missing_ok=True)
        jpath.unlink(missing_ok=True)
    existing = _existing(out, supersede=remeasure)
    mine = existing[existing["gpu_uuid"] == env.gpu_uuid] if len(existing) else existing
    mode = "hot" if cfg.hot else "cold"
    done = set() if remeasure else {point_key(*r) for r in mine[list(store.POINT_KEY)].itertuples(index=False)}
    run_id = str(mine["run_id"].iloc[-1]) if len(mine) and not remeasure else new_run_id()

    def group_of(p: Point) -> int:
        return (group_size or _default_group()) if p.spec.scheme == "w4a16" else 0

    todo = [p for p in points if point_key(env.gpu_uuid, p.spec.name, p.spec.scheme, p.shape.layer, p.M, p.shape.N,
                                           p.shape.K, mode, group_of(p), *variant(p)) not in done]
    result = SweepResult(frame=existing, skipped_done=len(points) - len(todo), run_id=run_id)
    phases = result.phases
    runners: dict[str, Any] = {}
    unavailable: set[str] = set()  # kernels whose runner cannot be built here (torch missing, ...)
    failures_in_row = 0
    eager_noted: set[str] = set()

    def add_phase(name: str, seconds: float) -> None:
        phases[name] = phases.get(name, 0.0) + seconds

    def measure_point(p: Point, runner: Any) -> bool:
        """Measure and store one point; False when its runner refuses it (noted in result.refused)."""
        name = p.spec.name
        try:
            runner.check(p.M, p.shape.N, p.shape.K)
        except InputError as exc:
            result.refused.append(f"{name} M={p.M} {p.shape.N}x{p.shape.K}: {exc}")
            return False
        with sampler.window(calibration_sm_clock_hz) as w:
            timing = measure(runner, p.M, p.shape.N, p.shape.K, env.l2_bytes, timer, cfg)
        for k, v in timing.phases.items():
            add_phase(k, v)
        if timing.method != "graph" and name not in eager_noted:
            eager_noted.add(name)
            why = getattr(timer, "capture_error", "") or "graphs off"
            log(f"note: {name}: timed eager back-to-back launches, not a CUDA graph ({why})")
        row = make_row(env, p, timing, w.summary, run_id=run_id, mode=mode,
                       calibration_sm_clock_hz=calibration_sm_clock_hz, group_size=group_of(p))
        if p.setup is not None:
            row.update(p.setup.columns(p))
        row.update(point_flags(row, cfg.target_spread))  # spread above target / other processes
        store.append_journal(jpath, row)
        result.measured += 1
        return True

    by_kernel: dict[str, list[Point]] = {}
    for p in todo:
        by_kernel.setdefault(p.spec.name, []).append(p)
    result.refused += make_runners(todo, runners, runner_factory, group_size, unavailable, add_phase)
    bar = _progress(progress, len(todo))
    try:
        with start_compiles(todo, runners) as pool, sampler, bar:
            if sampler.warning:
                log(f"note: {sampler.warning}")
            task = bar.add_task("profile", total=len(todo)) if bar else None
            left = list(by_kernel)
            if left and not pool.ready(left[0]):  # a fresh cache: initialise what the points need while it compiles
                t = time.perf_counter()
                for msg in warm_up.run(todo, runners, runner_factory, group_size, warm_threads):
                    log(f"note: {msg}")
                add_phase("warm-up", time.perf_counter() - t)
            while left:  # kernels in plan order, each as soon as its cubins are in the cache
                t = time.perf_counter()
                name = pool.wait_ready(left)
                add_phase("compile", time.perf_counter() - t)  # measuring waited for compiles
                left.remove(name)
                for msg in pool.errors(name):
                    log(f"note: compile failed: {msg}")
                for p in by_kernel[name]:
                    if bar:
                        bar.update(task, description=f"{name} {p.shape.N}x{p.shape.K} M={p.M}")
                    try:
                        if name not in unavailable and measure_point(p, runners[runner_key(p)]):
                            failures_in_row = 0
                    except (ImportError, ModuleNotFoundError) as exc:
                        unavailable.add(name)
                        result.refused.append(f"{name}: cannot run here ({exc})")
                    except (KeyboardInterrupt, InputError):
                        raise
                    except Exception as exc:  # one broken kernel must not lose the sweep
                        failures_in_row += 1
                        msg = f"{name} M={p.M} {p.shape.N}x{p.shape.K}: {type(exc).__name__}: {exc}".splitlines()[0]
                        result.failed.append(msg)
                        log(f"failed: {msg}")
                        advice = f"points so far are kept in {out}; re-run with --exclude {name} to resume without it"
                        if not _device_ok(timer):
                            raise SweepAborted(f"the CUDA context is lost after {msg}; {advice}", True) from None
                        if failures_in_row >= MAX_CONSECUTIVE_FAILURES:
                            why = f"{failures_in_row} points failed in a row (last: {msg})"
                            raise SweepAborted(f"{why}; {advice}") from None
                    finally:
                        if bar:
                            bar.advance(task)
    finally:
        t = time.perf_counter()
        result.frame = store.fold_journal(out, supersede=remeasure)
        add_phase("store", time.perf_counter() - t)
        result.wall_s = time.perf_counter() - t_start
        result.nvml_warning = sampler.warning
        free_inputs()
    return result


def _default_group() -> int:
    from models.schemes import SCHEME_PARAMS

    return int(SCHEME_PARAMS["w4a16"]["group_size"])


class SweepAborted(RuntimeError):
    """The sweep cannot go on (a lost CUDA context, a kernel failing repeatedly); finished points are kept."""

    def __init__(self, message: str, context_lost: bool = False) -> None:
        super().__init__(message)
        self.context_lost = context_lost


def _device_ok(timer: Any) -> bool:
    """False when the device no longer answers (a sticky CUDA error such as an illegal address)."""
    try:
        timer.synchronize()
        return True
    except Exception:
        return False


class _NoBar:
    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __bool__(self) -> bool:
        return False


def _progress(enabled: bool, total: int) -> Any:
    if not enabled or total == 0:
        return _NoBar()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
