"""The first sweep's warm-up and the device-side check on a real GPU: for every registered kernel the errors computed
on the device (runner.device_output against the device reference, cuBLAS) equal the host path's; a fresh-cache
sweep's warm-up compiles none of our kernels in its threads, each cubin is compiled once, and the points measured
after it compile (almost) none of CuPy's own kernels. CPU side: tests/test_warm_up.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernels import registry
from models.errors import InputError
from workbench.measure import warm_up
from workbench.measure.output_check import check_output, host_errors, is_device_array, poison

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]


def _cases(cp):
    """(spec, runner, M, N, K) of every registered kernel this GPU runs, at its smallest batch and at 16 (or its
    largest below), on its tiny shape; compiled beforehand in parallel processes."""
    from kernels.toolchain import build

    cc = int(cp.cuda.Device().compute_capability)
    cases, jobs = [], []
    for spec in registry.specs():
        Ms = sorted({spec.m_min, min(16, spec.m_max)})
        if not spec.supports(Ms[0], cc):
            continue
        try:
            runner = registry.runner(spec.name)
        except (ImportError, InputError):
            continue
        task = warm_up.WarmTask(spec.name, None, tuple(Ms), 4096, 4096)
        shape = warm_up.tiny_shape(runner, task)
        if shape is None:
            continue
        for M in Ms:
            cases.append((spec, runner, M, *shape))
            if hasattr(runner, "compile_jobs"):
                jobs += runner.compile_jobs(M, *shape)
    from kernels import problems

    build.prewarm(jobs + problems.compile_jobs(build.device_arch()))
    return cases


@pytest.fixture(scope="module")
def cases(cp):
    return _cases(cp)


def test_device_errors_equal_host_errors_for_every_kernel(cp, cases):
    """The same numbers on both paths (norms to 1e-12, maxima exactly), on the device wherever the runner allows."""
    bad, host_only = [], []
    for spec, runner, M, N, K in cases:
        p = runner.make(M, N, K, seed=0, reference=True)
        poison(p.out)
        runner.launch(p)
        cp.cuda.Device().synchronize()
        err, maxabs = check_output(runner, p)
        h_err, h_maxabs = host_errors(runner.output(p), p.ref)
        if not (is_device_array(p.ref) and hasattr(runner, "device_output")):
            host_only.append(spec.name)
        same = abs(err - h_err) <= 1e-12 * max(h_err, 1e-300) and abs(maxabs - h_maxabs) <= 1e-12 * h_maxabs
        if not (same and 0 <= h_err < 0.1):
            bad.append(f"{spec.name} M={M} {N}x{K}: device {err:.6e}/{maxabs:.6e}, host {h_err:.6e}/{h_maxabs:.6e}")
    assert len(cases) >= 20, [c[0].name for c in cases]
    assert not bad, bad
    assert not host_only, f"checked on the host only: {sorted(set(host_only))}"


def test_device_check_flags_an_unwritten_output(cp, cases):
    spec, runner, M, N, K = next(c for c in cases if c[0].backend == "nvrtc")
    p = runner.make(M, N, K, seed=0, reference=True)
    poison(p.out)  # not launched: every element is the poison
    assert check_output(runner, p) == host_errors(runner.output(p), p.ref) == (float("inf"), float("inf"))


_SWEEP = r"""
import json, os, sys, threading
from kernels.toolchain import nvrtc
compiles = []
_compile = nvrtc.compile_cubin
def counting(*a, **k):
    compiles.append((threading.current_thread().name, a[1]))
    return _compile(*a, **k)
nvrtc.compile_cubin = counting
import cupy
from workbench.measure import profiler, warm_up
from workbench.measure.environment import detect
from workbench.measure.nvml import NvmlSampler
from workbench.measure.timing import CudaTimer, TimingConfig
cupy_dir = os.environ["CUPY_CACHE_DIR"]
listing = lambda: set(os.listdir(cupy_dir)) if os.path.isdir(cupy_dir) else set()
seen = {}
_run, _start = warm_up.run, profiler.start_compiles
def run(*a, **k):
    seen["before_warm"] = listing()
    notes = _run(*a, **k)
    seen["after_warm"], seen["notes"], seen["warm_compiles"] = listing(), notes, list(compiles)
    return notes
def start(points, runners):
    seen["pool"] = _start(points, runners)
    return seen["pool"]
warm_up.run, profiler.start_compiles = run, start
env = detect()
names = [n for n in sys.argv[1].split(",") if n in {s.name for s in profiler.select_kernels()}]
points = profiler.plan(profiler.select_kernels(kernels=names), [profiler.Shape("", 4096, 4096)], [1, 16, 128], env.cc)
res = profiler.run_sweep(points, sys.argv[2], env, cfg=TimingConfig(budget_s=0.02), timer=CudaTimer(),
                         sampler=NvmlSampler(uuid=env.gpu_uuid or None), progress=False)
pool = seen.get("pool")
print(json.dumps({
    "measured": res.measured, "failed": res.failed, "phases": res.phases, "notes": seen.get("notes", []),
    "warmed": "after_warm" in seen,
    "cupy_by_warm_up": len(seen.get("after_warm", set()) - seen.get("before_warm", set())),
    "cupy_after_warm_up": sorted(listing() - seen.get("after_warm", set())),
    "warm_thread_compiles": [c for c in seen.get("warm_compiles", []) if c[0].startswith("warm-up")],
    "in_process_compiles": compiles, "pool_compiled": getattr(pool, "compiled", 0),
    "cubins": len([f for f in os.listdir(os.environ["WORKBENCH_CUBIN_CACHE"]) if f.endswith((".cubin", ".ptx"))]),
    "errors": sorted(float(e) for e in res.frame["ref_error_rel"]),
}))
"""

KERNELS = ("fp16_gemv", "w4a16_gemv", "w8a8_tc_gemv", "fp8_tc_gemv", "tc_w4a16", "wg_bf16", "wg_w4a16",
           "wg_fp8_block", "cublas_fp16", "torch_int4_tinygemm")


def test_fresh_sweep_warm_up_compiles_nothing_twice(cp, tmp_path):
    """A sweep on empty CuPy and cubin caches (a fresh process): the warm-up runs, its threads compile none of our
    kernels, every cubin is compiled once (by the pool, or in process for one the plan could not list), and the
    points after the warm-up compile at most a few of CuPy's kernels; every point is measured and checked."""
    env = {**os.environ, "CUPY_CACHE_DIR": str(tmp_path / "cupy"), "WORKBENCH_CUBIN_CACHE": str(tmp_path / "cubin")}
    run = subprocess.run([sys.executable, "-c", _SWEEP, ",".join(KERNELS), str(tmp_path / "s.parquet")], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    r = json.loads(run.stdout.strip().splitlines()[-1])
    print(json.dumps({k: v for k, v in r.items() if k != "errors"}, indent=1))
    assert r["measured"] >= 15 and not r["failed"] and r["warmed"] and "warm-up" in r["phases"]
    assert r["warm_thread_compiles"] == []
    assert r["cubins"] == r["pool_compiled"] + len(r["in_process_compiles"])  # each cubin compiled once
    assert r["cupy_by_warm_up"] > 0 and len(r["cupy_after_warm_up"]) <= 3, r["cupy_after_warm_up"]
    assert all(0 <= e < 0.05 for e in r["errors"]), r["errors"]
