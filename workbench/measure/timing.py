"""The measurement core: time one kernel at one shape, honestly.

Modelled on triton's `do_bench` and `cupyx.profiler.benchmark`: validate the arguments, then a small loop.
Per point: one correctness run on poisoned outputs against the float64 reference; warm-up; a CUDA graph of
back-to-back launches that rotate through input sets whose total is >= 3x the L2 (or one set, `hot`), replayed
between CUDA events until the relative spread (p90 - p10) / median <= 1% or the time budget ends (>= 10 samples);
and the launch-inclusive time of one single call. The statistics and the stopping rule are plain functions; the
device sits behind the `Timer` protocol (CudaTimer here, a fake in the CPU tests).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from models.errors import InputError
from workbench.measure.output_check import check_output, poison, relative_errors, to_host  # noqa: F401 (re-exported)


@dataclass(frozen=True)
class TimingConfig:
    hot: bool = False  # one input set (L2-warm where it fits) instead of rotating sets >= rotate_factor x L2
    rotate_factor: float = 3.0
    min_samples: int = 10
    max_samples: int = 400
    target_spread: float = 0.01  # stop when (p90 - p10) / median <= this
    budget_s: float = 0.12  # wall time for one point's timing loop, after warm-up
    sample_s: float = 1e-3  # target device time of one sample (one graph replay)
    max_launches: int = 2000  # per sample
    warmup_launches: int = 3  # eager launches per input set before the estimate
    batch: int = 10  # samples enqueued before each synchronisation
    single_calls: int = 5  # single-call timings (the median is kept)
    use_graph: bool = True

    def validate(self) -> TimingConfig:
        if self.rotate_factor < 1:
            raise InputError(f"rotate_factor must be >= 1, got {self.rotate_factor}")
        if self.min_samples < 3 or self.max_samples < self.min_samples:
            raise InputError(f"need 3 <= min_samples <= max_samples, got {self.min_samples}, {self.max_samples}")
        if not 0 < self.target_spread < 1:
            raise InputError(f"target_spread must be in (0, 1), got {self.target_spread}")
        if self.budget_s <= 0 or self.sample_s <= 0:
            raise InputError("budget_s and sample_s must be positive seconds")
        if self.max_launches < 1 or self.batch < 1 or self.single_calls < 1:
            raise InputError("max_launches, batch and single_calls must be >= 1")
        return self


# ---------------------------------------------------------------------------------------------------- statistics
@dataclass(frozen=True)
class Stats:
    n: int
    median: float
    p10: float
    p90: float
    min: float
    mean: float
    spread_rel: float  # (p90 - p10) / median


def summarize(samples: Any) -> Stats:
    """Median, p10, p90, min, mean and relative spread of per-launch times (seconds)."""
    x = np.asarray(samples, dtype=np.float64)
    if x.size == 0 or not np.isfinite(x).all() or (x <= 0).any():
        raise ValueError("timing samples must be a non-empty array of positive finite seconds")
    p10, med, p90 = np.percentile(x, [10, 50, 90])
    spread = float((p90 - p10) / med)
    return Stats(int(x.size), float(med), float(p10), float(p90), float(x.min()), float(x.mean()), spread)


def should_stop(samples: Any, elapsed_s: float, cfg: TimingConfig) -> bool:
    """The stopping rule: >= min_samples and (spread <= target or budget spent), or max_samples reached."""
    n = len(samples)
    if n >= cfg.max_samples:
        return True
    if n < cfg.min_samples:
        return False
    return elapsed_s >= cfg.budget_s or summarize(samples).spread_rel <= cfg.target_spread


def rotation_count(set_bytes: int, l2_bytes: int, cfg: TimingConfig) -> int:
    """How many input sets make the rotation's total >= rotate_factor x L2 (1 when hot)."""
    if cfg.hot:
        return 1
    if set_bytes <= 0:
        raise ValueError("an input set must report its device bytes")
    return max(1, math.ceil(cfg.rotate_factor * l2_bytes / set_bytes))


