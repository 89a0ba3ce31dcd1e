"""The first sweep's warm-up and the device-side check, on CPU: kernels.toolchain.build.cached_only (nothing compiled
twice, nothing waited for), kernels.input_cache.scratch (the warm-up's caches are its own), the warm-up threads
(workbench.measure.warm_up) with NumPy runners, and workbench.measure.output_check's device arithmetic run over NumPy
(HostBlas) against the host path. The GPU side: tests/test_warm_up_gpu.py."""

from __future__ import annotations

import math
import sys
import threading
import time
import types

import numpy as np
import pytest

from kernels import input_cache, problems
from kernels.registry import KernelSpec
from kernels.toolchain import build, nvrtc
from models.errors import InputError
from tests.fakes_profiler import FAKE_SPEC, FakeNvmlDevice, FakeRunner, FakeTimer
from workbench.measure import warm_up
from workbench.measure.environment import Environment
from workbench.measure.nvml import NvmlSampler
from workbench.measure.output_check import HostBlas, blas_errors, check_output, host_errors, relative_errors
from workbench.measure.profiler import Shape, plan, run_sweep
from workbench.measure.timing import TimingConfig
from workbench.storage import store

ENV = Environment("Fake GPU", "", "GPU-fake-0001", "9.0", 4, 1 << 16, 1 << 30, "0.0", "13.0", "14.2", "", "abc")
CFG = TimingConfig(budget_s=0.01, sample_s=1e-4)


# ---------------------------------------------------------------------------------------------------- cached_only
@pytest.fixture
def fake_nvrtc(tmp_path, monkeypatch):
    """A counting NVRTC stand-in writing into an empty cubin cache."""
    monkeypatch.setenv("WORKBENCH_CUBIN_CACHE", str(tmp_path))
    calls: list[bytes] = []

    def compile_cubin(source, name, options, name_expressions=()):
        calls.append(name)
        return nvrtc.Compiled(True, "", b"cubin", {e: f"_Z{len(e)}" for e in name_expressions})

    monkeypatch.setattr(nvrtc, "compile_cubin", compile_cubin)
    return calls


def test_cached_only_never_compiles_and_stands_in(fake_nvrtc):
    job = ("problems.cu", "fill_normal", "sm_90", ())
    with build.cached_only() as missing:
        with pytest.raises(build.NotCached):
            build.cached_cubin(*job)
        fn = build.arch_function("problems.cu", "fill_normal", "sm_90")
        with build.planned_device("sm_90"):
            mod = build.module("problems.cu")
    assert fake_nvrtc == [] and len(missing) == 2 and "problems.cu fill_normal sm_90" in missing[0]
    assert isinstance(fn, build.Unbuilt) and fn(1, 2, x=3) is None and fn.num_regs > 0
    assert isinstance(mod.get_function("f"), build.Unbuilt)
    fn.max_dynamic_shared_size_bytes = 1 << 16  # runners set it: an attribute of this stand-in only
    assert build.Unbuilt.max_dynamic_shared_size_bytes == 0
    with pytest.raises(RuntimeError, match="not built yet"):
        fn.kernel  # noqa: B018  (the CUfunction the cluster occupancy query reads)
    path, _ = build.cached_cubin(*job)  # outside the block: compiled, once
    assert fake_nvrtc == ["problems.cu"] and path.is_file()
    with build.cached_only() as missing:
        assert build.cached_cubin(*job)[0] == path  # in the cache: found, not compiled again
    assert fake_nvrtc == ["problems.cu"] and missing == []


def test_cached_only_is_this_threads_only(fake_nvrtc):
    """Another thread compiles as usual while one is inside cached_only (the measuring thread never stands in)."""
    seen: list[object] = []
    inside, done = threading.Event(), threading.Event()

    def warm() -> None:
        with build.cached_only():
            inside.set()
            done.wait(5)

    t = threading.Thread(target=warm)
    t.start()
    inside.wait(5)
    seen.append(getattr(build._LOCAL, "missing", None))
    build.cached_cubin("problems.cu", "fill_normal", "sm_90", ())
    done.set()
    t.join()
    assert seen == [None] and fake_nvrtc == ["problems.cu"]


