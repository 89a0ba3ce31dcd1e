import functools
import math
import os
import signal

import pytest

from models.errors import InputError
from tests.fakes_profiler import FAKE_SPEC, FakeNvmlDevice, FakeRunner, FakeTimer
from workbench.interfaces.cli import main, sigterm_as_interrupt
from workbench.measure.environment import Environment
from workbench.measure.nvml import NvmlSampler
from workbench.measure.profiler import (
    Point,
    Shape,
    SweepAborted,
    check_memory,
    default_shapes,
    plan,
    run_sweep,
    select_kernels,
    unsupported,
)
from workbench.measure.timing import TimingConfig
from workbench.storage import store

ENV = Environment("Fake GPU", "", "GPU-fake-0001", "9.0", 4, 1 << 16, 1 << 30, "0.0", "13.0", "14.2", "", "abc")
CFG = TimingConfig(budget_s=0.01, sample_s=1e-4)
SHAPES = [Shape("", 32, 16), Shape("toy/layer", 64, 32)]


def sweep(points, out, runner, **kw):
    return run_sweep(points, out, ENV, cfg=CFG, timer=FakeTimer(runner), runner_factory=lambda name: runner,
                     sampler=NvmlSampler(device=FakeNvmlDevice()), progress=False, log=lambda m: None, **kw)


def test_default_shapes_dedupe_chapter_and_o_proj():
    shapes = default_shapes()
    assert [(s.N, s.K) for s in shapes] == [(4096, 4096), (12288, 4096), (22016, 4096), (4096, 11008)]


def test_plan_respects_supported_batches():
    points = plan([FAKE_SPEC], SHAPES, [1, 8, 16, 32, 256], cc=90)
    assert {p.M for p in points} == {1, 8, 16}
    assert len(points) == 6
    assert plan([FAKE_SPEC], SHAPES, [1], cc=70) == []  # below min_cc
    with pytest.raises(InputError):
        plan([FAKE_SPEC], SHAPES, [0], cc=90)


def test_kernels_a_gpu_cannot_run_are_skipped_with_one_line_each():
    """On sm_75 (a T4) the CUDA-core GEMVs run and the tensor-core kernels are left out, each with its reason."""
    from kernels import registry

    specs = [registry.get(n) for n in ("fp16_gemv", "w8a16_gemv", "w8a16_tc_gemv", "fp8_tc_gemv", "wg_bf16")]
    points = plan(specs, SHAPES, [1, 16], cc=75)
    assert {p.spec.name for p in points} == {"fp16_gemv", "w8a16_gemv"}
    lines = unsupported(specs, 75)
    assert [line.split()[0] for line in lines] == ["w8a16_tc_gemv", "fp8_tc_gemv", "wg_bf16"]
    assert all("\n" not in line and line.endswith("this GPU is sm_75") for line in lines)
    assert "needs sm_80 (mma.sync m16n8k16" in lines[0] and "needs sm_89 (e4m3" in lines[1]
    assert "needs sm_90 only" in lines[2]
    assert unsupported(specs, 90) == [] and unsupported(specs, None) == []
    assert unsupported([registry.get("wg_bf16")], 100) == ["wg_bf16 needs sm_90 only (wgmma, TMA and thread-block "
                                                           "clusters: sm_90a code); this GPU is sm_100"]


def test_unknown_names_are_input_errors():
    with pytest.raises(InputError, match="unknown scheme"):
        select_kernels(["fp64"])
    with pytest.raises(InputError, match="unknown kernel"):
        select_kernels([], ["no_such_kernel"])
    with pytest.raises(InputError, match="nvfp4"):
        select_kernels(["nvfp4"])


def test_too_large_for_memory_refused_before_allocating():
    huge = Point(FAKE_SPEC, Shape("", 1_000_000, 1_000_000), 1)
    with pytest.raises(InputError, match="device memory"):
        check_memory([huge], free_bytes=140 << 30, l2_bytes=60 << 20, cfg=CFG)
    check_memory([Point(FAKE_SPEC, Shape("", 4096, 4096), 1)], free_bytes=140 << 30, l2_bytes=60 << 20, cfg=CFG)


