"""The profiler owns what it measures (CPU, with fakes): GPU/output locks, flagged points, no row lost by a writer."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.compare_fixtures import frame, point
from tests.fakes_profiler import FAKE_SPEC, FakeNvmlDevice, FakeRunner, FakeTimer
from workbench.interfaces import cli_profile
from workbench.interfaces.cli import main
from workbench.measure.environment import Environment
from workbench.measure.nvml import NvmlSampler, Sample, other_pids, summarize
from workbench.measure.profiler import Shape, SweepResult, plan, run_sweep
from workbench.measure.timing import TimingConfig
from workbench.storage import locks, store

ROOT = Path(__file__).resolve().parents[1]
ENV = Environment("Fake GPU", "", "GPU-fake-0001", "9.0", 4, 1 << 16, 1 << 30, "0.0", "13.0", "14.2", "", "abc")


@pytest.fixture(autouse=True)
def lock_dir(tmp_path, monkeypatch):
    folder = tmp_path / "locks"
    monkeypatch.setenv("WORKBENCH_LOCK_DIR", str(folder))
    return folder


def _holder(lock_path: Path, seconds: float) -> subprocess.Popen:
    """Another process that takes `lock_path` and holds it for `seconds` (prints 'held' once it has it)."""
    code = textwrap.dedent(f"""
        import sys, time
        from workbench.storage import locks
        with locks.exclusive({str(lock_path)!r}, "thing"):
            print("held", flush=True)
            time.sleep({seconds})
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_holder_refused_naming_the_first(tmp_path):
    path = locks.gpu_lock_path("GPU-abc")
    with locks.exclusive(path, "GPU GPU-abc"):
        with pytest.raises(locks.LockHeld) as exc:
            with locks.exclusive(path, "GPU GPU-abc"):
                pass
    msg = str(exc.value)
    assert f"pid {os.getpid()}" in msg and "GPU GPU-abc is in use" in msg and "--wait" in msg
    assert "\n" not in msg
    with locks.exclusive(path, "GPU GPU-abc"):  # released on exit
        pass


def test_wait_blocks_until_the_holder_ends_and_a_killed_holder_frees_the_lock(tmp_path):
    path = locks.file_lock_path(tmp_path / "out.parquet")
    proc = _holder(path, 1.0)
    told = []
    t = time.perf_counter()
    with locks.exclusive(path, "output", wait=True, on_wait=told.append):
        waited = time.perf_counter() - t
    proc.wait(timeout=30)
    assert waited > 0.3 and len(told) == 1 and f"pid {proc.pid}" in told[0]
    proc = _holder(path, 60)
    proc.kill()
    proc.wait(timeout=30)
    with locks.exclusive(path, "output"):  # the kernel dropped the dead process's flock
        pass


def test_file_lock_names_do_not_collide_and_nothing_is_written_beside_the_data(tmp_path):
    a, b = tmp_path / "x" / "s.parquet", tmp_path / "y" / "s.parquet"
    assert locks.file_lock_path(a) != locks.file_lock_path(b)
    with locks.sweep_locks("GPU-1", a), locks.sweep_locks("GPU-2", b):
        pass
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


# ---------------------------------------------------------------------------------------------------- the CLI hook
def _fake_gpu(monkeypatch, calls):
    from workbench.measure import environment, timing

    monkeypatch.setattr(timing, "CudaTimer", lambda use_graph=True: None)
    monkeypatch.setattr(cli_profile, "require_gpu", lambda: None)
    monkeypatch.setattr(cli_profile, "detect", lambda: ENV)
    monkeypatch.setattr(environment, "free_device_bytes", lambda: 1 << 40)

    def fake_sweep(points, out, env, **kw):
        calls.append(out)
        return SweepResult(frame=store.empty_measurements(), run_id="r")

    monkeypatch.setattr(cli_profile, "run_sweep", fake_sweep)


def test_profile_refused_while_another_sweep_holds_the_gpu_then_waits(tmp_path, monkeypatch, capsys):
    calls = []
    _fake_gpu(monkeypatch, calls)
    out = tmp_path / "m" / "s.parquet"
    args = ["profile", "--kernel", "w4a16_gemv", "--shape", "4096x4096", "--batch", "1", "--out", str(out),
            "--no-progress"]
    proc = _holder(locks.gpu_lock_path(ENV.gpu_uuid), 1.0)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"GPU {ENV.gpu_uuid} is in use by pid {proc.pid}" in err and not calls
    assert main([*args, "--wait"]) == 0  # blocks until the holder exits, then sweeps
    assert calls == [out] and "waiting for GPU" in capsys.readouterr().err
    proc.wait(timeout=30)
    other = _holder(locks.file_lock_path(out), 1.0)  # another GPU's sweep writing the same file
    assert main(args) == 2
    assert f"output {out} is in use by pid {other.pid}" in capsys.readouterr().err
    other.wait(timeout=30)


