"""Several GPUs of one host: one worker process per GPU, pinned with CUDA_VISIBLE_DEVICES, each writing its own file.

`workbench profile --gpus all|0,2` builds one plan (the single-GPU `profiler.plan`) and hands each GPU either the
whole plan (per-GPU data, the default) or a share of it (`--split`, identical GPUs, for speed). Each worker measures
through `profiler.run_sweep` into its own file, `<out stem>.gpu-<uuid8>.parquet` beside `--out`, so no two processes
ever write one file, and every row carries the GPU's UUID and the host name (`host`, an extra column).

Resume: a worker's file and journal hold every point it finished (a killed worker loses at most the point in flight).
Re-running the same command skips them: per GPU in whole-plan mode (`run_sweep`'s own resume), and across the GPUs
in split mode, where the unfinished points (those in no sibling file) are dealt again round-robin in plan order, so
the partition is a deterministic function of the plan and of what is finished.

Workers start with `multiprocessing`'s spawn method (a fresh interpreter, CUDA_VISIBLE_DEVICES set before CuPy is
imported). What a worker runs is a `backend` object: `gpu_worker.CudaBackend` on a GPU, a fake in the CPU tests.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.errors import InputError
from workbench.measure.gpu_worker import TAG_PREFIX, Gpu, WorkerTask, gpu_tag
from workbench.measure.profiler import Point, point_key
from workbench.measure.timing import TimingConfig
from workbench.storage import store

STOP_GRACE_S = 20.0  # after Ctrl-C, how long a worker gets to fold its journal before it is terminated


# ---------------------------------------------------------------------------------------------------- GPUs
def list_gpus() -> list[Gpu]:
    """The host's GPUs through NVML (no CUDA context is created in the calling process)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:
        raise InputError(f"--gpus needs NVML (nvidia-ml-py and an NVIDIA driver) to list GPUs: {exc}") from None
    out = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        uuid, name = pynvml.nvmlDeviceGetUUID(h), pynvml.nvmlDeviceGetName(h)
        uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        name = name.decode() if isinstance(name, bytes) else str(name)
        try:
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            cc: int | None = int(major) * 10 + int(minor)
        except Exception:
            cc = None
        out.append(Gpu(i, uuid, name, cc))
    if not out:
        raise InputError("--gpus: NVML lists no GPU on this host")
    return out


def select_gpus(text: str, available: Sequence[Gpu]) -> list[Gpu]:
    """`all`, or comma-separated NVML indices and/or UUIDs (`0,2`, `GPU-1a2b...`), each once."""
    text = (text or "").strip()
    if text == "all":
        return list(available)
    by_index = {str(g.index): g for g in available}
    chosen: list[Gpu] = []
    for item in (t.strip() for t in text.split(",")):
        gpu = by_index.get(item) or next((g for g in available if item and g.uuid.startswith(item)), None)
        if gpu is None:
            have = ", ".join(f"{g.index} ({g.uuid})" for g in available)
            raise InputError(f"--gpus {text!r}: no GPU {item!r} on this host; give 'all' or indices/UUIDs of: {have}")
        if gpu in chosen:
            raise InputError(f"--gpus {text!r}: GPU {item!r} is named twice")
        chosen.append(gpu)
    return chosen


def worker_out(out: str | Path, uuid: str) -> Path:
    """The file one GPU writes: results.parquet -> results.gpu-1a2b3c4d.parquet."""
    out = Path(out)
    return out.with_name(f"{out.stem}.{gpu_tag(uuid)}{out.suffix}")


def sibling_outs(out: str | Path) -> list[Path]:
    """Every per-GPU file (or journal left without its file) of `out`, sorted."""
    out = Path(out)
    if not out.parent.is_dir():
        return []
    pattern = f"{out.stem}.{TAG_PREFIX}*"
    found = set()
    for p in out.parent.glob(pattern):
        name = p.name.removesuffix(".journal.jsonl").removesuffix(out.suffix)
        tag = name[len(out.stem) + 1:]
        if tag.startswith(TAG_PREFIX) and "." not in tag:
            found.add(out.with_name(f"{name}{out.suffix}"))
    return sorted(found)