def test_sweep_writes_rows_with_schema_and_bytes(tmp_path):
    runner = FakeRunner()
    out = tmp_path / "sweep.parquet"
    res = sweep(plan([FAKE_SPEC], SHAPES, [1, 4], 90), out, runner, calibration_sm_clock_hz=1.98e9)
    assert res.measured == 4 and res.skipped_done == 0
    df = store.load_measurements(out)
    assert len(df) == 4 and (df["run_id"] == res.run_id).all()
    r = df[(df["N"] == 64) & (df["M"] == 4)].iloc[0]
    assert r["bytes"] == 4 * (64 * 32 + 4 * 32 + 4 * 64) and r["flops"] == 2 * 4 * 64 * 32
    assert r["layer"] == "toy/layer" and r["mode"] == "cold" and r["gpu_uuid"] == "GPU-fake-0001"
    assert r["time_median_s"] == pytest.approx(10e-6)
    assert r["sm_clock_median_hz"] == 1980e6 and not r["throttled"]
    assert r["ref_error_rel"] < 1e-6 and r["n_samples"] >= 10
    assert not store.journal_path(out).exists()
    assert set(res.phases) >= {"make", "loop", "store"}


class Interrupt(FakeRunner):
    """Raises KeyboardInterrupt when asked to make the input sets of the `after`-th point."""

    def __init__(self, after):
        super().__init__()
        self.after = after
        self.points = 0

    def make(self, M, N, K, *, seed, reference):
        if reference:
            self.points += 1
            if self.points > self.after:
                self.stop()
        return super().make(M, N, K, seed=seed, reference=reference)

    def stop(self):
        raise KeyboardInterrupt


def test_interrupted_sweep_keeps_points_and_resumes(tmp_path):
    out = tmp_path / "sweep.parquet"
    points = plan([FAKE_SPEC], SHAPES, [1, 2, 4], 90)
    with pytest.raises(KeyboardInterrupt):
        sweep(points, out, Interrupt(after=2))
    kept = store.load_measurements(out)
    assert len(kept) == 2
    runner = FakeRunner()
    res = sweep(points, out, runner)
    assert res.skipped_done == 2 and res.measured == len(points) - 2
    df = store.load_measurements(out)
    assert len(df) == len(points) and df["run_id"].nunique() == 1  # a resumed sweep keeps its id
    res = sweep(points, out, FakeRunner())
    assert res.measured == 0 and res.skipped_done == len(points)
    res = sweep(points, out, FakeRunner(), fresh=True)
    assert res.measured == len(points)


def test_remeasure_measures_again_and_replaces_the_points(tmp_path):
    from dataclasses import replace

    out = tmp_path / "sweep.parquet"
    points = plan([FAKE_SPEC], SHAPES, [1, 2], 90)

    def on(env, pts, **kw):
        runner = FakeRunner()
        return run_sweep(pts, out, env, cfg=CFG, timer=FakeTimer(runner), runner_factory=lambda name: runner,
                         sampler=NvmlSampler(device=FakeNvmlDevice()), progress=False, log=lambda m: None, **kw)

    gpu_a = replace(ENV, gpu_key="h200-sxm")
    first = on(gpu_a, points)
    res = on(gpu_a, points[:2], remeasure=True)
    assert res.skipped_done == 0 and res.measured == 2 and res.run_id != first.run_id
    df = store.load_measurements(out)
    assert len(df) == len(points) and (df["run_id"] == res.run_id).sum() == 2  # one row per point, two new
    on(replace(gpu_a, gpu_uuid="GPU-fake-0002"), points[:1], remeasure=True)  # another GPU of the same kind
    df = store.load_measurements(out)
    assert len(df) == len(points) and (df["gpu_uuid"] == "GPU-fake-0002").sum() == 1
    on(replace(gpu_a, gpu_uuid="GPU-fake-0003"), points[:1])  # a plain resume on a third one adds its row beside
    assert len(store.load_measurements(out)) == len(points) + 1


def test_remeasure_after_a_kill_folds_the_left_journal_with_the_replacement(tmp_path):
    from dataclasses import replace

    out = tmp_path / "sweep.parquet"
    points = plan([FAKE_SPEC], SHAPES, [1, 2], 90)
    gpu_a = replace(ENV, gpu_key="h200-sxm")
    gpu_b = replace(gpu_a, gpu_uuid="GPU-fake-0002")
    sweep_on = functools.partial(run_sweep, cfg=CFG, sampler=NvmlSampler(device=FakeNvmlDevice()), progress=False,
                                 log=lambda m: None)
    first = FakeRunner()
    sweep_on(points, out, gpu_a, timer=FakeTimer(first), runner_factory=lambda name: first)
    row = store.load_measurements(out).iloc[0].to_dict()  # a remeasure on GPU b killed (SIGKILL) after one point:
    store.append_journal(store.journal_path(out), {**row, "gpu_uuid": gpu_b.gpu_uuid})  # its row only journaled
    runner = Interrupt(after=0)  # the same command again, interrupted before it measures anything
    with pytest.raises(KeyboardInterrupt):
        sweep_on(points, out, gpu_b, timer=FakeTimer(runner), runner_factory=lambda name: runner, remeasure=True)
    df = store.load_measurements(out)
    assert len(df) == len(points) and (df["gpu_uuid"] == gpu_b.gpu_uuid).sum() == 1  # replaced, not added beside


