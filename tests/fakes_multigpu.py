"""Fake GPUs for the several-GPU tests: a backend that measures through the real `run_sweep` with the NumPy runner.

A worker is told its GPU the way a real one is: CUDA_VISIBLE_DEVICES holds a UUID (`--gpus`) or an index Ray gave
it (`--ray`). `die_on`/`die_after` kill the worker process (os._exit, as a SIGKILL would) at the start of its
(die_after + 1)-th point; a marker file makes it die once only, so a resubmitted task can finish. `pause_on`/
`pause_after` make that worker write `marker` at the start of its (pause_after + 1)-th point and then wait there
(up to PAUSE_S) until a signal interrupts it: a test waits for the file, not for time, before it interrupts.
`slow_s` makes each point take that long.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernels.registry import KernelSpec
from tests.fakes_profiler import FAKE_SPEC, FakeNvmlDevice, FakeRunner, FakeTimer
from workbench.measure.environment import Environment
from workbench.measure.gpu_worker import Gpu, has_calibration, summary_of, with_host
from workbench.measure.nvml import NvmlSampler
from workbench.measure.profiler import Shape, plan, run_sweep
from workbench.storage import store
from workbench.storage.schema import SCHEMA_VERSION

PAUSE_S = 120.0  # how long a paused worker waits to be interrupted before it fails the test by finishing
FAKE_SPEC_B = replace(FAKE_SPEC, name="fake_fp32_b")
FAKE_W4 = replace(FAKE_SPEC, name="fake_w4", scheme="w4a16")  # a grouped scheme: rows record a group size
PLAN_SPECS = (FAKE_SPEC, FAKE_SPEC_B)
SPECS = {s.name: s for s in (*PLAN_SPECS, FAKE_W4)}
SHAPES = [Shape("", 32, 16), Shape("toy/layer", 64, 32)]
BATCHES = [1, 2, 4, 8, 16]


def fake_points() -> list:
    """2 kernels x 2 shapes x 5 batches = 20 points."""
    return plan(list(PLAN_SPECS), SHAPES, BATCHES, 90)


def fake_uuid(index: int) -> str:
    return f"GPU-{index:08x}-fake-4000-8000-000000000000"


def fake_gpus(n: int, name: str = "Fake GPU") -> list[Gpu]:
    return [Gpu(i, fake_uuid(i), name, 90) for i in range(n)]


class _Controlled(FakeRunner):
    """A FakeRunner that takes `slow_s` per point and, on the GPU `die_on`, kills its process."""

    def __init__(self, spec: KernelSpec, backend: FakeBackend, dying: bool, pausing: bool = False) -> None:
        super().__init__(spec)
        self.backend = backend
        self.dying = dying
        self.pausing = pausing

    def check(self, M: int, N: int, K: int) -> None:
        b = self.backend
        point = (self.spec.name, M, N, K)
        if point in b.started:  # check() runs more than once per point
            return
        b.started.add(point)
        time.sleep(b.slow_s)
        if self.dying and len(b.started) > b.die_after and not Path(b.marker).exists():
            Path(b.marker).write_text("died\n")
            os._exit(9)
        if self.pausing and len(b.started) > b.pause_after:
            Path(b.marker).write_text("paused\n")
            deadline = time.monotonic() + PAUSE_S
            while time.monotonic() < deadline:  # a SIGINT raises KeyboardInterrupt out of this sleep
                time.sleep(0.01)


class FakeBackend:
    """What `CudaBackend` does, on CPU: identify the pinned GPU, calibrate it once, run the single-GPU sweep."""

    def __init__(self, name: str = "Fake GPU", die_on: str | None = None, die_after: int = 0,
                 marker: str | Path = "", t_launch: float = 10e-6, slow_s: float = 0.0,
                 pause_on: str | None = None, pause_after: int = 0) -> None:
        self.name = name
        self.die_on = die_on
        self.die_after = die_after
        self.marker = str(marker)
        self.t_launch = t_launch
        self.slow_s = slow_s
        self.pause_on = pause_on
        self.pause_after = pause_after
        self.started: set[tuple] = set()

    def identify(self) -> Gpu:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        if visible.startswith("GPU-"):
            index = int(visible.removeprefix("GPU-").split("-")[0], 16)
            return Gpu(index, visible, self.name, 90)
        return Gpu(int(visible), fake_uuid(int(visible)), self.name, 90)

    def sweep(self, task: Any, log: Any) -> dict[str, Any]:
        gpu = self.identify()
        env = with_host(Environment(self.name, "", gpu.uuid, "9.0", 4, 1 << 16, 1 << 30, "0.0", "13.0", "14.2", "",
                                    "abc"), host=f"host-{gpu.index // 2}")
        if task.calibrate and task.calibration_dir is not None and not has_calibration(task.calibration_dir,
                                                                                       gpu.uuid):
            store.write_calibration(task.calibration_dir, {
                "schema_version": SCHEMA_VERSION, "gpu_name": self.name, "gpu_key": "", "gpu_uuid": gpu.uuid,
                "timestamp": datetime.now(UTC).isoformat(timespec="seconds"), "sm_clock_hz": 1.98e9,
                "ceilings": {}})
            log(f"calibrated {gpu.uuid}")
        dying = self.die_on == gpu.uuid

        def factory(name: str) -> FakeRunner:
            return _Controlled(SPECS[name], self, dying, self.pause_on == gpu.uuid)

        runners: dict[str, FakeRunner] = {}

        def cached(name: str, group_size: int | None = None) -> FakeRunner:
            return runners.setdefault(name, factory(name))

        timer = _AnyRunnerTimer(runners, self.t_launch)
        result = run_sweep(task.points, task.out, env, cfg=task.cfg, timer=timer, runner_factory=cached,
                           sampler=NvmlSampler(device=FakeNvmlDevice()), calibration_sm_clock_hz=1.98e9,
                           group_size=task.group_size, fresh=task.fresh, progress=False, log=log)
        return summary_of(result)


class _AnyRunnerTimer(FakeTimer):
    """FakeTimer counting the launches of whichever runner the sweep is timing."""

    def __init__(self, runners: dict[str, FakeRunner], t_launch: float) -> None:
        super().__init__(FakeRunner(), t_launch)
        self.runners = runners

    def _timed(self, fn) -> float:
        before = sum(r.launches for r in self.runners.values())
        fn()
        n = sum(r.launches for r in self.runners.values()) - before
        self.calls += 1
        return n * self.t_launch
