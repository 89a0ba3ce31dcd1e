import math

import numpy as np
import pytest

from models.errors import InputError
from tests.fakes_profiler import FakeRunner, FakeTimer
from workbench.measure.timing import (
    TimingConfig,
    launches_per_sample,
    measure,
    poison,
    relative_errors,
    rotation_count,
    should_stop,
    summarize,
)


def test_summarize_statistics():
    x = np.arange(1, 101, dtype=float) * 1e-6
    s = summarize(x)
    assert s.n == 100
    assert s.median == pytest.approx(50.5e-6)
    assert s.p10 == pytest.approx(np.percentile(x, 10))
    assert s.p90 == pytest.approx(np.percentile(x, 90))
    assert s.min == pytest.approx(1e-6)
    assert s.mean == pytest.approx(50.5e-6)
    assert s.spread_rel == pytest.approx((s.p90 - s.p10) / s.median)


@pytest.mark.parametrize("bad", [[], [1.0, -1.0], [1.0, float("nan")], [0.0, 1.0]])
def test_summarize_rejects_bad_samples(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_stopping_rule():
    cfg = TimingConfig(min_samples=10, max_samples=50, target_spread=0.01, budget_s=1.0)
    tight = [1.0] * 9
    assert not should_stop(tight, 0.0, cfg)  # fewer than min_samples, even if tight
    assert should_stop(tight + [1.0], 0.0, cfg)  # tight and enough
    noisy = [1.0, 1.2] * 10
    assert not should_stop(noisy, 0.5, cfg)  # spread 20%, budget left
    assert should_stop(noisy, 1.0, cfg)  # budget spent
    assert should_stop([1.0, 1.2] * 25, 0.0, cfg)  # max_samples


def test_rotation_count_covers_three_times_l2():
    cfg = TimingConfig()
    l2 = 60_000_000
    assert rotation_count(32 << 20, l2, cfg) == math.ceil(3 * l2 / (32 << 20))
    assert rotation_count(32 << 20, l2, cfg) * (32 << 20) >= 3 * l2
    assert rotation_count(400_000_000, l2, cfg) == 1
    assert rotation_count(1000, l2, TimingConfig(hot=True)) == 1


def test_launches_per_sample_whole_rotations_and_cap():
    cfg = TimingConfig(sample_s=1e-3, max_launches=2000)
    assert launches_per_sample(10e-6, 1, cfg) == 100
    n = launches_per_sample(10e-6, 6, cfg)
    assert n % 6 == 0 and n >= 100
    assert launches_per_sample(1e-9, 7, cfg) <= 2000 and launches_per_sample(1e-9, 7, cfg) % 7 == 0
    assert launches_per_sample(1.0, 3, cfg) == 3


def test_relative_errors_and_poison():
    ref = np.ones((2, 3))
    assert relative_errors(ref, ref) == (0.0, 0.0)
    y = ref.copy()
    y[0, 0] = 2
    e, m = relative_errors(y, ref)
    assert e == pytest.approx(1 / math.sqrt(6)) and m == pytest.approx(1.0)
    out = np.zeros((2, 2), np.float32)
    poison(out)
    assert np.isnan(out).all()
    assert relative_errors(out, np.ones((2, 2))) == (math.inf, math.inf)


def test_config_validation():
    with pytest.raises(InputError):
        TimingConfig(min_samples=2).validate()
    with pytest.raises(InputError):
        TimingConfig(target_spread=0).validate()


def test_measure_loop_with_fake_device():
    runner = FakeRunner()
    timer = FakeTimer(runner, t_launch=10e-6)
    cfg = TimingConfig(sample_s=1e-3)
    t = measure(runner, 2, 64, 32, l2_bytes=60_000_000, timer=timer, cfg=cfg)
    set_bytes = 2 * 32 * 4 + 64 * 32 * 4
    assert t.rotate_sets == math.ceil(3 * 60_000_000 / set_bytes)
    assert t.rotate_bytes >= 3 * 60_000_000
    assert runner.made == t.rotate_sets
    assert t.launches_per_sample % t.rotate_sets == 0
    assert t.stats.n >= cfg.min_samples
    assert t.stats.median == pytest.approx(10e-6)
    assert t.time_single_call_s == pytest.approx(15e-6)
    assert t.ref_error_rel < 1e-6
    assert set(t.phases) >= {"make", "check", "warmup", "capture", "loop", "single"}


def test_measure_keeps_sampling_until_spread_small_or_budget():
    runner = FakeRunner()
    noisy = FakeTimer(runner, noise=[1.0, 1.1, 0.9, 1.05])
    cfg = TimingConfig(hot=True, budget_s=0.05, max_samples=400)
    t = measure(runner, 1, 16, 16, l2_bytes=1 << 20, timer=noisy, cfg=cfg)
    assert t.rotate_sets == 1
    assert t.stats.spread_rel > 0.01 and t.stats.n > cfg.min_samples  # kept going until the budget ran out


def test_measure_reports_wrong_and_unwritten_outputs():
    runner = FakeRunner(bad_value=float("nan"))
    t = measure(runner, 1, 8, 8, l2_bytes=1 << 10, timer=FakeTimer(runner), cfg=TimingConfig(hot=True))
    assert t.ref_error_rel == math.inf
    runner = FakeRunner(bad_value=1e3)
    t = measure(runner, 1, 8, 8, l2_bytes=1 << 10, timer=FakeTimer(runner), cfg=TimingConfig(hot=True))
    assert t.ref_error_rel > 1


def test_measure_refuses_before_allocating():
    runner = FakeRunner(refuse_k=24)
    with pytest.raises(InputError):
        measure(runner, 1, 8, 24, l2_bytes=1 << 10, timer=FakeTimer(runner))
    assert runner.made == 0
    with pytest.raises(InputError):
        measure(runner, 0, 8, 8, l2_bytes=1 << 10, timer=FakeTimer(runner))