def test_interrupted_remeasure_keeps_every_point(tmp_path):
    out = tmp_path / "sweep.parquet"
    points = plan([FAKE_SPEC], SHAPES, [1, 2, 4], 90)
    first = sweep(points, out, FakeRunner())
    with pytest.raises(KeyboardInterrupt):
        sweep(points, out, Interrupt(after=2), remeasure=True)
    df = store.load_measurements(out)
    assert len(df) == len(points) and (df["run_id"] != first.run_id).sum() == 2  # two replaced, the rest kept


class Terminate(Interrupt):
    """Sends this process SIGTERM (as `timeout` or `kill` would) instead of raising KeyboardInterrupt."""

    def stop(self):
        os.kill(os.getpid(), signal.SIGTERM)


def test_sigterm_ends_a_remeasure_like_an_interrupt(tmp_path):
    out = tmp_path / "sweep.parquet"
    points = plan([FAKE_SPEC], SHAPES, [1, 2, 4], 90)
    first = sweep(points, out, FakeRunner())
    before = signal.getsignal(signal.SIGTERM)
    with sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not before  # else the SIGTERM below would end the test run
        with pytest.raises(KeyboardInterrupt):
            sweep(points, out, Terminate(after=2), remeasure=True)
    assert signal.getsignal(signal.SIGTERM) is before  # restored when the command ends
    assert not store.journal_path(out).exists()  # folded, with the replacement, before the process ends
    df = store.load_measurements(out)
    assert len(df) == len(points) and (df["run_id"] != first.run_id).sum() == 2