def row_key(row: Any) -> tuple:
    """A stored row's point, whichever GPU measured it: profiler.point_key with the GPU left out."""
    return point_key("", *(getattr(row, c) if not isinstance(row, dict) else row[c] for c in store.POINT_KEY[1:]))


def finished_keys(files: Iterable[Path]) -> set[tuple]:
    """Points (row_key) finished in these files, journals folded first (no worker may be running)."""
    keys: set[tuple] = set()
    for f in files:
        frame = store.fold_journal(f)
        keys |= {row_key(r) for r in frame[list(store.POINT_KEY)].itertuples(index=False)}
    return keys


def group_of(p: Point, group_size: int | None) -> int:
    """The group size a sweep records for `p` (as profiler.run_sweep does: w4a16 only, else 0)."""
    from models.schemes import SCHEME_PARAMS

    return int(group_size or SCHEME_PARAMS["w4a16"]["group_size"]) if p.spec.scheme == "w4a16" else 0


def key_of(p: Point, mode: str, group_size: int | None = None) -> tuple:
    """A planned point's key, comparable with row_key."""
    return point_key("", p.spec.name, p.spec.scheme, p.shape.layer, p.M, p.shape.N, p.shape.K, mode,
                     group_of(p, group_size))


def split_points(points: Sequence[Point], n: int, done: set[tuple], mode: str,
                 group_size: int | None = None) -> list[list[Point]]:
    """The unfinished points dealt round-robin, in plan order, to `n` workers (deterministic; each point once)."""
    if n < 1:
        raise InputError("a split needs at least one GPU")
    todo = [p for p in points if key_of(p, mode, group_size) not in done]
    return [todo[i::n] for i in range(n)]


# ---------------------------------------------------------------------------------------------------- workers
@dataclass
class WorkerReport:
    gpu: Gpu
    out: Path
    planned: int
    exitcode: int | None = None
    measured: int = 0
    skipped_done: int = 0
    refused: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    wall_s: float = math.nan
    error: str = ""  # one line when the worker stopped early (bad input, lost context, killed)
    input_error: bool = False
    rows: int = 0  # rows of this GPU in its file after the run

    @property
    def ok(self) -> bool:
        return self.exitcode == 0 and not self.error


def _worker_main(task: WorkerTask, backend: Any, conn: Any) -> None:
    """Entry of a spawned worker: pin the GPU, run the backend, send a summary, exit 0 / 1 (failed) / 2 (bad input)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = task.gpu.uuid
    os.environ["WORKBENCH_WORKER_GPU"] = task.gpu.uuid
    tag = task.gpu.tag

    def log(message: str) -> None:
        print(f"[{tag}] {message}", flush=True)

    code, summary = 0, {}
    try:
        summary = backend.sweep(task, log)
    except KeyboardInterrupt:
        code, summary = 130, {"error": "interrupted"}
    except InputError as exc:
        code, summary = 2, {"error": str(exc).splitlines()[0], "input_error": True}
    except Exception as exc:  # the parent reports it; the points finished so far are in the worker's file
        code, summary = 1, {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    try:
        conn.send(summary)
        conn.close()
    except (OSError, ValueError):
        pass
    os._exit(code)  # skip CuPy's destructors (a lost context prints a screen of errors)


def run_workers(tasks: Sequence[WorkerTask], backend: Any, log: Callable[[str], None] = print) -> list[WorkerReport]:
    """Start one process per task, wait for all; Ctrl-C asks each to stop (its finished points are kept)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    procs = []
    for task in tasks:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker_main, args=(task, backend, send), name=f"workbench-{task.gpu.tag}")
        proc.start()
        send.close()
        procs.append((task, proc, recv))
    try:
        for _, proc, _ in procs:
            proc.join()
    except KeyboardInterrupt:
        log("interrupted: asking every worker to stop; their finished points are kept")
        _stop(procs)
        raise
    finally:
        reports = [_report(task, proc, recv) for task, proc, recv in procs]
    return reports


