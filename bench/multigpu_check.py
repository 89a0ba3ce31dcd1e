"""On a GPU machine: do `profile --gpus all` and `profile --ray local` give the points a plain sweep gives?

Usage, in the repo root:  python3 bench/multigpu_check.py [--out DIR] [--kernel K]... [--batch M]... [--shape NxK]
Default plan: fp16_gemv and cublas_bf16 x batches 1, 4, 16 x 4096x4096 (6 points).

Runs, each into its own folder under DIR (default $OUT, else a temp folder):
  1. gpus   `profile --gpus all` (whole plan on every GPU; each GPU calibrated first into DIR/calibration)
  2. plain  `profile` (one process, CUDA device 0)
  3. plain2 the plain sweep again: the run-to-run noise
  4. ray    `profile --ray local` (a local Ray head; skipped, with the reason, when Ray does not import)
Then one row per (run, GPU, point): plain's median, the run's median over it, and whether that ratio is within the
noise band max(|plain2/plain - 1|, spread_rel of plain, spread_rel of the run), spread_rel being (p90 - p10) / median
within one run. Writes DIR/compare.csv and DIR/runs.csv (wall time and points/s per run); exits 1 when a run failed
or its points differ from plain's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.storage import store  # noqa: E402

KEY = ["kernel", "scheme", "M", "N", "K", "mode"]


def run(name: str, args: list[str], out_dir: Path, plan: list[str], cal: Path) -> dict:
    folder = out_dir / name
    cmd = [sys.executable, "-m", "workbench", "profile", *plan, "--no-progress", "--calibration-dir", str(cal),
           "--out", str(folder / "sweep.parquet"), *args]
    print(f"\n=== {name}: {' '.join(cmd[2:])}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, text=True, capture_output=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall = time.perf_counter() - t0
    print(proc.stdout[-6000:] + proc.stderr[-3000:], flush=True)
    rows = store.load_measurements(folder) if folder.is_dir() else store.empty_measurements()
    return {"run": name, "rc": proc.returncode, "wall_s": wall, "points": len(rows),
            "points_per_s": len(rows) / wall if wall else float("nan"), "gpus": rows["gpu_uuid"].nunique(),
            "rows": rows, "error": (proc.stderr.strip().splitlines() or [""])[-1] if proc.returncode else ""}


def compare(runs: dict[str, dict]) -> pd.DataFrame:
    plain = runs["plain"]["rows"].set_index(KEY)
    noise = (runs["plain2"]["rows"].set_index(KEY)["time_median_s"] / plain["time_median_s"] - 1).abs()
    parts = []
    for name in ("plain2", "gpus", "ray"):
        if name not in runs or runs[name]["rows"].empty:
            continue
        rows = runs[name]["rows"]
        joined = rows.join(plain[["time_median_s", "spread_rel"]], on=KEY, rsuffix="_plain")
        joined["noise_plain2"] = [noise.get(tuple(k), float("nan")) for k in joined[KEY].itertuples(index=False)]
        out = joined[["gpu_uuid", *KEY]].copy()
        out.insert(0, "run", name)
        out["plain_us"] = joined["time_median_s_plain"] * 1e6
        out["run_us"] = joined["time_median_s"] * 1e6
        out["ratio"] = joined["time_median_s"] / joined["time_median_s_plain"]
        out["band"] = pd.concat([joined["noise_plain2"], joined["spread_rel_plain"], joined["spread_rel"]],
                                axis=1).max(axis=1)
        out["within_noise"] = (out["ratio"] - 1).abs() <= out["band"]
        parts.append(out)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or tempfile.mkdtemp()))
    ap.add_argument("--kernel", action="append")
    ap.add_argument("--batch", action="append", type=int)
    ap.add_argument("--shape", default="4096x4096")
    a = ap.parse_args()
    plan = [x for k in (a.kernel or ["fp16_gemv", "cublas_bf16"]) for x in ("-k", k)]
    plan += [x for m in (a.batch or [1, 4, 16]) for x in ("-m", str(m))] + ["--shape", a.shape]
    cal = a.out / "calibration"
    runs = {name: run(name, args, a.out, plan, cal) for name, args in
            (("gpus", ["--gpus", "all"]), ("plain", []), ("plain2", []), ("ray", ["--ray", "local"]))}
    table = compare(runs)
    summary = pd.DataFrame([{k: v for k, v in r.items() if k != "rows"} for r in runs.values()])
    summary.to_csv(a.out / "runs.csv", index=False)
    print("\n=== runs\n" + summary.to_string(index=False))
    if not table.empty:
        table.to_csv(a.out / "compare.csv", index=False)
        shown = table.assign(gpu=table["gpu_uuid"].str[:12]).drop(columns=["gpu_uuid", "scheme", "N", "K", "mode"])
        print("\n=== per point (ratio = run / plain; band = the noise it is judged against)\n"
              + shown.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        for name, g in table.groupby("run", sort=False):
            print(f"{name}: {int(g['within_noise'].sum())}/{len(g)} points within noise, "
                  f"max |ratio - 1| = {(g['ratio'] - 1).abs().max():.2%}")
    plain_keys = set(runs["plain"]["rows"][KEY].itertuples(index=False, name=None))
    bad = False
    for name in ("gpus", "ray"):
        rows = runs[name]["rows"]
        for uuid, g in rows.groupby("gpu_uuid"):
            if set(g[KEY].itertuples(index=False, name=None)) != plain_keys:
                print(f"{name} on {uuid}: its points differ from the plain sweep's")
                bad = True
        if runs[name]["rc"] != 0:
            print(f"{name}: exit {runs[name]['rc']}: {runs[name]['error']}")
            bad = True
    print(f"\nfiles in {a.out}")
    return 1 if bad or runs["plain"]["rc"] != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
