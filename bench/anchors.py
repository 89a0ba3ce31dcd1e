"""The anchor benchmark of issue 14: every kernel beside its peers and beside the fastest read of its own bytes.

    PYTHONPATH=. python3 bench/anchors.py [--quick] [--shapes 22016x4096,...] [--batches 1,16,...]
                                          [--schemes w4a16,bf16,fp8,w8a8] [--kernels a,b,...] [--budget 0.12]

In one process on the device, for each shape and batch M:
(a) the read limit: the fastest L2-cold read of exactly the bytes each kernel reads (kernels.problems.bytes_read of
    its input arrays, rounded up to 16), by the plain 16-byte-load read kernel of kernels/calib/calib.cu timed as the
    calibration's read curve does (workbench.measure.microbench.read_curve: slices rotating over >= 3x the L2 in
    one CUDA graph), best over 1, 2, 4 and 8 CTAs per SM;
(b) every registered kernel of the chosen schemes that runs that M on this GPU (ours, the ladder rungs, the peers:
    cuBLAS bf16, torch tinygemm int4, `_scaled_mm` fp8, `_int_mm` int8), each float64-checked on its first input set
    and timed by the profiler's loop (workbench.measure.timing.measure: L2-cold rotation, CUDA-graph replays), through
    kernels.registry's runners;
(c) prints per shape and M each kernel's time and its multiple of its read limit, our best per family over its anchor
    (W4A16, W8A16 and BF16 over cuBLAS bf16, FP8 over `_scaled_mm`, W8A8 over `_int_mm`), and at the end the table
    of issue 14's and 34's targets, each met / missed with its margin; writes every row to $OUT/anchors.csv (the temp
    directory without $OUT). The ladder table (docs/kernels-ladder.md) is printed from the same rows.
Default run: 4 shapes x 9 batches, 628 points (on the H200 272 points took 24 s and 110 took 10 s after compiling);
--quick: M = 1, 16, 128 on 22016x4096 and 4096x11008.
The target arithmetic (`family_rows`, `targets`) is plain Python on the rows: tests/test_anchors_cpu.py checks it.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = ((22016, 4096), (4096, 11008), (4096, 4096), (28672, 8192))
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
QUICK_SHAPES = SHAPES[:2]
QUICK_BATCHES = (1, 16, 128)
SCHEMES = ("w4a16", "bf16", "fp8", "w8a8", "w8a16")
ANCHOR = {"w4a16": "cublas_bf16", "bf16": "cublas_bf16", "fp8": "torch_fp8_scaled_mm", "w8a8": "torch_int_mm",
          "w8a16": "cublas_bf16"}
CHECK_TOL = 2e-2  # rel error above this: the kernel's float64 check failed (it is then never "our best")
POOL_BYTES = 2 << 30  # the read kernel's buffer
COLUMNS = ("N", "K", "M", "kernel", "scheme", "role", "time_s", "p10_s", "p90_s", "timing", "rel_err", "check_ok",
           "bytes_read", "read_limit_s", "read_grid", "x_read_limit")


# ---------------------------------------------------------------------------------------------------- targets
def _need(op: str, need: float, value: float) -> tuple[bool, float]:
    """(met, margin): margin = need / value - 1 for '<=' targets, value / need - 1 for '>=' (>= 0: met)."""
    margin = need / value - 1 if op == "<=" else value / need - 1
    return margin >= 0, margin


def best_ours(rows: list[dict[str, Any]], scheme: str, N: int, K: int, M: int) -> dict[str, Any] | None:
    """The fastest of our kernels (role != peer, including ladder rungs) of a scheme at a point whose check passed."""
    pool = [r for r in rows if r["scheme"] == scheme and r["role"] != "peer" and r["check_ok"]
            and (r["N"], r["K"], r["M"]) == (N, K, M)]
    return min(pool, key=lambda r: r["time_s"]) if pool else None


def family_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (shape, M, scheme): our best kernel, its time and multiple of its read limit, the anchor's time and the
    speedup anchor time / ours (> 1: ours faster). Missing sides give NaN."""
    out = []
    points = sorted({(r["N"], r["K"], r["M"]) for r in rows})
    for N, K, M in points:
        for scheme in SCHEMES:
            best = best_ours(rows, scheme, N, K, M)
            anchor = next((r for r in rows if r["kernel"] == ANCHOR[scheme] and (r["N"], r["K"], r["M"]) == (N, K, M)
                           and r["check_ok"]), None)
            if best is None and anchor is None:
                continue
            t = best["time_s"] if best else math.nan
            ta = anchor["time_s"] if anchor else math.nan
            out.append({"N": N, "K": K, "M": M, "scheme": scheme, "kernel": best["kernel"] if best else "",
                        "time_s": t, "x_read_limit": best["x_read_limit"] if best else math.nan,
                        "anchor": ANCHOR[scheme], "anchor_time_s": ta, "speedup": ta / t})
    return out


