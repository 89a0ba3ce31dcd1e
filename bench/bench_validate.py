"""Time `workbench validate` on the shipped data (must-hold: under 5 s on the 2-core CPU machine).

Runs the real command in a fresh interpreter (imports included) a few times and reports the median wall time, then
the in-process phases (load + compare, evaluate, HTML report). Usage: python bench/bench_validate.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 5.0


def wall(cmd: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
    return elapsed, proc.returncode


def phases() -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    from models.paths import checkout_data_dir
    from workbench.analysis.hypotheses import default_files, evaluate_all, load_hypotheses
    from workbench.interfaces.cli_compare import load_comparison

    DATA_DIR = checkout_data_dir()

    out = {}
    t = time.perf_counter()
    comparison, _ = load_comparison(DATA_DIR)
    out["load + compare_points"] = time.perf_counter() - t
    t = time.perf_counter()
    hyps = load_hypotheses(default_files(DATA_DIR))
    results = evaluate_all(hyps, comparison)
    out["evaluate (both sources)"] = time.perf_counter() - t
    t = time.perf_counter()
    from workbench.analysis.report import render_report

    render_report(results, comparison, hyps)
    out["render HTML report"] = time.perf_counter() - t
    out["points"] = float(len(comparison))
    out["verdicts"] = float(len(results))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cmd = [sys.executable, "-m", "workbench", "validate"]
    times = []
    for _ in range(args.repeat):
        elapsed, rc = wall(cmd)
        times.append(elapsed)
    median = statistics.median(times)
    print(f"workbench validate (exit {rc}): median {median:.2f} s over {len(times)} runs "
          f"[{', '.join(f'{t:.2f}' for t in times)}]; limit {LIMIT_S:.0f} s")
    for name, value in phases().items():
        print(f"  {name}: {value:.0f}" if name in ("points", "verdicts") else f"  {name}: {value:.3f} s")
    return 0 if median < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