def launches_per_sample(t_launch_s: float, n_sets: int, cfg: TimingConfig) -> int:
    """Launches in one sample: about sample_s of device time, a whole number of rotations, within max_launches."""
    want = max(1, math.ceil(cfg.sample_s / max(t_launch_s, 1e-9)))
    rounds = max(1, math.ceil(want / n_sets))
    n = rounds * n_sets
    if n > cfg.max_launches:
        n = max(n_sets, (cfg.max_launches // n_sets) * n_sets)
    return n


# ---------------------------------------------------------------------------------------------------- the device
class Timer(Protocol):
    method: str  # "graph" or "events"

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Something that replays `fn`'s launches (a CUDA graph, or `fn` itself when capture fails)."""

    def elapsed(self, fn: Callable[[], None], repeats: int) -> np.ndarray:
        """Seconds of each of `repeats` back-to-back calls of `fn`, between consecutive events."""

    def single(self, fn: Callable[[], None]) -> float:
        """Seconds between two events around one call of `fn`, host dispatch included."""

    def synchronize(self) -> None: ...

    def __enter__(self) -> Timer:
        """Make the timer's stream current: every make/launch of the point goes to it."""

    def __exit__(self, *exc: object) -> None: ...


class CudaTimer:
    """CUDA events on a private non-blocking CuPy stream; graph capture where the launches allow it."""

    def __init__(self, use_graph: bool = True) -> None:
        import cupy

        self._cp = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.use_graph = use_graph
        self.method = "graph" if use_graph else "events"
        self.capture_error = ""

    def __enter__(self) -> CudaTimer:
        self._ctx = self.stream.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.__exit__(*exc)

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        if not self.use_graph:
            self.method = "events"
            return fn
        stream = self.stream
        try:
            with stream:
                stream.begin_capture()
                try:
                    fn()
                finally:
                    graph = stream.end_capture()
            self.method = "graph"
            return lambda: graph.launch(stream)
        except Exception as exc:  # a launch that cannot be captured (allocations, syncs): time it eagerly
            self.stream.synchronize()
            self.capture_error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            self.method = "events"
            return fn

    def elapsed(self, fn: Callable[[], None], repeats: int) -> np.ndarray:
        cp = self._cp
        events = [cp.cuda.Event() for _ in range(repeats + 1)]
        with self.stream:
            events[0].record(self.stream)
            for i in range(repeats):
                fn()
                events[i + 1].record(self.stream)
        events[-1].synchronize()
        return np.array([cp.cuda.get_elapsed_time(a, b) * 1e-3 for a, b in zip(events, events[1:], strict=False)])

    def single(self, fn: Callable[[], None]) -> float:
        cp = self._cp
        self.stream.synchronize()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        with self.stream:
            start.record(self.stream)
            fn()
            end.record(self.stream)
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) * 1e-3

    def synchronize(self) -> None:
        self._cp.cuda.Device().synchronize()


# ---------------------------------------------------------------------------------------------------- the loop
def time_loop(timer: Timer, launch_all: Callable[[], None], launches: int, cfg: TimingConfig,
              phases: dict[str, float] | None = None) -> list[float]:
    """The timing loop (the profiler's and the benchmarks'): capture `launch_all` (which enqueues `launches` launches)
    in a CUDA graph, replay it once to upload and warm it, then time batches of `cfg.batch` back-to-back replays
    between events until `should_stop`; returns seconds per launch of each replay. Phases "capture" and "loop" are
    added to `phases`. Call it inside `with timer:`."""
    phases = {} if phases is None else phases
    clock = time.perf_counter
    t = clock()
    replay = timer.capture(launch_all)
    replay()  # first replay uploads the graph and warms it
    timer.synchronize()
    phases["capture"] = phases.get("capture", 0.0) + clock() - t
    t = clock()
    samples: list[float] = []
    while True:
        chunk = timer.elapsed(replay, cfg.batch) / launches
        samples.extend(float(s) for s in chunk)
        if should_stop(samples, clock() - t, cfg):
            break
    phases["loop"] = phases.get("loop", 0.0) + clock() - t
    return samples


# ---------------------------------------------------------------------------------------------------- one point
@dataclass
class PointTiming:
    """Raw results of one point: per-launch samples (seconds) plus what was done to get them."""

    samples: np.ndarray
    stats: Stats
    time_single_call_s: float
    rotate_sets: int
    rotate_bytes: float
    launches_per_sample: int
    method: str
    ref_error_rel: float
    ref_maxabs_rel: float
    quant_error_rel: float
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds: make, check, warmup, capture, loop, single
    bytes: float = 0.0  # bytes one launch reads and writes (the runner's Problem.bytes; 0: not reported)


def measure(runner: Any, M: int, N: int, K: int, l2_bytes: int, timer: Timer, cfg: TimingConfig | None = None,
            seed: int = 0) -> PointTiming:
    """Check and time `runner`'s kernel at (M, N, K). `runner` follows kernels.registry.Runner."""
    cfg = (cfg or TimingConfig()).validate()
    if min(M, N, K) < 1:
        raise InputError(f"M, N, K must be >= 1, got {M}, {N}, {K}")
    runner.check(M, N, K)
    with timer:
        return _measure(runner, M, N, K, l2_bytes, timer, cfg, seed)


def _measure(runner: Any, M: int, N: int, K: int, l2_bytes: int, timer: Timer, cfg: TimingConfig,
             seed: int) -> PointTiming:
    phases: dict[str, float] = {}
    clock = time.perf_counter

    t = clock()
    first = runner.make(M, N, K, seed=seed, reference=True)
    phases["make"] = clock() - t

    t = clock()
    poison(first.out)
    runner.launch(first)
    timer.synchronize()
    err, maxabs = check_output(runner, first)  # on the device where the runner and the reference allow
    first.ref = None  # free the reference before the timing sets are made
    phases["check"] = clock() - t

    t = clock()
    n_sets = rotation_count(first.nbytes, l2_bytes, cfg)
    sets = [first] + [runner.make(M, N, K, seed=seed + 1 + i, reference=False) for i in range(n_sets - 1)]
    phases["make"] += clock() - t

    t = clock()
    for _ in range(cfg.warmup_launches):
        for p in sets:
            runner.launch(p)
    n_est = max(len(sets), 8)
    est = timer.elapsed(lambda: [runner.launch(sets[i % len(sets)]) for i in range(n_est)], 1)
    t_launch = float(est[0]) / n_est  # eager: an upper bound (host dispatch included)
    lps = launches_per_sample(t_launch, len(sets), cfg)
    phases["warmup"] = clock() - t

    samples = time_loop(timer, lambda: [runner.launch(sets[i % len(sets)]) for i in range(lps)], lps, cfg, phases)

    t = clock()
    singles = [timer.single(lambda: runner.launch(first)) for _ in range(cfg.single_calls)]
    phases["single"] = clock() - t

    arr = np.asarray(samples)
    return PointTiming(
        samples=arr,
        stats=summarize(arr),
        time_single_call_s=float(np.median(singles)),
        rotate_sets=len(sets),
        rotate_bytes=float(sum(p.nbytes for p in sets)),
        launches_per_sample=lps,
        method=timer.method,
        ref_error_rel=err,
        ref_maxabs_rel=maxabs,
        quant_error_rel=float(getattr(first, "quant_error_rel", math.nan)),
        phases=phases,
        bytes=float(getattr(first, "bytes", 0) or 0),
    )