# (target, scheme, batches it applies to, quantity, op, need); quantity "x_read_limit" or "speedup" over the anchor
TARGETS = (
    ("W4A16 M=1 <= 1.10x read limit", "w4a16", (1,), "x_read_limit", "<=", 1.10),
    ("W4A16 M=2-16 >= 2.8x cuBLAS bf16", "w4a16", (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16), "speedup",
     ">=", 2.8),
    ("W4A16 M=32 >= 2.5x cuBLAS bf16", "w4a16", (32,), "speedup", ">=", 2.5),
    ("W4A16 M=64 >= 1.8x cuBLAS bf16", "w4a16", (64,), "speedup", ">=", 1.8),
    ("W4A16 M=128 >= 1.2x cuBLAS bf16", "w4a16", (128,), "speedup", ">=", 1.2),
    ("W4A16 M=256 >= 0.95x cuBLAS bf16", "w4a16", (256,), "speedup", ">=", 0.95),  # issue 34: never below
    ("FP8 M=16-256 >= 0.95x _scaled_mm", "fp8", tuple(range(16, 257)), "speedup", ">=", 0.95),
    ("W8A8 >= 1.0x _int_mm", "w8a8", tuple(range(1, 257)), "speedup", ">=", 1.0),
    ("BF16 M=1-16 <= cuBLAS time", "bf16", tuple(range(1, 17)), "speedup", ">=", 1.0),
    ("BF16 M=128,256 >= 0.92x cuBLAS", "bf16", (128, 256), "speedup", ">=", 0.92),
    ("BF16 M=64-256 >= 0.95x cuBLAS", "bf16", tuple(range(64, 257)), "speedup", ">=", 0.95),  # issue 34
    ("W8A16 M=1-16 >= 1.8x cuBLAS bf16", "w8a16", tuple(range(1, 17)), "speedup", ">=", 1.8),  # issue 34
    ("W8A16 M=32 >= 1.5x cuBLAS bf16", "w8a16", (32,), "speedup", ">=", 1.5),
    ("W8A16 M=64 >= 1.1x cuBLAS bf16", "w8a16", (64,), "speedup", ">=", 1.1),
    ("W8A16 M=128,256 >= 0.95x cuBLAS bf16", "w8a16", (128, 256), "speedup", ">=", 0.95),
)


def targets(rows: list[dict[str, Any]], schemes: tuple[str, ...] = SCHEMES) -> list[dict[str, Any]]:
    """One line per (target of one of `schemes`, shape, M) measured: value, need, met (None: a side is missing),
    margin; and one line for the float64 checks of every kernel run."""
    fam = family_rows(rows)
    out = []
    for name, scheme, batches, qty, op, need in TARGETS:
        if scheme not in schemes:
            continue
        for f in fam:
            if f["scheme"] != scheme or f["M"] not in batches:
                continue
            v = f[qty]
            met, margin = _need(op, need, v) if math.isfinite(v) and v > 0 else (None, math.nan)
            out.append({"target": name, "N": f["N"], "K": f["K"], "M": f["M"], "kernel": f["kernel"], "value": v,
                        "op": op, "need": need, "met": met, "margin": margin})
    failed = [r for r in rows if not r["check_ok"]]
    out.append({"target": "every kernel passes its float64 check", "N": 0, "K": 0, "M": 0,
                "kernel": ",".join(sorted({r["kernel"] for r in failed})), "value": float(len(failed)), "op": "<=",
                "need": 0.0, "met": not failed, "margin": math.nan})
    return out


