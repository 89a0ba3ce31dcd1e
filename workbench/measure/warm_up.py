"""The first sweep's warm-up: every runner's preparation on tiny shapes, in a few threads, before the first point.

On a fresh machine (empty CuPy and cubin caches) a point's make and check pay more than its own work: CuPy compiles
its own kernels the first time it meets an operation (the weight packers' `xp` code, the conversions and copies,
the reference's difference and norms), and each of our cubins is loaded once. Those costs do not depend on the
shape, so the sweep pays them up front: while the background processes compile our kernels
(kernels.toolchain.build.CompilePool), WARM_THREADS threads each take a runner, make a private instance of it
(kernel_prep.new_runner: its own packed weights, template and compiled functions) and run what a point runs outside
the timing loop on a tiny shape (`tiny_shape`), at the point's smallest, second and largest batches: the checked set
with its reference, the NaN poison, the check (workbench.measure.output_check), a rotation set. NVRTC releases the
GIL, so CuPy's compiles overlap; the libraries' warm-ups (kernel_prep.library_warm_ups: problems.warm, torch and
cuBLAS for the peers) run beside them.

What is measured stays as it was:
- kernels.toolchain.build.cached_only(): a warm-up thread never compiles one of our kernels, nor waits for one: a
  cubin not in the cache yet is an inert stand-in (its launches do nothing, and the warm-up launches no kernel of
  ours anyway), kept in no cache; cubins already there are loaded as the sweep would load them.
- kernels.input_cache.scratch(): the tiny problems live in the thread's own caches (canonical and packed weights,
  templates, quantization errors), never in those the measured problems share; each task runs on its own CUDA
  stream and synchronises it before it ends.
- The sweep waits for the warm-up to end (`finish`, phase "warm-up") before it times its first point: no warm-up
  thread runs Python or launches work while a point is timed. After WARM_BUDGET_S the tasks not started are
  dropped (the points then initialise what is left, as before).
Without CuPy the warm-up is skipped (`start` returns None); a task that fails is one line of notes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from models.errors import InputError
from workbench.measure.kernel_prep import library_warm_ups, new_runner, runner_key
from workbench.measure.output_check import check_output, poison

WARM_THREADS = 4
WARM_BUDGET_S = 30.0  # the longest the sweep waits for warm-up tasks to start; those not started by then are dropped
WARM_SEED = 7919  # the tiny problems' seed (their caches are private anyway)
# (N, K) tried in order, smallest first: the first every planned batch of the runner accepts
TINY_SHAPES: tuple[tuple[int, int], ...] = ((256, 512), (512, 1024), (1024, 1024), (1024, 2048), (2048, 2048),
                                            (2048, 4096), (4096, 4096))


@dataclass(frozen=True)
class WarmTask:
    """One runner's warm-up: a point of it (its kernel, setup), the batches to make, the largest shape planned."""

    name: str
    point: Any
    batches: tuple[int, ...]
    N: int
    K: int


def plan_tasks(points: list[Any]) -> list[WarmTask]:
    """One task per runner of `points` (workbench.measure.profiler.Point), in plan order: the runner's smallest,
    second smallest and largest planned batch, and the largest N and K it is planned at (a tiny shape never
    exceeds them)."""
    by_key: dict[Any, list[Any]] = {}
    for p in points:
        by_key.setdefault(runner_key(p), []).append(p)
    tasks = []
    for mine in by_key.values():
        Ms = sorted({p.M for p in mine})
        batches = tuple(sorted({Ms[0], Ms[min(1, len(Ms) - 1)], Ms[-1]}))
        tasks.append(WarmTask(mine[0].spec.name, mine[0], batches, max(p.shape.N for p in mine),
                              max(p.shape.K for p in mine)))
    return tasks


def torch_last(tasks: list[WarmTask]) -> list[WarmTask]:
    """The tasks in plan order with torch's runners last: their threads would only wait on the torch import that a
    library step starts first (7.6 s on a freshly started machine), while our runners' tasks keep CuPy's compiles
    going."""
    return sorted(tasks, key=lambda t: getattr(t.point.spec, "backend", "") == "torch")


def tiny_shape(runner: Any, task: WarmTask) -> tuple[int, int] | None:
    """The first TINY_SHAPES entry within the planned N and K that the runner accepts at every batch of the task
    (its `check`); None when none is."""
    for n, k in TINY_SHAPES:
        if n > task.N or k > task.K:
            continue
        try:
            for M in task.batches:
                runner.check(M, n, k)
        except InputError:
            continue
        return n, k
    return None


