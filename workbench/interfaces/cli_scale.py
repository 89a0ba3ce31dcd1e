"""`workbench merge`, and the several-GPU branches of `workbench profile` (`--gpus`, `--split`, `--ray`).

The measuring lives in workbench.measure.multigpu (one host) and workbench.measure.cluster (Ray); the
merging in workbench.storage.merge.
This module validates the options, calls them and prints what happened.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from models.errors import InputError
from workbench.measure.timing import TimingConfig

RAY_DIR = "ray"  # --ray without --out: data/measurements/ray/sweep-<mode>.gpu-<uuid8>.parquet


def profile_many(specs: list, shapes: list, batches: list[int], cfg: TimingConfig, *, gpus: str | None, split: bool,
                 ray: str | None, out: Path | None, fresh: bool, calibration_dir: Path,
                 default_out: Callable[[Any, bool], Path], data_dir: Path, backend: Any = None,
                 available: list | None = None, ray_init: dict[str, Any] | None = None,
                 group_size: int | None = None) -> None:
    """`profile --gpus ...` / `profile --ray ...`: one worker (process or Ray task) per GPU."""
    from workbench.measure.gpu_worker import CudaBackend
    from workbench.measure.profiler import plan

    if gpus and ray:
        raise InputError("give --gpus (this host) or --ray (a cluster), not both")
    if split and not (gpus or ray):
        raise InputError("--split shares the plan between GPUs: give it with --gpus or --ray")
    backend = backend or CudaBackend(use_graph=cfg.use_graph)
    if ray:
        from workbench.measure.cluster import profile_ray

        mode = "hot" if cfg.hot else "cold"
        target = out or data_dir / "measurements" / RAY_DIR / f"sweep-{mode}.parquet"
        points = plan(specs, shapes, batches, None)
        print(f"Ray {ray}: {len(points)} points, {'split per GPU kind' if split else 'whole plan per GPU'} -> "
              f"{target.parent}/{target.stem}.gpu-*.parquet")
        result = profile_ray(points, address=ray, split=split, out=target, cfg=cfg, backend=backend,
                             calibration_dir=calibration_dir, fresh=fresh, init_kwargs=ray_init, group_size=group_size)
        _print_ray(result)
        if result.unfinished:
            raise typer.Exit(1)
        return
    from workbench.measure.multigpu import list_gpus, profile_gpus, select_gpus

    chosen = select_gpus(gpus, available if available is not None else list_gpus())

    def points_for(gpu: Any) -> list:
        points = plan(specs, shapes, batches, gpu.cc)
        if not points:
            raise InputError(f"no selected kernel supports batches {batches} on {gpu.name} (cc {gpu.cc})")
        return points

    print(f"{len(chosen)} GPUs ({', '.join(f'{g.index}: {g.name}' for g in chosen)}), "
          f"{'one plan shared (--split)' if split else 'the whole plan on each'}")
    result = profile_gpus(points_for, gpus=chosen, split=split, out_for=lambda g: out or default_out(g, cfg.hot),
                          cfg=cfg, backend=backend, calibration_dir=calibration_dir, fresh=fresh,
                          group_size=group_size)
    _print_local(result)
    bad = [r for r in result.reports if not r.ok]
    if bad and all(r.input_error for r in bad) and len(bad) == len(result.reports):
        raise InputError(bad[0].error)
    if bad:
        raise typer.Exit(1)


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:.2f}" if seconds and seconds > 0 and not math.isnan(seconds) else "—"


def _print_local(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(result.reports)} workers, {result.wall_s:.1f}s"
                  + (f", {result.already_done} points done by an earlier run" if result.already_done else ""))
    for col in ("GPU", "name", "planned", "measured", "skipped", "failed", "s", "points/s", "status"):
        table.add_column(col)
    for r in result.reports:
        table.add_row(str(r.gpu.index), r.gpu.name, str(r.planned), str(r.measured), str(r.skipped_done),
                      str(len(r.failed)), f"{r.wall_s:.1f}", _rate(r.measured, r.wall_s), "ok" if r.ok else "stopped")
    Console().print(table)
    for r in result.reports:
        print(f"GPU {r.gpu.index} {r.gpu.uuid}: {r.rows} rows in {r.out}" + ("" if r.ok else f"; {r.error}"))
    measured = sum(r.measured for r in result.reports)
    print(f"measured {measured} points in {result.wall_s:.1f}s ({_rate(measured, result.wall_s)} points/s in all)")
    for r in result.reports:
        for line in r.refused:
            print(f"skipped on {r.gpu.tag}: {line}")
    if any(not r.ok for r in result.reports):
        print("some workers stopped early; every finished point is kept: run the same command again to resume")


def _print_ray(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    kinds = ", ".join(f"{n} x {k or 'GPU'}" for k, n in sorted(result.kinds.items()))
    table = Table(title=f"Ray: {kinds}; {len(result.shares)} tasks, {result.wall_s:.1f}s")
    for col in ("task", "kind", "host", "GPU", "points", "received", "status"):
        table.add_column(col)
    for s in result.shares:
        status = "ok" if not s.error else ("lost: " if s.lost else "failed: ") + s.error
        table.add_row(str(s.sid), s.kind or "GPU", s.host, s.gpu.uuid if s.gpu else "—", str(len(s.points)),
                      str(len(s.received)), status)
    Console().print(table)
    n = sum(result.rows_by_uuid.values())
    print(f"received {n} points in {result.wall_s:.1f}s ({_rate(n, result.wall_s)} points/s)"
          + (f"; {result.resubmitted} shares resubmitted after a loss" if result.resubmitted else ""))
    for uuid, path in sorted(result.files.items()):
        print(f"{uuid}: {path}")
    for line in result.unfinished:
        print(f"not measured: {line}")


def merge(
    # str, not Path: typer turns '' into Path('.'), which would read (or make a data dir of) the working folder
    sources: Annotated[list[str], typer.Argument(help="measurement files (.parquet/.csv), folders or data dirs")],
    out: Annotated[str, typer.Option("--out", "-o", help="merged .parquet/.csv, or a folder made a data dir")],
) -> None:
    """Merge datasets from several machines: schema checked, one row per (GPU, point), provenance kept."""
    from rich.console import Console
    from rich.table import Table

    from workbench.interfaces.cli_args import writable_target
    from workbench.storage.merge import merge as run_merge

    if any(not s.strip() for s in sources):
        raise InputError("an input is empty; give measurement files (.parquet/.csv), folders or data dirs")
    if not out.strip():
        raise InputError("--out is empty; give a .parquet/.csv file or a folder (made a data dir)")
    result = run_merge([Path(s) for s in sources], writable_target(out, "--out"))
    for path, n in result.inputs:
        print(f"read {n} rows from {path}")
    table = Table(title=f"{len(result.frame)} rows ({result.duplicates} duplicate points dropped: newest kept)")
    for col in ("host", "gpu_uuid", "gpu_key", "gpu_name", "points", "runs", "commits"):
        table.add_column(col)
    for r in result.by_gpu().itertuples(index=False):
        table.add_row(r.host or "—", r.gpu_uuid, r.gpu_key or "—", r.gpu_name, str(r.points), str(r.runs), r.commits)
    Console().print(table)
    print(f"wrote {result.out}" + (f" and {len(result.calibrations)} calibration files" if result.calibrations else ""))


def register(app: typer.Typer) -> None:
    app.command("merge")(merge)