def format_targets(lines: list[dict[str, Any]]) -> list[str]:
    out = [f"{'target':<36} {'shape':>11} {'M':>4} {'kernel':<20} {'value':>7} {'need':>9} {'verdict':<8} margin"]
    for t in lines:
        shape = f"{t['N']}x{t['K']}" if t["N"] else "all"
        verdict = "n/a" if t["met"] is None else "met" if t["met"] else "MISSED"
        margin = f"{t['margin'] * 100:+.1f} %" if math.isfinite(t["margin"]) else ""
        out.append(f"{t['target']:<36} {shape:>11} {t['M']:>4} {t['kernel'] or '-':<20} {t['value']:>7.3f} "
                   f"{t['op']} {t['need']:<6.2f} {verdict:<8} {margin}")
    met = sum(t["met"] is True for t in lines)
    missed = sum(t["met"] is False for t in lines)
    out.append(f"targets: {met} met, {missed} missed, {sum(t['met'] is None for t in lines)} not measured")
    return out


def ladder_table(rows: list[dict[str, Any]], batches: tuple[int, ...] = (1, 4, 16)) -> list[str]:
    """The ladder (models.ladder.RUNGS) per shape: each rung's time at M = 1, 4, 16 and its speedup over rung 0
    (a rung's time: the fastest of its kernels whose check passed). The table docs/kernels-ladder.md holds."""
    from models.ladder import RUNGS

    out = []
    for N, K in sorted({(r["N"], r["K"]) for r in rows}, reverse=True):
        out.append(f"| {N}×{K} | " + " | ".join(f"M={m}" for m in batches) + " |")
        out.append("|---|" + "---|" * len(batches))
        base: dict[int, float] = {}
        for rung in RUNGS:
            cells = []
            for m in batches:
                ts = [r["time_s"] for r in rows if r["kernel"] in rung.kernels and (r["N"], r["K"], r["M"]) == (N, K, m)
                      and r["check_ok"]]
                if not ts or m < rung.m_from:
                    cells.append("—")
                    continue
                t = min(ts)
                if rung.index == 0:
                    base[m] = t
                cells.append(f"{t * 1e6:.1f} µs ({base[m] / t:.2f}×)" if m in base else f"{t * 1e6:.1f} µs")
            out.append(f"| {rung.index} {rung.trick} | " + " | ".join(cells) + " |")
        out.append("")
    return out


# ---------------------------------------------------------------------------------------------------- the device run
class _Recording:
    """A runner that remembers the bytes its first (checked) input set reads."""

    def __init__(self, runner: Any) -> None:
        self.runner, self.spec, self.nbytes = runner, runner.spec, 0

    def check(self, M: int, N: int, K: int) -> None:
        self.runner.check(M, N, K)

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Any:
        p = self.runner.make(M, N, K, seed=seed, reference=reference)
        if reference:
            self.nbytes = int(p.nbytes)
        return p

    def launch(self, problem: Any) -> None:
        self.runner.launch(problem)

    def output(self, problem: Any) -> Any:
        return self.runner.output(problem)