# ---------------------------------------------------------------------------------------------------- scratch
def test_scratch_caches_are_private_per_thread():
    assert problems.input_cache() is problems.INPUTS and problems._templates() is problems._TEMPLATE
    barrier = threading.Barrier(3)
    ids: list[tuple[int, int, int]] = []

    def task() -> None:
        with input_cache.scratch():
            mine = problems.input_cache()
            mine.get(input_cache.InputKey("k", None, 1, 1, 0), lambda: np.zeros(4))
            problems._templates()["x"] = 1
            problems._quant_errors()["x"] = 1.0
            barrier.wait(5)  # all three inside at once
            ids.append((id(mine), id(problems._templates()), id(problems._quant_errors())))
        assert problems.input_cache() is problems.INPUTS

    threads = [threading.Thread(target=task) for _ in range(2)]
    for t in threads:
        t.start()
    barrier.wait(5)
    assert problems.input_cache() is problems.INPUTS  # this thread: the shared ones, untouched
    for t in threads:
        t.join()
    assert len({i for row in ids for i in row}) == 6
    assert len(problems.INPUTS) == 0 and "x" not in problems._TEMPLATE and "x" not in problems._QUANT_ERRORS


# ---------------------------------------------------------------------------------------------------- the check
def _pair(shape, seed=0):
    rng = np.random.default_rng(seed)
    ref = rng.standard_normal(shape) * 3.0
    y = (ref + rng.standard_normal(shape) * 1e-3).astype(np.float16).astype(np.float64)
    return y, ref


@pytest.mark.parametrize("shape", [(1, 7), (16, 300), (256, 4096), (3, 1)])
def test_device_arithmetic_matches_host(shape):
    """blas_errors (cuBLAS's daxpy / ddot / idamax arithmetic, here over NumPy) gives the host's figures: the norms
    to ~1e-12, the maxima exactly."""
    y, ref = _pair(shape)
    host = host_errors(y, ref)
    dev = blas_errors(y, ref, HostBlas)
    assert dev[0] == pytest.approx(host[0], rel=1e-12) and dev[1] == host[1]
    assert relative_errors(y, ref) == host  # NumPy arrays: the host path
    assert y.flags.writeable and np.array_equal(y, _pair(shape)[0])  # the inputs are not changed


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_device_arithmetic_flags_unwritten_outputs(bad):
    y, ref = _pair((4, 8))
    y[2, 3] = bad
    assert blas_errors(y, ref, HostBlas) == host_errors(y, ref) == (math.inf, math.inf)


def test_device_arithmetic_edge_cases():
    z = np.zeros((2, 3))
    e = blas_errors(np.ones((2, 3)), z, HostBlas)
    assert all(math.isnan(v) for v in e) and all(math.isnan(v) for v in host_errors(np.ones((2, 3)), z))
    empty = np.zeros((0, 4))
    assert all(math.isnan(v) for v in blas_errors(empty, empty, HostBlas))
    assert all(math.isnan(v) for v in host_errors(empty, empty))
    with pytest.raises(ValueError):
        blas_errors(np.zeros((2, 3)), np.zeros((3, 2)), HostBlas)


def test_check_output_takes_the_host_path_for_host_references():
    """A reference on the host (a NumPy runner, a peer's own) is checked on the host, device_output unused."""
    runner = FakeRunner()
    p = runner.make(2, 8, 4, seed=0, reference=True)
    runner.launch(p)
    runner.device_output = lambda problem: pytest.fail("device_output with a host reference")
    assert check_output(runner, p) == host_errors(runner.output(p), p.ref)
    assert check_output(runner, p)[0] < 1e-6
    p.ref = None
    assert all(math.isnan(v) for v in check_output(runner, p))


