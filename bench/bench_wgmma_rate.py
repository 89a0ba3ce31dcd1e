"""Device microbenchmark of the wgmma issue rate at small N (run on an sm_90a GPU):

    PYTHONPATH=. python3 bench/bench_wgmma_rate.py [--iters 4096]

For wgmma m64nNk16 f16 (N = 16, 32, 64, 128), A from registers (RS, as kernels/wgmma/wg_gemm_w4a16.cu) or from shared
memory (SS, as kernels/wgmma/wg_gemm.cu), 1, 2 or 4 independent accumulator chains per warpgroup and 1, 2 or 4
warpgroups on each SM (one CTA per SM): cycles per wgmma per SM (the SM's throughput) and per warpgroup, and the
FLOP per SM cycle that gives (the H200's dense fp16 peak is 4096). Kernel: kernels/calib/wgmma_rate.cu, one launch of
132 CTAs per point, clock64 cycles of each CTA's first thread, median over CTAs. Writes $OUT/wgmma_rate.csv (the temp
directory without $OUT). The table in docs/kernels-wgmma.md (ninth pass) came from this kernel on the H200.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NS, CHAINS, WARPGROUPS = (16, 32, 64, 128), (1, 2, 4), (1, 2, 4)


def cases() -> list[tuple[int, int, int]]:
    """(N, RS, CH) instances: the accumulators (CH * N / 2 registers) must fit beside the rest under 255."""
    return [(n, rs, ch) for n, rs, ch in itertools.product(NS, (0, 1), CHAINS) if ch * n // 2 <= 128]


def expression(n: int, rs: int, ch: int) -> str:
    return f"wgmma_rate<{n}, {rs}, {ch}>"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=4096, help="groups of wgmmas per warpgroup (>= 64)")
    args = ap.parse_args(argv)
    if args.iters < 64:
        print(f"bench_wgmma_rate: --iters takes an integer >= 64, got {args.iters}", file=sys.stderr)
        return 2
    import cupy as cp
    import numpy as np

    from kernels.toolchain import build

    jobs = [("wgmma_rate.cu", expression(*c), "sm_90a", ()) for c in cases()]
    n, failed = build.prewarm(jobs)
    if failed:
        print("bench_wgmma_rate: compile failed: " + "; ".join(failed), file=sys.stderr)
        return 1
    sms = int(cp.cuda.Device().attributes["MultiProcessorCount"])
    out, cyc = cp.zeros(sms * 512, cp.float32), cp.zeros(sms, cp.int64)
    rows = []
    print("N   A    chains  warpgroups  cycles/wgmma/SM  cycles/wgmma/warpgroup  FLOP/cycle/SM")
    for (N, rs, ch), wg in itertools.product(cases(), WARPGROUPS):
        if wg == 4 and ch * N // 2 > 64:  # 512 threads: the launch bound caps the registers at 128
            continue
        f = build.arch_function("wgmma_rate.cu", expression(N, rs, ch), "sm_90a")
        for _ in range(2):  # the first launch warms the clocks and the instruction cache
            f((sms,), (128 * wg,), (out, cyc, np.int32(args.iters)))
        cp.cuda.Device().synchronize()
        c = float(cp.median(cyc.astype(cp.float64)))
        per_sm, per_wg = c / (args.iters * ch * wg), c / (args.iters * ch)
        row = {"N": N, "A": "RS" if rs else "SS", "chains": ch, "warpgroups": wg, "cycles_per_wgmma_sm": per_sm,
               "cycles_per_wgmma_wg": per_wg, "flop_per_cycle_sm": 64 * N * 16 * 2 / per_sm}
        rows.append(row)
        print(f"{N:<4}{row['A']:<5}{ch:>6}{wg:>12}{per_sm:>17.1f}{per_wg:>24.1f}{row['flop_per_cycle_sm']:>15.0f}")
    path = Path(os.environ.get("OUT") or tempfile.gettempdir()) / "wgmma_rate.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"rows: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