class ReadLimit:
    """The fastest L2-cold read of a byte count (cached per count), by workbench.measure.microbench.read_curve."""

    def __init__(self, l2: int, sms: int) -> None:
        import cupy as cp

        from kernels.toolchain import build

        self.cp, self.l2, self.sms = cp, l2, sms
        self.mod = build.module("calib.cu")
        self.pool = cp.full(POOL_BYTES // 4, 0x01020304, dtype=cp.uint32)
        self.sink = cp.zeros(4, dtype=cp.uint32)
        self.cache: dict[int, tuple[float, int]] = {}

    def __call__(self, nbytes: int) -> tuple[float, int]:
        from workbench.measure import microbench
        from workbench.measure.calibrate import _time  # the calibration's replay timer (median of back-to-back replays)
        from workbench.measure.timing import CudaTimer

        n = -(-nbytes // 16) * 16
        if n not in self.cache:
            timer = CudaTimer()
            with timer:
                points = microbench.read_curve(self.mod, self.sms, self.l2, self.pool, timer, self.sink, _time, (n,))
            best = min(points, key=lambda p: p.time_s) if points else None  # none: more bytes than the pool
            self.cache[n] = (best.time_s, best.ctas) if best else (math.nan, 0)
        return self.cache[n]


def plan(shapes: tuple[tuple[int, int], ...], batches: tuple[int, ...], schemes: tuple[str, ...],
         kernels: tuple[str, ...], cc: int) -> list[tuple[Any, int, int, int]]:
    from kernels import registry

    specs = [s for s in registry.specs() if s.scheme in schemes and (not kernels or s.name in kernels)]
    anchors = {ANCHOR[s] for s in schemes}
    specs += [registry.get(a) for a in sorted(anchors) if a not in {s.name for s in specs}]
    return [(s, N, K, M) for N, K in shapes for M in batches for s in specs if s.supports(M, cc)]


def prewarm(cases: list[tuple[Any, int, int, int]]) -> None:
    from kernels import registry
    from kernels.toolchain import build

    jobs = set()
    for spec, N, K, M in cases:
        if spec.backend == "nvrtc":
            runner = registry.runner(spec.name)
            if hasattr(runner, "compile_jobs"):
                try:
                    jobs.update(runner.compile_jobs(M, N, K))
                except Exception as exc:  # noqa: BLE001 - reported again (with the log) when the kernel runs
                    print(f"no compile job for {spec.name} M={M} {N}x{K}: {str(exc).splitlines()[0]}", flush=True)
    t0 = time.time()
    n, failed = build.prewarm(jobs)
    print(f"compiled {n} modules in {time.time() - t0:.1f} s" + (f"; failed: {failed}" if failed else ""), flush=True)


def run(cases: list[tuple[Any, int, int, int]], budget: float) -> list[dict[str, Any]]:
    import cupy as cp

    from kernels import registry
    from workbench.measure.environment import release_device_caches
    from workbench.measure.timing import CudaTimer, TimingConfig, measure

    dev = cp.cuda.Device()
    l2, sms = int(dev.attributes["L2CacheSize"]), int(dev.attributes["MultiProcessorCount"])
    limit = ReadLimit(l2, sms)
    cfg = TimingConfig(budget_s=budget)
    rows = []
    for spec, N, K, M in cases:
        runner = _Recording(registry.runner(spec.name))
        try:
            t = measure(runner, M, N, K, l2, CudaTimer(), cfg)
        except Exception as exc:  # noqa: BLE001 - a kernel that cannot run is reported, the run goes on
            print(f"FAILED {spec.name} M={M} {N}x{K}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                  flush=True)
            continue
        finally:
            release_device_caches()
        t_read, grid = limit(runner.nbytes)
        err = float(t.ref_error_rel)
        rows.append({"N": N, "K": K, "M": M, "kernel": spec.name, "scheme": spec.scheme, "role": spec.role,
                     "time_s": t.stats.median, "p10_s": t.stats.p10, "p90_s": t.stats.p90, "timing": t.method,
                     "rel_err": err, "check_ok": bool(math.isfinite(err) and err < CHECK_TOL),
                     "bytes_read": runner.nbytes, "read_limit_s": t_read, "read_grid": grid,
                     "x_read_limit": t.stats.median / t_read})
    return rows


def print_points(rows: list[dict[str, Any]]) -> None:
    fam = family_rows(rows)
    for N, K, M in sorted({(r["N"], r["K"], r["M"]) for r in rows}):
        here = sorted((r for r in rows if (r["N"], r["K"], r["M"]) == (N, K, M)),
                      key=lambda r: (SCHEMES.index(r["scheme"]) if r["scheme"] in SCHEMES else 9, r["time_s"]))
        print(f"\n== {N}x{K}, M = {M} (read limit of each kernel's own bytes) ==")
        print(f"  {'kernel':<22} {'scheme':<6} {'role':<9} {'time':>10} {'x read':>7} {'MB read':>8} {'rel err':>8}")
        for r in here:
            bad = "" if r["check_ok"] else "  CHECK FAILED"
            print(f"  {r['kernel']:<22} {r['scheme']:<6} {r['role']:<9} {r['time_s'] * 1e6:>7.2f} us "
                  f"{r['x_read_limit']:>6.2f}x {r['bytes_read'] / 1e6:>8.2f} {r['rel_err']:>8.1e}{bad}")
        for f in (f for f in fam if (f["N"], f["K"], f["M"]) == (N, K, M)):
            print(f"  best {f['scheme']:<6} {f['kernel'] or '-':<20} {f['time_s'] * 1e6:>7.2f} us = "
                  f"{f['speedup']:.2f}x {f['anchor']} ({f['anchor_time_s'] * 1e6:.2f} us), "
                  f"{f['x_read_limit']:.2f}x its read limit")


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="issue 14's anchor benchmark (run on the device)")
    ap.add_argument("--quick", action="store_true", help="M = 1, 16, 128 on 22016x4096 and 4096x11008")
    ap.add_argument("--shapes", default="", help="NxK,... (default: the four anchor shapes)")
    ap.add_argument("--batches", default="", help="M,... (default 1,2,4,...,256)")
    ap.add_argument("--schemes", default=",".join(SCHEMES), help=f"subset of {','.join(SCHEMES)}")
    ap.add_argument("--kernels", default="", help="only these kernels (their anchors are always run)")
    ap.add_argument("--budget", type=float, default=0.12, help="seconds of timing loop per point (profiler default)")
    return ap.parse_args(argv)


def _options(args: argparse.Namespace) -> tuple[tuple, tuple, tuple, tuple]:
    """(shapes, batches, schemes, kernels) from the options; ValueError with a one-line message."""
    from kernels import registry

    shapes, batches = (QUICK_SHAPES, QUICK_BATCHES) if args.quick else (SHAPES, BATCHES)
    try:
        if args.shapes:
            shapes = tuple(tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(","))
        if args.batches:
            batches = tuple(int(m) for m in args.batches.split(","))
    except ValueError:
        raise ValueError("--shapes takes NxK,... and --batches M,... as positive integers") from None
    if any(len(s) != 2 or min(s) < 1 for s in shapes) or any(not 1 <= m <= 256 for m in batches):
        raise ValueError("--shapes takes NxK,... (N, K >= 1) and --batches M,... with 1 <= M <= 256")
    schemes = tuple(s for s in args.schemes.split(",") if s)
    if not schemes or set(schemes) - set(SCHEMES):
        raise ValueError(f"--schemes takes a subset of {','.join(SCHEMES)}, got {args.schemes!r}")
    kernels = tuple(k for k in args.kernels.split(",") if k)
    known = {s.name for s in registry.specs()}
    if set(kernels) - known:
        raise ValueError(f"--kernels: unknown {','.join(sorted(set(kernels) - known))}; see kernels.registry")
    return shapes, batches, schemes, kernels


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    try:
        shapes, batches, schemes, kernels = _options(args)
    except ValueError as exc:
        print(f"anchors: {exc}", file=sys.stderr)
        return 2
    import cupy as cp

    cc = int(cp.cuda.Device().compute_capability)
    cases = plan(shapes, batches, schemes, kernels, cc)
    print(f"{len(cases)} points: shapes {shapes}, M {batches}, schemes {schemes}", flush=True)
    t0 = time.time()
    prewarm(cases)
    rows = run(cases, args.budget)
    print(f"\nmeasured {len(rows)} of {len(cases)} points in {time.time() - t0:.0f} s", flush=True)
    path = Path(os.environ.get("OUT") or tempfile.gettempdir()) / "anchors.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(COLUMNS))
        w.writeheader()
        w.writerows(rows)
    print_points(rows)
    print("\n== the W4A16 ladder (docs/kernels-ladder.md): time per rung, speedup over rung 0 ==")
    print("\n".join(ladder_table(rows)))
    print("== issue 14's and 34's targets ==")
    print("\n".join(format_targets(targets(rows, schemes))))
    print(f"rows: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