# ---------------------------------------------------------------------------------------------------- the warm-up
class FakeStream:
    def __init__(self, non_blocking=False):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def synchronize(self):
        return None


SPEC_B = KernelSpec(name="fake_fp32_b", scheme="fp32", backend="nvrtc", role="reference", runner="tests:fake")


class PickyRunner(FakeRunner):
    """Accepts K >= k_min only; counts what it was asked (thread-safely)."""

    def __init__(self, spec=FAKE_SPEC, k_min=1024):
        super().__init__(spec)
        self.k_min = k_min
        self.asked: list[tuple[int, int, int, bool]] = []
        self.lock = threading.Lock()

    def check(self, M, N, K):
        if K < self.k_min:
            raise InputError(f"K >= {self.k_min} only")

    def make(self, M, N, K, *, seed, reference):
        with self.lock:
            self.asked.append((M, N, K, reference))
        return super().make(M, N, K, seed=seed, reference=reference)


def test_plan_tasks_and_tiny_shapes():
    points = plan([FAKE_SPEC, SPEC_B], [Shape("", 4096, 4096), Shape("", 2048, 11008)], [1, 2, 4, 8, 16], 90)
    tasks = warm_up.plan_tasks(points)
    assert [t.name for t in tasks] == ["fake_fp32", "fake_fp32_b"]
    assert tasks[0].batches == (1, 2, 16) and (tasks[0].N, tasks[0].K) == (4096, 11008)
    assert warm_up.tiny_shape(PickyRunner(), tasks[0]) == (512, 1024)
    small = warm_up.WarmTask("fake_fp32", points[0], (1,), 256, 512)
    assert warm_up.tiny_shape(PickyRunner(), small) is None  # nothing within its planned shape


def test_torch_runners_warm_last_in_plan_order():
    from dataclasses import replace

    torch_spec = replace(FAKE_SPEC, name="fake_torch", backend="torch")
    points = plan([torch_spec, FAKE_SPEC, SPEC_B], [Shape("", 4096, 4096)], [1, 16], 90)
    names = [t.name for t in warm_up.torch_last(warm_up.plan_tasks(points))]
    assert names == ["fake_fp32", "fake_fp32_b", "fake_torch"]


def test_warm_instance_makes_checks_and_launches_nothing_of_ours():
    runner = PickyRunner()
    task = warm_up.WarmTask("fake_fp32", None, (1, 16), 4096, 4096)
    assert warm_up.warm_instance(runner, task, FakeStream(), input_cache.scratch, build.cached_only) == []
    assert runner.asked == [(1, 512, 1024, True), (1, 512, 1024, False), (16, 512, 1024, True),
                            (16, 512, 1024, False)]
    assert runner.launches == 0  # an nvrtc kernel: never launched by the warm-up
    notes = warm_up.warm_instance(runner, warm_up.WarmTask("fake_fp32", None, (1,), 256, 512), FakeStream(),
                                  input_cache.scratch, build.cached_only)
    assert "no tiny shape" in notes[0]


def test_warm_up_threads_run_together_and_report_failures():
    barrier = threading.Barrier(3)
    names: set[str] = set()

    def together(i: int):
        def run() -> list[str]:
            barrier.wait(5)  # three tasks at once: three threads
            names.add(threading.current_thread().name)
            return [f"note {i}"] if i == 0 else []
        return run

    def broken() -> list[str]:
        raise RuntimeError("boom\nsecond line")

    w = warm_up.WarmUp({"a": together(0), "b": together(1), "c": together(2), "bad": broken}, threads=4)
    notes = w.finish(budget_s=10)
    assert len(names) == 3 and all(n.startswith("warm-up") for n in names)
    assert notes == ["note 0", "warm-up of bad failed: RuntimeError: boom"]


