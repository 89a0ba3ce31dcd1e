"""What `workbench profile` prints after a sweep (the points per kernel, where the wall time went) and where a sweep
writes by default; shared by the dense sweep (cli_profile) and the MoE sweep (cli_moe)."""

from __future__ import annotations

import re
from pathlib import Path

from models.paths import dataset_dir
from workbench.measure.environment import Environment
from workbench.measure.profiler import SweepResult


def default_out(env: Environment, hot: bool, root: Path | None = None) -> Path:
    """<data dir>/measurements/<gpu>/sweep-<mode>.parquet (root None: models.paths.dataset_dir())."""
    root = root if root is not None else dataset_dir()
    gpu = env.gpu_key or re.sub(r"[^a-z0-9]+", "-", env.gpu_name.lower()).strip("-") or "gpu"
    return root / "measurements" / gpu / f"sweep-{'hot' if hot else 'cold'}.parquet"


def format_phases(result: SweepResult) -> str:
    total = result.wall_s or 1.0
    parts = [f"{k} {v:.1f}s ({v / total:.0%})" for k, v in sorted(result.phases.items(), key=lambda kv: -kv[1])]
    return "; ".join(parts)


def phase_table(result: SweepResult) -> None:
    """Where the sweep's wall time went: compile, making inputs (make), checking, timing loops, ..."""
    from rich.console import Console
    from rich.table import Table

    total = result.wall_s or 1.0
    table = Table(title=f"{result.measured} points in {result.wall_s:.1f} s (process start and imports not included)")
    for col in ("phase", "seconds", "share of the sweep"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    for k, v in sorted(result.phases.items(), key=lambda kv: -kv[1]):
        table.add_row(k, f"{v:.1f}", f"{v / total:.0%}")
    rest = total - sum(result.phases.values())
    table.add_row("other (NVML, progress, Python)", f"{max(rest, 0.0):.1f}", f"{max(rest, 0.0) / total:.0%}")
    Console().print(table)


def summary(result: SweepResult, run_id: str) -> None:
    from rich.console import Console
    from rich.table import Table

    frame = result.frame[result.frame["run_id"] == run_id]
    table = Table(title=f"run {run_id}: {len(frame)} points")
    for col in ("kernel", "points", "median µs (M=1)", "GB/s (M=1)", "max spread", "max ref err", "throttled"):
        table.add_column(col)
    for kernel, g in frame.groupby("kernel", sort=True):
        one = g[g["M"] == g["M"].min()]
        t = one["time_median_s"].median()
        bw = (one["bytes"] / one["time_median_s"]).median()
        table.add_row(str(kernel), str(len(g)), f"{t * 1e6:.1f}", f"{bw / 1e9:.0f}", f"{g['spread_rel'].max():.2%}",
                      f"{g['ref_error_rel'].max():.1e}", str(int(g["throttled"].fillna(False).sum())))
    Console().print(table)


def report(result: SweepResult, out: Path) -> None:
    """What a finished sweep prints: resumed and skipped points, the per-kernel summary, where the time went."""
    if result.skipped_done:
        print(f"resumed: {result.skipped_done} points were already in {out}")
    for line in result.refused:
        print(f"skipped: {line}")
    summary(result, result.run_id)
    phase_table(result)
    print(f"measured {result.measured} points in {result.wall_s:.1f}s: {format_phases(result)}")
    if result.failed:
        print(f"{len(result.failed)} points failed (see above)")
