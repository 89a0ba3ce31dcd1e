"""Points per second against workers, with fake GPUs whose every point takes a fixed time (no GPU needed).

Usage, in the repo root:  python3 scripts/multigpu_scaling_fake.py [--per-point 0.1] [--workers 1 2 4] [--ray]
Each point sleeps `--per-point` seconds in the fake runner (a GPU-bound point leaves the host CPU idle the same way),
so the numbers show what the orchestration adds: spawning a worker per GPU, the split, the per-point journal, and
(with --ray) a local Ray head and the streaming of rows to the driver. They say nothing about a GPU's own speed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes_multigpu import FakeBackend, fake_gpus, fake_points  # noqa: E402
from workbench.measure.multigpu import profile_gpus  # noqa: E402
from workbench.measure.timing import TimingConfig  # noqa: E402

CFG = TimingConfig(budget_s=0.005, sample_s=1e-4)


def local(n: int, per_point: float, root: Path) -> tuple[float, int]:
    out = root / f"local{n}" / "sweep.parquet"
    t0 = time.perf_counter()
    res = profile_gpus(lambda g: fake_points(), gpus=fake_gpus(n), split=True, out_for=lambda g: out, cfg=CFG,
                       backend=FakeBackend(slow_s=per_point), calibration_dir=root / f"cal{n}", log=lambda m: None)
    return time.perf_counter() - t0, sum(r.measured for r in res.reports)


def ray(n: int, per_point: float, root: Path) -> tuple[float, int]:
    import ray as rt

    from workbench.measure.cluster import profile_ray

    rt.init(num_cpus=n, num_gpus=n, include_dashboard=False, log_to_driver=False)
    try:
        t0 = time.perf_counter()
        res = profile_ray(fake_points(), address="local", split=True, out=root / f"ray{n}" / "sweep.parquet",
                          cfg=CFG, backend=FakeBackend(slow_s=per_point), calibration_dir=root / f"rcal{n}",
                          log=lambda m: None)
        return time.perf_counter() - t0, sum(res.rows_by_uuid.values())
    finally:
        rt.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-point", type=float, default=0.1)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--ray", action="store_true", help="also through a local Ray head (needs the [cluster] extra)")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mgpu-scaling-"))
    n_points = len(fake_points())
    print(f"{n_points} points, {a.per_point:.3f} s each: ideal {n_points * a.per_point:.1f} s on one worker")
    print(f"{'path':<6} {'workers':>7} {'wall s':>8} {'points':>6} {'points/s':>9} {'vs ideal':>9}")
    for path, fn in (("local", local), ("ray", ray)) if a.ray else (("local", local),):
        for n in a.workers:
            wall, measured = fn(n, a.per_point, root)
            ideal = n_points * a.per_point / n
            print(f"{path:<6} {n:>7} {wall:>8.2f} {measured:>6} {measured / wall:>9.2f} {ideal / wall:>9.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
