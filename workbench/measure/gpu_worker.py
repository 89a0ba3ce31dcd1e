"""What one worker runs on the GPU it is given: the GPU's identity, its task, and `CudaBackend`, which calibrates
the GPU when it has no calibration of its own and measures the task's points through the single-GPU profiler.

Used by both several-GPU paths: a spawned process per GPU (workbench.measure.multigpu) and a Ray task per GPU
(workbench.measure.cluster). Rows carry the host name as the extra column `host` (provenance for `workbench merge`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.errors import InputError
from workbench.measure.environment import Environment
from workbench.measure.profiler import Point
from workbench.measure.timing import TimingConfig
from workbench.storage import store

TAG_PREFIX = "gpu-"


@dataclass(frozen=True)
class Gpu:
    index: int  # NVML index (the order nvidia-smi lists)
    uuid: str  # "GPU-..." as NVML and CUDA_VISIBLE_DEVICES spell it
    name: str  # "NVIDIA H200"
    cc: int | None = None  # compute capability as an integer (90), None when unknown

    @property
    def gpu_name(self) -> str:
        return self.name

    @property
    def gpu_key(self) -> str:
        from workbench.measure.environment import gpu_key_for

        return gpu_key_for(self.name)

    @property
    def tag(self) -> str:
        return gpu_tag(self.uuid)


@dataclass(frozen=True)
class HostEnvironment(Environment):
    """The recorded environment plus the host name (written as the extra column `host`: merge provenance)."""

    host: str = ""


def with_host(env: Environment, host: str | None = None) -> HostEnvironment:
    base = {k: v for k, v in env.columns().items() if k != "host"}
    return HostEnvironment(**base, host=host if host is not None else socket.gethostname())


def gpu_tag(uuid: str) -> str:
    """`gpu-1a2b3c4d` for `GPU-1a2b3c4d-...`: the file tag of one GPU."""
    core = str(uuid).removeprefix("GPU-").replace("-", "")
    if not core:
        raise InputError("a GPU without a UUID cannot get its own output file")
    return TAG_PREFIX + core[:8].lower()



@dataclass
class WorkerTask:
    gpu: Gpu
    points: list[Point]
    out: Path
    cfg: TimingConfig
    calibration_dir: Path | None = None
    calibrate: bool = True  # calibrate this GPU first when calibration_dir holds nothing for its UUID
    fresh: bool = False
    group_size: int | None = None  # profile --group-size (w4a16), None: the scheme's default


def summary_of(result: Any) -> dict[str, Any]:
    """What a worker sends back: the counts of a profiler.SweepResult."""
    return {"measured": result.measured, "skipped_done": result.skipped_done, "refused": list(result.refused),
            "failed": list(result.failed), "wall_s": result.wall_s}


def calibrations_by_uuid(calibration_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Every calibration in the folder by GPU UUID (store.load_calibrations keeps one per kind); newest wins."""
    out: dict[str, dict[str, Any]] = {}
    folder = Path(calibration_dir)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        doc = store.read_calibration(path)
        uuid = str(doc.get("gpu_uuid", ""))
        if uuid not in out or str(doc["timestamp"]) >= str(out[uuid]["timestamp"]):
            out[uuid] = doc
    return out


def has_calibration(calibration_dir: str | Path, uuid: str) -> bool:
    """Whether `calibration_dir` holds a calibration of this very GPU (by UUID, not by kind)."""
    return uuid in calibrations_by_uuid(calibration_dir)


def calibrate_apart(calibration_dir: str | Path, log: Callable[[str], None]) -> None:
    """Calibrate the GPU this process sees in a child process, before this one measures anything.

    Measured on the H200 (bench/multigpu_check.py): calibrating in the worker's own process made the points it measured
    next 1-3 % (our GEMV) to 6 % (cuBLAS bf16) slower than a plain sweep, while the same worker with the calibration
    already on disk matched the plain sweep within noise. The child inherits CUDA_VISIBLE_DEVICES (the GPU this
    worker is pinned to)."""
    cmd = [sys.executable, "-m", "workbench", "calibrate", "--out", str(calibration_dir)]
    proc = subprocess.run(cmd, text=True, capture_output=True, env=dict(os.environ))
    for line in proc.stdout.splitlines():
        log(line)
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"calibrating this GPU failed (exit {proc.returncode}): {last}")


class CudaBackend:
    """Runs one worker's points on the GPU it is pinned to, through the single-GPU profiler."""

    def __init__(self, use_graph: bool = True) -> None:
        self.use_graph = use_graph

    def identify(self) -> Gpu:
        """The GPU this process sees as device 0 (the one CUDA_VISIBLE_DEVICES or Ray gave it)."""
        from workbench.measure.environment import detect

        env = detect(0)
        return Gpu(-1, env.gpu_uuid, env.gpu_name, env.cc)

    def sweep(self, task: WorkerTask, log: Callable[[str], None]) -> dict[str, Any]:
        from workbench.measure.environment import detect, free_device_bytes, require_gpu
        from workbench.measure.nvml import NvmlSampler
        from workbench.measure.profiler import calibration_clock, check_memory, run_sweep, unsupported
        from workbench.measure.timing import CudaTimer

        require_gpu()
        env = with_host(detect(0))
        if task.gpu.uuid and env.gpu_uuid != task.gpu.uuid:
            raise InputError(f"worker pinned to {task.gpu.uuid} sees {env.gpu_uuid}; is CUDA_VISIBLE_DEVICES honoured?")
        if task.calibrate and task.calibration_dir is not None and not has_calibration(task.calibration_dir,
                                                                                         env.gpu_uuid):
            calibrate_apart(task.calibration_dir, log)
        points = [p for p in task.points if p.spec.supports(p.M, env.cc)]
        for line in unsupported({p.spec.name: p.spec for p in task.points}.values(), env.cc):
            log(f"skipped: {line}")
        check_memory(points, free_device_bytes(), env.l2_bytes, task.cfg)
        result = run_sweep(points, task.out, env, cfg=task.cfg, timer=CudaTimer(use_graph=self.use_graph),
                           sampler=NvmlSampler(uuid=env.gpu_uuid or None),
                           calibration_sm_clock_hz=calibration_clock(env, task.calibration_dir),
                           group_size=task.group_size, fresh=task.fresh, progress=False, log=log)
        return summary_of(result)