# ---------------------------------------------------------------------------------------------------- flags
class BusyNvml(FakeNvmlDevice):
    def __init__(self, pids):
        super().__init__()
        self.pids = tuple(pids)

    def read(self) -> Sample:
        s = super().read()
        return Sample(s.t, s.sm_clock_hz, s.mem_clock_hz, s.power_w, s.temperature_c, s.reasons, self.pids)


def test_other_pids_rule():
    assert other_pids({10}, own_pid=10) == [] and other_pids({10, 11}, own_pid=10) == [11]
    assert other_pids({99}, own_pid=10) == []  # in a container NVML shows host pids: the one process is us
    assert other_pids({98, 99}, own_pid=10) == [98, 99] and other_pids(set(), own_pid=10) == []
    s = Sample(0.0, 1e9, 1e9, 1.0, 1.0, 0, (os.getpid(), 4242))
    assert summarize([s]).other_processes == "4242" and summarize([s]).columns()["other_processes"] == "4242"


def _sweep(tmp_path, nvml, noise, name):
    runner = FakeRunner()
    cfg = TimingConfig(budget_s=0.01, sample_s=1e-4)
    points = plan([FAKE_SPEC], [Shape("", 32, 16)], [1, 2], 90)
    out = tmp_path / f"{name}.parquet"
    run_sweep(points, out, ENV, cfg=cfg, timer=FakeTimer(runner, noise=noise), runner_factory=lambda n: runner,
              sampler=NvmlSampler(device=nvml), progress=False, log=lambda m: None)
    return store.load_measurements(out)


def test_points_measured_with_company_or_unsettled_spread_are_flagged_not_clean(tmp_path):
    clean = _sweep(tmp_path, BusyNvml([os.getpid()]), [1.0], "clean")
    assert list(clean["flags"]) == ["", ""] and list(clean["other_processes"]) == ["", ""]
    busy = _sweep(tmp_path, BusyNvml([os.getpid(), 31337]), [1.0], "busy")
    assert set(busy["flags"]) == {locks.FLAG_OTHER_PROCESSES} and set(busy["other_processes"]) == {"31337"}
    noisy = _sweep(tmp_path, BusyNvml([os.getpid()]), [1.0, 1.5, 0.7, 1.3], "noisy")
    assert (noisy["spread_rel"] > 0.01).all() and set(noisy["flags"]) == {locks.FLAG_SPREAD}


# ---------------------------------------------------------------------------------------------------- no row lost
def _writer(out: str, kernel: str, n: int) -> None:
    jpath = store.journal_path(out)
    for m in range(1, n + 1):
        store.append_journal(jpath, frame([point(kernel, "w4a16", m, 1e-5)]).iloc[0].to_dict())
        if m % 7 == 0:
            store.fold_journal(out)
    store.fold_journal(out)


def test_two_writers_on_one_file_lose_no_row(tmp_path):
    out = tmp_path / "shared.parquet"
    store.write_points(out, frame([point("old_kernel", "bf16", 1, 2e-5)]))
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(out), k, 40)) for k in ("a_kernel", "b_kernel")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    df = store.fold_journal(out)
    assert len(df) == 81 and set(df["kernel"]) == {"old_kernel", "a_kernel", "b_kernel"}


def test_calibrate_refused_while_a_sweep_holds_the_gpu(tmp_path, monkeypatch, capsys):
    from workbench.measure import calibrate

    calls = []
    _fake_gpu(monkeypatch, [])
    monkeypatch.setattr(calibrate, "calibrate", lambda out_dir, env=None: calls.append(out_dir))
    proc = _holder(locks.gpu_lock_path(ENV.gpu_uuid), 1.0)
    assert main(["calibrate", "--out", str(tmp_path / "cal")]) == 2
    assert f"is in use by pid {proc.pid}" in capsys.readouterr().err and not calls
    assert not (tmp_path / "cal").exists()  # refused before anything is created
    proc.wait(timeout=30)
    assert main(["calibrate", "--out", str(tmp_path / "cal")]) == 0 and calls == [tmp_path / "cal"]