def warm_runner(task: WarmTask, runner_factory: Callable[..., Any], group_size: int | None,
                device: int = 0) -> list[str]:
    """Run `task` in this thread on CUDA device `device` (see the module docstring); returns notes (a runner with no
    tiny shape)."""
    import cupy

    from kernels.input_cache import scratch
    from kernels.toolchain import build

    with cupy.cuda.Device(device):
        runner = new_runner(task.point, runner_factory, group_size)
        stream = cupy.cuda.Stream(non_blocking=True)
        return warm_instance(runner, task, stream, scratch, build.cached_only)


def warm_instance(runner: Any, task: WarmTask, stream: Any, scratch: Any, cached_only: Any) -> list[str]:
    """warm_runner's work on a given (private) runner inside `scratch()`, `cached_only()` and `stream` (the CPU tests
    pass NumPy runners and stand-ins)."""
    with scratch(), cached_only(), stream:
        shape = tiny_shape(runner, task)
        if shape is None:
            return [f"warm-up of {task.name}: no tiny shape it accepts (its first points initialise it)"]
        try:
            for M in task.batches:
                first = runner.make(M, *shape, seed=WARM_SEED, reference=True)
                poison(first.out)
                if getattr(runner.spec, "backend", "nvrtc") != "nvrtc":  # a library's kernel (cuBLAS, torch): its
                    runner.launch(first)  # handles and first-call set-up; never one of ours (a stand-in or not)
                check_output(runner, first)
                first.ref = None
                runner.make(M, *shape, seed=WARM_SEED + 1, reference=False)  # an L2-cold rotation set
                del first
        finally:
            stream.synchronize()
    return []


class WarmUp:
    """Warm-up tasks (callables returning notes) on `threads` threads from construction; `finish` waits for them."""

    def __init__(self, tasks: dict[str, Callable[[], list[str]]], threads: int = WARM_THREADS) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="warm-up")
        self._futures: dict[Future[list[str]], str] = {self._pool.submit(fn): name for name, fn in tasks.items()}
        self.started = time.perf_counter()

    def finish(self, budget_s: float = WARM_BUDGET_S) -> list[str]:
        """Wait for the tasks, at most until `budget_s` after the start for those not started yet (then dropped);
        the ones running are always waited for. One note per task that failed or was dropped, plus the tasks'
        own notes."""
        left = max(0.0, budget_s - (time.perf_counter() - self.started))
        wait(self._futures, timeout=left)
        dropped = [name for f, name in self._futures.items() if f.cancel()]
        self._pool.shutdown(wait=True)
        notes = [f"warm-up of {name} dropped after {budget_s:.0f} s (its first points initialise it)"
                 for name in dropped]
        for f, name in self._futures.items():
            if f.cancelled():
                continue
            exc = f.exception()
            if exc is not None:
                notes.append(f"warm-up of {name} failed: {type(exc).__name__}: {exc}".splitlines()[0])
            else:
                notes.extend(f.result() or [])
        return notes

    def cancel(self) -> None:
        """Drop the tasks not started; the running ones end on their own (the sweep is stopping)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def start(points: list[Any], runners: dict[Any, Any], runner_factory: Callable[..., Any], group_size: int | None,
          threads: int = WARM_THREADS) -> WarmUp | None:
    """Start the warm-up of `points`' runners (those the sweep could make: keys in `runners`) and of the
    libraries; None without CuPy or threads (nothing to warm)."""
    if threads < 1:
        return None
    try:
        import cupy
    except ImportError:
        return None
    device = int(cupy.cuda.Device().id)  # the sweep's device (a new thread starts on device 0)
    tasks: dict[str, Callable[[], list[str]]] = {}
    for kind, step in library_warm_ups(runners).items():
        tasks[kind] = _on_device(step, device)
    for task in torch_last(plan_tasks([p for p in points if runner_key(p) in runners])):
        label = task.name if getattr(task.point, "setup", None) is None else f"{task.name} {task.point.setup}"
        tasks[label] = (lambda t=task: warm_runner(t, runner_factory, group_size, device))
    return WarmUp(tasks, threads)


def run(points: list[Any], runners: dict[Any, Any], runner_factory: Callable[..., Any], group_size: int | None,
        threads: int = WARM_THREADS, budget_s: float = WARM_BUDGET_S) -> list[str]:
    """`start` then `finish`: the warm-up of a sweep, over before it returns (Ctrl-C drops the tasks not started)."""
    warming = start(points, runners, runner_factory, group_size, threads)
    if warming is None:
        return []
    try:
        return warming.finish(budget_s)
    except BaseException:
        warming.cancel()
        raise


def _on_device(step: Callable[[], None], device: int) -> Callable[[], list[str]]:
    def run() -> list[str]:
        import cupy

        with cupy.cuda.Device(device):
            step()
        return []

    return run