def test_cli_exits_130_on_sigterm(monkeypatch, capsys):
    import workbench.interfaces.cli as cli

    class Command:
        commands: dict = {}

        def main(self, **kwargs):
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN, None)
            os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("SIGTERM did not interrupt the command")

    monkeypatch.setattr(cli, "click_command", lambda: Command())
    assert main(["profile"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_killed_sweep_journal_is_folded_on_resume(tmp_path):
    out = tmp_path / "sweep.parquet"
    points = plan([FAKE_SPEC], SHAPES[:1], [1, 2], 90)
    sweep(points[:1], out, FakeRunner())
    # simulate a kill after one more journal append: a journal beside the Parquet, never folded
    first = store.load_measurements(out).iloc[0].to_dict()
    out.unlink()
    store.append_journal(store.journal_path(out), first)
    res = sweep(points, out, FakeRunner())
    assert res.skipped_done == 1 and res.measured == 1


def test_refused_shape_skipped_and_failures_recorded(tmp_path):
    runner = FakeRunner(refuse_k=32)
    res = sweep(plan([FAKE_SPEC], SHAPES, [1], 90), tmp_path / "a.parquet", runner)
    assert res.measured == 1 and len(res.refused) == 1 and "refused" in res.refused[0]

    class Broken(FakeRunner):
        def launch(self, p):
            raise RuntimeError("illegal address")

    res = sweep(plan([FAKE_SPEC], SHAPES, [1], 90), tmp_path / "b.parquet", Broken())
    assert res.measured == 0 and len(res.failed) == 2


def test_nvml_absent_columns_empty(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)
    runner = FakeRunner()
    res = run_sweep(plan([FAKE_SPEC], SHAPES[:1], [1], 90), tmp_path / "a.parquet", ENV, cfg=CFG,
                    timer=FakeTimer(runner), runner_factory=lambda n: runner, sampler=NvmlSampler(), progress=False,
                    log=lambda m: None)
    assert "NVML unavailable" in res.nvml_warning
    r = res.frame.iloc[0]
    assert math.isnan(r["sm_clock_median_hz"]) and r["clock_reasons"] == ""
    assert res.frame["throttled"].isna().iloc[0]


def _has_gpu():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def test_cli_errors(tmp_path, capsys):
    assert main(["profile", "--scheme", "fp64"]) == 2
    assert "unknown scheme" in capsys.readouterr().err
    assert main(["profile", "--kernel", "nope"]) == 2
    assert "unknown kernel" in capsys.readouterr().err
    assert main(["profile", "--shape", "12x"]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["profile", "--scheme", "fp32", "--out", str(blocker / "x.parquet")]) in (2,)
    err = capsys.readouterr().err
    assert "cannot write" in err or "no registered kernel" in err
    assert main(["profile", "--out", str(tmp_path / "x.csv")]) == 2
    assert main(["profile", "--remeasure", "--fresh"]) == 2
    assert "--remeasure with --fresh" in capsys.readouterr().err
    assert main(["profile", "--remeasure", "--gpus", "all"]) == 2
    assert "--remeasure runs on one GPU" in capsys.readouterr().err


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU")
def test_cli_without_gpu_says_what_still_works(capsys):
    assert main(["env"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "predict" in err and "dashboard" in err
    assert main(["calibrate", "--out", "/tmp/wb-cal-test"]) == 2
    assert "predict" in capsys.readouterr().err


def test_lost_cuda_context_aborts_keeping_points(tmp_path):
    class Crashing(FakeRunner):
        def launch(self, p):
            if p.N == 64:
                raise RuntimeError("cudaErrorIllegalAddress")
            super().launch(p)

    class DeadAfterCrash(FakeTimer):
        def synchronize(self):
            if any(n == 64 for n in seen):
                raise RuntimeError("cudaErrorIllegalAddress")

    seen = []
    runner = Crashing()
    orig = runner.make

    def make(M, N, K, **kw):
        seen.append(N)
        return orig(M, N, K, **kw)

    runner.make = make
    out = tmp_path / "a.parquet"
    with pytest.raises(SweepAborted, match="--exclude fake_fp32"):
        run_sweep(plan([FAKE_SPEC], SHAPES, [1], 90), out, ENV, cfg=CFG, timer=DeadAfterCrash(runner),
                  runner_factory=lambda n: runner, sampler=NvmlSampler(device=FakeNvmlDevice()), progress=False,
                  log=lambda m: None)
    assert len(store.load_measurements(out)) == 1
    assert main(["profile", "--exclude", "nope"]) == 2


def test_git_commit_prefers_the_named_commit(monkeypatch, tmp_path):
    from workbench.measure.environment import git_commit

    monkeypatch.setenv("WORKBENCH_GIT_COMMIT", "abc123")
    assert git_commit() == "abc123"  # a device copy's .git can lag its files: the named commit wins
    monkeypatch.delenv("WORKBENCH_GIT_COMMIT")
    assert git_commit(tmp_path) == "unknown"  # no repository there
    assert git_commit() not in ("", "abc123")


def test_cluster_residency_counts_each_size_and_survives_a_driver_that_cannot(monkeypatch):
    from kernels.toolchain import cuda_driver
    from workbench.measure.calibrate import _cluster_residency

    class Fn:
        max_dynamic_shared_size_bytes = 0

    class Mod:
        def get_function(self, name):
            assert name == "empty_kernel"
            return Fn()

    monkeypatch.setattr(cuda_driver, "max_active_clusters", lambda fn, threads, smem, size: {2: 66, 3: 39, 4: 30}[size])
    got = {c.key: c.value for c in _cluster_residency(Mod(), print)}
    assert got == {"resident_clusters_2": 66.0, "resident_clusters_3": 39.0, "resident_clusters_4": 30.0}

    def refuse(fn, threads, smem, size):
        raise RuntimeError("cuOccupancyMaxActiveClusters failed with CUresult 1")

    notes = []
    monkeypatch.setattr(cuda_driver, "max_active_clusters", refuse)
    assert _cluster_residency(Mod(), notes.append) == [] and "not measured" in notes[0]


def test_library_versions_are_read_without_importing_the_library(monkeypatch, tmp_path):
    import sys
    import types

    from workbench.measure import environment

    pkg = tmp_path / "fake_torch_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "version.py").write_text("from typing import Optional\n__version__ = '2.11.0+cu130'\ncuda = '13.0'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert environment._version("fake_torch_pkg") == "2.11.0+cu130" and "fake_torch_pkg" not in sys.modules
    monkeypatch.setitem(sys.modules, "fake_torch_pkg", types.SimpleNamespace(__version__="2.12.0"))
    assert environment._version("fake_torch_pkg") == "2.12.0"  # an imported module speaks for itself
    monkeypatch.setattr(environment.importlib.metadata, "version", lambda name: {"plain_dist": "1.2.3"}[name])
    monkeypatch.setattr(environment.importlib.util, "find_spec", lambda name: None)
    assert environment._version("plain_dist") == "1.2.3"  # no version.py: the distribution's metadata

    def absent(name):
        raise environment.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(environment.importlib.metadata, "version", absent)
    assert environment._version("not_installed_here") == ""