def test_warm_up_drops_tasks_not_started_within_the_budget():
    started: list[str] = []

    def slow() -> list[str]:
        started.append("slow")
        time.sleep(0.3)
        return []

    w = warm_up.WarmUp({"slow": slow, "late": lambda: started.append("late") or []}, threads=1)
    t = time.perf_counter()
    notes = w.finish(budget_s=0.05)
    assert started == ["slow"] and time.perf_counter() - t >= 0.2  # the running one is waited for
    assert notes == ["warm-up of late dropped after 0 s (its first points initialise it)"]


def test_no_warm_up_without_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    points = plan([FAKE_SPEC], [Shape("", 512, 1024)], [1], 90)
    assert warm_up.start(points, {"fake_fp32": FakeRunner()}, lambda name: FakeRunner(), None) is None
    assert warm_up.run(points, {"fake_fp32": FakeRunner()}, lambda name: FakeRunner(), None) == []


class NotReadyPool:
    """A CompilePool stand-in whose first kernel is not compiled yet (a fresh cache): the sweep warms up."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def ready(self, name):
        return False

    def wait_ready(self, names):
        return names[0]

    def errors(self, name):
        return []


@pytest.fixture
def fake_cupy(monkeypatch):
    """Just what the warm-up asks of CuPy: the current device and a stream to enter."""
    class Device:
        def __init__(self, i=None):
            self.id = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    module = types.ModuleType("cupy")
    module.cuda = types.SimpleNamespace(Device=Device, Stream=FakeStream)
    monkeypatch.setitem(sys.modules, "cupy", module)
    monkeypatch.setattr(warm_up, "library_warm_ups", lambda runners: {})  # problems.warm needs the real CuPy
    return module


def _sweep(tmp_path, name, threads, log):
    made: list[PickyRunner] = []

    def factory(kernel):
        made.append(PickyRunner(FAKE_SPEC if kernel == "fake_fp32" else SPEC_B, k_min=512))
        return made[-1]

    points = plan([FAKE_SPEC, SPEC_B], [Shape("", 512, 512), Shape("", 512, 1024)], [1, 2, 4], 90)

    class Timer(FakeTimer):  # the launches of every runner made (the warm-up's would show)
        def _timed(self, fn):
            before = sum(r.launches for r in made)
            fn()
            return (sum(r.launches for r in made) - before) * 1e-5

    timer = Timer(FakeRunner())
    res = run_sweep(points, tmp_path / name, ENV, cfg=CFG, timer=timer, runner_factory=factory,
                    sampler=NvmlSampler(device=FakeNvmlDevice()), progress=False, log=log, warm_threads=threads)
    return res, made


def test_sweep_warms_up_private_runners_first_and_measures_the_same(tmp_path, monkeypatch, fake_cupy):
    """With a fresh cache the sweep warms every runner up on private instances before its first point; the rows
    it stores are those of a sweep without warm-up."""
    from workbench.measure import profiler

    monkeypatch.setattr(profiler, "start_compiles", lambda points, runners: NotReadyPool())
    logged: list[str] = []
    res, made = _sweep(tmp_path, "warm.parquet", 4, logged.append)
    cold, made0 = _sweep(tmp_path, "cold.parquet", 0, lambda m: None)
    assert res.measured == cold.measured == 12 and "warm-up" in res.phases and logged == []
    assert len(made) == 4 and len(made0) == 2  # the sweep's two runners, and two private ones
    sweep_runners, private = made[:2], made[2:]
    assert all(r.asked and all((N, K) == (256, 512) for _, N, K, _ in r.asked) for r in private)
    assert all(r.launches == 0 for r in private)
    assert [a for r in sweep_runners for a in r.asked] == [a for r in made0 for a in r.asked]
    keep = ["kernel", "M", "N", "K", "ref_error_rel", "ref_maxabs_rel", "time_median_s", "n_samples"]
    a = store.load_measurements(tmp_path / "warm.parquet")[keep]
    b = store.load_measurements(tmp_path / "cold.parquet")[keep]
    assert a.equals(b)