def _stop(procs: list) -> None:
    """Ctrl-C in a terminal reaches the workers too: give them a moment, then interrupt the ones still running."""
    first = time.monotonic() + 2.0
    for _, proc, _ in procs:
        proc.join(max(0.0, first - time.monotonic()))
    for _, proc, _ in procs:
        if proc.is_alive() and proc.pid:
            try:
                os.kill(proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + STOP_GRACE_S
    for _, proc, _ in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.terminate()
            proc.join(5)


def _report(task: WorkerTask, proc: Any, recv: Any) -> WorkerReport:
    rep = WorkerReport(task.gpu, task.out, len(task.points), exitcode=proc.exitcode)
    summary: dict[str, Any] = {}
    try:
        if recv.poll():
            summary = recv.recv()
    except (EOFError, OSError):
        summary = {}
    for k in ("measured", "skipped_done", "refused", "failed", "wall_s", "error", "input_error"):
        if k in summary:
            setattr(rep, k, summary[k])
    if proc.exitcode not in (0, None) and not rep.error:
        rep.error = f"worker exited with code {proc.exitcode} (killed?); its finished points are kept in {task.out}"
    if task.out.exists() or store.journal_path(task.out).exists():
        if not proc.is_alive():
            rep.rows = len(store.fold_journal(task.out))
    return rep


# ---------------------------------------------------------------------------------------------------- the command
@dataclass
class MultiResult:
    reports: list[WorkerReport]
    split: bool
    wall_s: float
    planned: int  # points of the plan (per GPU in whole-plan mode, in all in split mode)
    already_done: int = 0  # split mode: points finished by an earlier run


def profile_gpus(
    points_for: Callable[[Gpu], list[Point]],
    *,
    gpus: Sequence[Gpu],
    split: bool,
    out_for: Callable[[Gpu], Path],
    cfg: TimingConfig,
    backend: Any,
    calibration_dir: Path | None,
    calibrate: bool = True,
    fresh: bool = False,
    group_size: int | None = None,
    log: Callable[[str], None] = print,
) -> MultiResult:
    """Measure on every GPU in `gpus` at once: the whole plan each, or (`split`) one share of it each."""
    if not gpus:
        raise InputError("--gpus selected no GPU")
    mode = "hot" if cfg.hot else "cold"
    t0 = time.perf_counter()
    if split:
        kinds = sorted({(g.name, g.cc) for g in gpus}, key=str)
        if len(kinds) > 1:
            names = ", ".join(f"{g.index}: {g.name}" for g in gpus)
            raise InputError(f"--split shares one plan between identical GPUs; these differ ({names}); "
                             "leave out --split for per-GPU data, or pick GPUs of one kind with --gpus")
        out = out_for(gpus[0])
        if fresh:
            for f in sibling_outs(out):
                f.unlink(missing_ok=True)
                store.journal_path(f).unlink(missing_ok=True)
        points = points_for(gpus[0])
        done = finished_keys(sibling_outs(out))
        shares = split_points(points, len(gpus), done, mode, group_size)
        already = sum(1 for p in points if key_of(p, mode, group_size) in done)
        tasks = [WorkerTask(g, share, worker_out(out, g.uuid), cfg, calibration_dir, calibrate, False, group_size)
                 for g, share in zip(gpus, shares, strict=True)]
        planned = len(points)
    else:
        tasks = [WorkerTask(g, points_for(g), worker_out(out_for(g), g.uuid), cfg, calibration_dir, calibrate, fresh,
                            group_size) for g in gpus]
        planned, already = max(len(t.points) for t in tasks), 0
    for t in tasks:
        store.check_writable(t.out)
    reports = run_workers(tasks, backend, log)
    return MultiResult(reports, split, time.perf_counter() - t0, planned, already)
