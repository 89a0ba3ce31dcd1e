"""The logic around the GPU, driven through fakes at the device boundary (issue 21): the timer's stop rule at its
edges, the profiler's abort and "cannot run here" paths, and calibrate's arithmetic and bookkeeping."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.fakes_profiler import FAKE_SPEC, FakeNvmlDevice, FakeRunner, FakeTimer
from workbench.measure import calibrate as cal
from workbench.measure.environment import Environment
from workbench.measure.nvml import NvmlSampler
from workbench.measure.profiler import MAX_CONSECUTIVE_FAILURES, Shape, SweepAborted, plan, run_sweep
from workbench.measure.timing import TimingConfig, measure, should_stop
from workbench.storage import store

ENV = Environment("Fake GPU", "", "GPU-fake-0001", "9.0", 4, 1 << 16, 1 << 30, "0.0", "13.0", "14.2", "", "abc")
CFG = TimingConfig(budget_s=0.01, sample_s=1e-4)


# ------------------------------------------------------------------------------------------------ the stop rule
def test_stop_rule_boundaries():
    cfg = TimingConfig(min_samples=10, max_samples=30, target_spread=0.01, budget_s=1.0)
    # exactly min_samples with zero spread stops; one fewer does not
    assert should_stop([2.0] * 10, 0.0, cfg) and not should_stop([2.0] * 9, 5.0, cfg)
    # spread exactly at the target stops: p10 = p50 = 1.0, p90 = 1.25 (linear, rank 8.1 of 0..9): spread 0.25
    at_target = [1.0] * 8 + [1.25] * 2
    assert should_stop(at_target, 0.0, TimingConfig(min_samples=10, target_spread=0.25, budget_s=1.0))
    assert not should_stop(at_target, 0.0, TimingConfig(min_samples=10, target_spread=0.2499, budget_s=1.0))
    over = [1.0] * 5 + [1.03] * 5  # p10 1.0, p50 1.015, p90 1.03: spread 0.03/1.015 > 0.01
    assert not should_stop(over, 0.999, cfg)
    assert should_stop(over, 1.0, cfg)  # the budget exactly spent stops
    assert should_stop([1.0, 2.0] * 15, 0.0, cfg)  # 30 = max_samples stops whatever the spread
    assert not should_stop([1.0, 2.0] * 14 + [1.0], 0.0, cfg)  # 29 does not


@pytest.mark.parametrize("min_samples, batch, want", [(10, 10, 10), (15, 10, 20), (3, 4, 4), (12, 5, 15)])
def test_measure_takes_whole_batches_until_the_rule_holds(min_samples, batch, want):
    runner = FakeRunner()  # noiseless: the spread is 0 from the first sample
    cfg = TimingConfig(hot=True, min_samples=min_samples, batch=batch, sample_s=1e-4)
    t = measure(runner, 1, 8, 8, l2_bytes=1 << 10, timer=FakeTimer(runner, t_launch=20e-6), cfg=cfg)
    assert t.stats.n == want and t.stats.median == pytest.approx(20e-6, rel=1e-12)
    # 1e-4 s per sample / an eager estimate of 20e-6 s per launch = 5 launches per sample (one set, hot)
    assert t.launches_per_sample == 5
    assert t.time_single_call_s == pytest.approx(25e-6, rel=1e-12)  # one launch + the fake's 5 µs dispatch


def test_measure_stops_at_max_samples_when_noise_never_settles():
    runner = FakeRunner()
    cfg = TimingConfig(hot=True, min_samples=10, max_samples=37, batch=10, budget_s=60.0, sample_s=1e-4)
    t = measure(runner, 1, 8, 8, l2_bytes=1 << 10, timer=FakeTimer(runner, noise=[1.0, 1.5]), cfg=cfg)
    assert t.stats.n == 40  # the 4th batch crosses 37
    assert t.stats.spread_rel == pytest.approx(0.4)  # p10 1.0·t, p90 1.5·t, median 1.25·t


# ------------------------------------------------------------------------------------------------ profiler paths
SHAPES = [Shape("", 32, 16), Shape("", 64, 32), Shape("", 96, 32)]


def sweep(points, out, runner_factory, timer):
    logs = []
    res = run_sweep(points, out, ENV, cfg=CFG, timer=timer, runner_factory=runner_factory,
                    sampler=NvmlSampler(device=FakeNvmlDevice()), progress=False, log=logs.append)
    return res, logs


def test_consecutive_failures_abort_with_the_count_and_keep_points(tmp_path):
    class Failing(FakeRunner):
        def launch(self, p):
            if p.M > 1:
                raise RuntimeError("launch failed")
            super().launch(p)

    runner = Failing()
    pts = plan([FAKE_SPEC], [Shape("", 32, 16)], [1, 2, 3, 4, 5, 6, 7, 8], 90)
    out = tmp_path / "m.parquet"
    with pytest.raises(SweepAborted) as info:
        sweep(pts, out, lambda n: runner, FakeTimer(runner))
    assert not info.value.context_lost
    msg = str(info.value)
    assert msg.startswith(f"{MAX_CONSECUTIVE_FAILURES} points failed in a row (last: fake_fp32 M=6 32x16: "
                          "RuntimeError: launch failed); points so far are kept in ")
    assert msg.endswith("re-run with --exclude fake_fp32 to resume without it")
    assert list(store.load_measurements(out)["M"]) == [1]


def test_failures_that_do_not_repeat_do_not_abort(tmp_path):
    class EveryOther(FakeRunner):
        def launch(self, p):
            if p.M % 2 == 0:
                raise RuntimeError("flaky")
            super().launch(p)

    runner = EveryOther()
    pts = plan([FAKE_SPEC], [Shape("", 32, 16)], list(range(1, 13)), 90)
    res, logs = sweep(pts, tmp_path / "m.parquet", lambda n: runner, FakeTimer(runner))
    assert res.measured == 6 and len(res.failed) == 6
    assert res.failed[0] == "fake_fp32 M=2 32x16: RuntimeError: flaky" and logs.count(f"failed: {res.failed[0]}") == 1


def test_a_runner_that_cannot_be_built_here_is_refused_once_and_others_run(tmp_path):
    other = FakeRunner(spec=FAKE_SPEC.__class__(**{**FAKE_SPEC.__dict__, "name": "fake_b"}))
    built = []

    def factory(name):
        built.append(name)
        if name == "fake_fp32":
            raise ModuleNotFoundError("No module named 'torch'")
        return other

    pts = plan([FAKE_SPEC, other.spec], SHAPES, [1], 90)
    res, _ = sweep(pts, tmp_path / "m.parquet", factory, FakeTimer(other))
    assert res.refused == ["fake_fp32: cannot run here (No module named 'torch')"]
    assert built.count("fake_fp32") == 1  # not retried for every point
    assert res.measured == 3 and not res.failed


def test_an_import_error_while_measuring_marks_the_kernel_unavailable(tmp_path):
    class LazyImport(FakeRunner):
        def make(self, *a, **kw):
            raise ImportError("cupy missing")

    runner = LazyImport()
    res, _ = sweep(plan([FAKE_SPEC], SHAPES, [1], 90), tmp_path / "m.parquet", lambda n: runner, FakeTimer(runner))
    assert res.refused == ["fake_fp32: cannot run here (cupy missing)"] and res.measured == 0 and not res.failed


def test_timer_that_falls_back_to_events_is_noted_once(tmp_path):
    runner = FakeRunner()
    timer = FakeTimer(runner)
    timer.method = "events"
    timer.capture_error = "CUDARuntimeError: capture not permitted"
    res, logs = sweep(plan([FAKE_SPEC], SHAPES, [1], 90), tmp_path / "m.parquet", lambda n: runner, timer)
    notes = [m for m in logs if m.startswith("note: fake_fp32: timed eager")]
    assert notes == ["note: fake_fp32: timed eager back-to-back launches, not a CUDA graph (CUDARuntimeError: "
                     "capture not permitted)"]
    assert res.measured == 3


# ------------------------------------------------------------------------------------------------ calibrate
class ConstTimer:
    """Every timed call takes `t` seconds; counts calls and captures."""

    method = "graph"

    def __init__(self, t):
        self.t = t
        self.calls = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def synchronize(self):
        return None

    def capture(self, fn):
        return fn

    def elapsed(self, fn, repeats):
        fn()
        self.calls += 1
        return np.full(repeats, self.t)


class FakeModule:
    def __init__(self):
        self.launched = []

    def get_function(self, name):
        return lambda grid, block, args: self.launched.append((name, grid, block))


def test_time_warms_up_then_takes_the_median():
    calls = []
    t, spread = cal._time(ConstTimer(2e-3), lambda: calls.append(1), repeats=9, warmup=4)
    assert t == 2e-3 and spread == 0.0 and len(calls) == 5  # 4 warm-up calls + 1 inside the fake elapsed


def test_compute_ceilings_flop_arithmetic_by_hand():
    env = ENV  # 4 SMs: 32 blocks × 256 threads = 8192 threads = 256 warps
    mod = FakeModule()
    out = {c.key: c for c in cal._compute_ceilings(mod, env, ConstTimer(1e-3), True, sink=None)}
    # fp32: 2 FLOP × 2 FMAs × 8 chains × 2048 iterations × 8192 threads / 1 ms
    assert out["fp32_flops"].value == pytest.approx(2 * 2 * 8 * 2048 * 8192 / 1e-3, rel=1e-12)
    # mma.sync m16n8k16 f16: 4096 FLOP × 4 chains × 2048 iterations × 256 warps / 1 ms; s8/e4m3 (k32): 8192 FLOP
    assert out["fp16_mma_flops"].value == pytest.approx(4096 * 4 * 2048 * 256 / 1e-3, rel=1e-12)
    assert out["bf16_mma_flops"].value == out["fp16_mma_flops"].value
    assert out["int8_mma_ops"].value == pytest.approx(8192 * 4 * 2048 * 256 / 1e-3, rel=1e-12)
    assert out["fp8_mma_flops"].value == out["int8_mma_ops"].value
    assert out["fp8_mma_flops"].detail == "mma.sync e4m3, 4 chains/warp, 256 warps"
    assert list(dict.fromkeys(m[0] for m in mod.launched)) == ["fma_fp32", "mma_f16", "mma_bf16", "mma_s8",
                                                              "mma_e4m3"]
    assert mod.launched[0][1:] == ((32,), (256,))
    no_fp8 = [c.key for c in cal._compute_ceilings(FakeModule(), env, ConstTimer(1e-3), False, sink=None)]
    assert no_fp8 == ["fp32_flops", "fp16_mma_flops", "bf16_mma_flops", "int8_mma_ops"]


def test_launch_ceilings_divide_by_the_launch_count():
    out = cal._launch_ceilings(FakeModule(), ConstTimer(4e-3))
    # 1000 empty launches in 4 ms: 4 µs each, eager and in a graph
    assert [(c.key, c.value) for c in out] == [("launch_floor_s", pytest.approx(4e-6, rel=1e-12)),
                                               ("graph_launch_floor_s", pytest.approx(4e-6, rel=1e-12))]
    assert out[1].detail == "1000 empty launches in one CUDA graph (graph)"


@pytest.mark.parametrize("cc, nvml, emulated", [("9.0", True, True), ("8.9", True, False), ("9.0", False, True)])
def test_calibrate_writes_the_document(tmp_path, monkeypatch, cc, nvml, emulated):
    env = Environment("NVIDIA H200", "h200-sxm", "GPU-12345678-aaaa", cc, 132, 60 << 20, 141 << 30, "580", "13.0",
                      "14.2", "", "abc")
    ceilings = [cal.Ceiling("read_bytes_per_s", 4.4e12, 0.001, "r"),
                cal.Ceiling("graph_launch_floor_s", 2e-6, 0.0, "g"),
                cal.Ceiling("fp16_mma_flops", 6e14, 0.002, "m"), cal.Ceiling("fp8_mma_flops", 4e14, 0.0, "e")]
    monkeypatch.setattr(cal, "require_gpu", lambda: None)
    monkeypatch.setattr(cal, "CudaTimer", lambda: ConstTimer(1.0))
    monkeypatch.setattr(cal, "measure_ceilings", lambda env, timer, log: list(ceilings))
    curve = {"bytes": [4096, 4096], "ctas": [132, 264], "time_s": [1.1e-6, 1.2e-6], "spread_rel": [0.01, 0.01],
             "l2_cold": [False, False]}
    monkeypatch.setattr(cal, "measure_read_curve", lambda env, timer, log: dict(curve))
    monkeypatch.setattr(cal, "_device_max_clock_hz", lambda: 1.98e9)
    device = FakeNvmlDevice(sm_mhz=1755) if nvml else None
    warning = "" if nvml else "NVML not available"
    monkeypatch.setattr(cal, "NvmlSampler", lambda **kw: NvmlSampler(device=device, warning=warning,
                                                                      interval_s=0.001))
    logs = []
    path = cal.calibrate(tmp_path, env, logs.append)
    doc = json.loads(path.read_text())
    assert path.parent == tmp_path and path.name.startswith("h200-sxm") and path.suffix == ".json"
    assert doc["ceilings"] == {"read_bytes_per_s": 4.4e12, "graph_launch_floor_s": 2e-6, "fp16_mma_flops": 6e14,
                               "fp8_mma_flops": 4e14, "fp8_mma_emulated": emulated}
    assert doc["details"]["fp16_mma_flops"] == {"spread_rel": 0.002, "how": "m"}
    assert doc["read_curve"] == curve  # the kernel-aware model's read curve, as measured
    assert (doc["gpu_key"], doc["gpu_uuid"], doc["gpu_name"]) == ("h200-sxm", "GPU-12345678-aaaa", "NVIDIA H200")
    if nvml:
        assert doc["sm_clock_hz"] == 1755e6 and doc["sm_clock_source"] == "nvml median during calibration"
        assert doc["mem_clock_hz"] == 3201e6 and doc["power_median_w"] == 500.0
    else:
        assert doc["sm_clock_hz"] == 1.98e9 and doc["sm_clock_source"] == "device maximum clock (no NVML)"
        assert doc["mem_clock_hz"] is None and doc["sm_clock_min_hz"] is None
        assert "note: NVML not available" in logs
    assert logs[0] == "calibrating NVIDIA H200 (GPU-12345678-aaaa), cc " + cc + ", 132 SMs, L2 63 MB"
    assert store.load_calibrations(tmp_path)["h200-sxm"]["ceilings"]["read_bytes_per_s"] == 4.4e12
    assert not math.isnan(doc["sm_clock_hz"])
