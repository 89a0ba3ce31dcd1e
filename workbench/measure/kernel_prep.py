"""What a sweep prepares before and while it measures: each kernel's runner, and its cubins compiled in background
processes so that measuring starts with the first kernel compiled (kernels.toolchain.build.CompilePool); the
libraries' warm-ups (workbench.measure.warm_up runs them with every runner's tiny problems); the device inputs the
kernels shared (kernels.problems.INPUTS) handed back at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

COMPILE_NICENESS = 10  # the background compiles' niceness: the measuring process keeps its cores
Points = list[Any]  # workbench.measure.profiler.Point: .spec (KernelSpec), .shape (.N, .K), .M, .setup


def runner_key(p: Any) -> Any:
    """Which runner measures point `p`: one per kernel, and per kernel and setup for points with a setup (MoE)."""
    setup = getattr(p, "setup", None)
    return p.spec.name if setup is None else (p.spec.name, setup)


def new_runner(p: Any, runner_factory: Callable[..., Any], group_size: int | None) -> Any:
    """A new runner for point `p` (its kernel, group size and setup): the sweep's own, or the warm-up's private one."""
    name, setup = p.spec.name, getattr(p, "setup", None)
    if setup is not None:
        return runner_factory(name, setup=setup)
    return runner_factory(name, group_size) if group_size else runner_factory(name)


def make_runners(points: Points, runners: dict[str, Any], runner_factory: Callable[..., Any],
                 group_size: int | None, unavailable: set[str], add_phase: Callable[[str, float], None]) -> list[str]:
    """Make each kernel's runner once (phase "runner setup"); returns one line per kernel that cannot run here."""
    t = time.perf_counter()
    notes: list[str] = []
    for p in points:
        name, key = p.spec.name, runner_key(p)
        if key in runners or name in unavailable:
            continue
        try:
            runners[key] = new_runner(p, runner_factory, group_size)
        except (ImportError, ModuleNotFoundError) as exc:
            unavailable.add(name)
            notes.append(f"{name}: cannot run here ({exc})")
    add_phase("runner setup", time.perf_counter() - t)
    return notes


def compile_jobs(points: Points, runners: dict[str, Any]) -> dict[str, list[Any]]:
    """Each kernel's kernels.toolchain.build jobs for `points`, in plan order, with the problem-making module every
    kernel's inputs need (a library kernel's only job); {} when no runner lists any (fakes, library kernels only).
    A point its runner refuses, or whose jobs cannot be listed here, compiles (or fails) on its own when it runs."""
    from kernels import problems
    from kernels.toolchain import build

    jobs: dict[str, list[Any]] = {}
    for p in points:
        runner = runners.get(runner_key(p))
        if runner is None:
            continue
        mine = jobs.setdefault(p.spec.name, [])
        if not hasattr(runner, "compile_jobs"):
            continue
        try:
            runner.check(p.M, p.shape.N, p.shape.K)
            mine.extend(runner.compile_jobs(p.M, p.shape.N, p.shape.K))
        except Exception:
            continue
    if not any(jobs.values()):
        return {}
    common = problems.compile_jobs(build.device_arch())
    return {name: common + js for name, js in jobs.items()}


def start_compiles(points: Points, runners: dict[str, Any]) -> Any:
    """Compile every kernel `points` need in background processes (kernels.toolchain.build.CompilePool: NVRTC into
    the cubin cache), kernel by kernel in plan order, at a lower priority and with two cores left to the measuring
    process (its own thread and NVML's sampler): the sweep measures a kernel as soon as its cubins are there while
    the others compile, and its host never waits behind a compile to enqueue the next timed replay."""
    jobs = compile_jobs(points, runners)
    if not jobs:
        return _NoCompiles()
    import os

    from kernels.toolchain import build

    return build.CompilePool(jobs, workers=max(1, (os.cpu_count() or 3) - 2), nice=COMPILE_NICENESS)


def library_warm_ups(runners: dict[str, Any]) -> dict[str, Callable[[], None]]:
    """What the first points would initialise anyway, by name: CuPy's kernels every problem's reference uses
    (kernels.problems.warm) and each kind of runner's libraries (its optional `warm()`: torch and cuBLAS for the
    peers). workbench.measure.warm_up runs them in its threads, beside every runner's tiny problems."""
    from kernels import problems

    steps: dict[str, Callable[[], None]] = {"problems": problems.warm}
    for runner in runners.values():
        kind = type(runner).__name__
        if hasattr(runner, "warm") and kind not in steps:
            steps[kind] = runner.warm
    return steps


class _NoCompiles:
    """A CompilePool with nothing to compile (fake runners, library kernels only, a warm cache)."""

    def __enter__(self) -> _NoCompiles:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def ready(self, name: str) -> bool:
        return True

    def wait_ready(self, names: list[str]) -> str:
        return names[0]

    def errors(self, name: str) -> list[str]:
        return []


def free_inputs() -> None:
    """Hand back the device inputs the sweep's kernels shared (kernels.problems.INPUTS)."""
    import sys

    problems = sys.modules.get("kernels.problems")  # never imported (fake runners): nothing was made
    if problems is not None:
        problems.INPUTS.clear()
