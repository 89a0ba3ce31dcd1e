"""Two `workbench profile` sweeps on one GPU and one output file, for real (marker `gpu`; skips without a GPU).

Asserts issue 16's target: the second sweep is refused (one line naming the holder) or waits with `--wait`; no point
is lost; no point measured while another process used the GPU, or whose spread stayed above the target, is stored
without a flag.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
# NVRTC GEMVs (compile in seconds, batches 1..16). The sweep must outlast the second process's start (~2-3 s of
# imports): on the H200 the profiler measures a GEMV point in ~0.05 s, and a 15-point plan ended before the second
# sweep reached its lock (2026-12-03), so the plan is 4 kernels x 5 shapes x 6 batches = 120 points (~6-10 s).
KERNELS = ("bf16_gemv", "fp16_gemv", "w8a16_gemv", "w4a16_gemv")
SWEEP = [*(a for k in KERNELS for a in ("--kernel", k)), "--shape", "4096x4096", "--shape", "4096x11008",
         "--shape", "11008x4096", "--shape", "12288x4096", "--shape", "22016x4096", "--batch", "1,2,3,4,8,16",
         "--budget", "0.5", "--no-progress"]
TARGET_SPREAD = 0.01  # workbench.measure.timing.TimingConfig.target_spread, the limit the spread flag uses
BUSY = """
import sys, time, cupy
a = cupy.random.standard_normal((8192, 8192), dtype=cupy.float32)
print("busy", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    (a @ a).sum().item()
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
    env.update(WORKBENCH_LOCK_DIR=str(tmp_path / "locks"), PYTHONPATH=str(ROOT))
    return env


def _profile(tmp_path: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "workbench", "profile", *SWEEP, "--out", str(out), *extra],
                            cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _planned(stdout: str) -> int:
    """Points the sweep set out to store: planned, less those a runner refused ("skipped:") or that failed."""
    m = re.search(r", (\d+) points -> ", stdout)
    assert m, stdout
    failed = re.search(r"^(\d+) points failed", stdout, re.M)
    return int(m.group(1)) - stdout.count("\nskipped: ") - (int(failed.group(1)) if failed else 0)


def _check_rows(out: Path, planned: int) -> None:
    from workbench.storage import store

    df = store.load_measurements(out)
    assert len(df) == planned, f"{planned} points planned, {len(df)} stored: points lost"
    key = ["kernel", "scheme", "layer", "M", "N", "K", "mode"]
    assert not df.duplicated(key).any()
    flags = df["flags"].fillna("").astype(str)
    company = df["other_processes"].fillna("").astype(str).str.len() > 0
    assert flags[company].str.contains("other_processes").all(), "a point measured with company stored unflagged"
    noisy = df["spread_rel"] > TARGET_SPREAD
    assert flags[noisy].str.contains("spread_above_limit").all(), "a noisy point stored as clean"
    print(f"\n{len(df)} points stored, {int(company.sum())} flagged other_processes, "
          f"{int(noisy.sum())} flagged spread_above_limit, 0 lost")


def test_second_sweep_on_the_same_gpu_and_file_is_refused(cp, tmp_path):
    out = tmp_path / "m" / "sweep.parquet"
    first = _profile(tmp_path, out)
    banner = first.stdout.readline()  # printed once the first sweep holds the GPU and the file
    assert " points -> " in banner, banner + first.stderr.read()
    second = _profile(tmp_path, out)
    s_out, s_err = second.communicate(timeout=600)
    first_running = first.poll() is None  # the second sweep met a sweep that was still running
    f_out, f_err = first.communicate(timeout=900)
    assert first.returncode == 0, f_err
    assert first_running or second.returncode == 2, "the first sweep ended before the second started: lengthen SWEEP"
    assert second.returncode == 2 and s_err.count("\n") == 1, s_err
    assert "is in use by pid" in s_err and str(first.pid) in s_err and "Traceback" not in s_err
    _check_rows(out, _planned(banner + f_out))


def test_two_sweeps_started_at_once_with_wait_lose_nothing(cp, tmp_path):
    out = tmp_path / "m" / "sweep.parquet"
    procs = [_profile(tmp_path, out, "--wait"), _profile(tmp_path, out, "--wait")]
    results = [p.communicate(timeout=900) for p in procs]
    for p, (_, e) in zip(procs, results, strict=True):
        assert p.returncode == 0, e
    waited = [o for o, e in results if "waiting for" in e]
    assert len(waited) == 1, [e for _, e in results]  # exactly one waited for the other
    assert "resumed:" in waited[0]  # and then found every point already there: nothing measured twice
    measured = [o for o, _ in results if o not in waited]
    _check_rows(out, _planned(measured[0]))


def test_points_measured_beside_another_gpu_process_are_flagged(cp, tmp_path):
    pynvml = pytest.importorskip("pynvml")
    busy = subprocess.Popen([sys.executable, "-c", BUSY, "120"], cwd=ROOT, env=_env(tmp_path),
                            stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout.readline().strip() == "busy"
        from workbench.measure.environment import detect

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByUUID(detect().gpu_uuid)  # the GPU the sweep will use
        seen = time.time() + 10
        while not pynvml.nvmlDeviceGetComputeRunningProcesses(handle) and time.time() < seen:
            time.sleep(0.2)
        if not pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            pytest.skip("NVML lists no compute processes in this container: other processes cannot be detected here")
        out = tmp_path / "busy.parquet"
        proc = _profile(tmp_path, out)
        o, e = proc.communicate(timeout=900)
        assert proc.returncode == 0, e
    finally:
        busy.kill()
        busy.wait(timeout=60)
    from workbench.storage import store

    df = store.load_measurements(out)
    assert (df["other_processes"].fillna("").astype(str).str.len() > 0).all(), df["other_processes"].tolist()
    _check_rows(out, _planned(o))
