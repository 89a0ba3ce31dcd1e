"""Inputs made once per shape and reused (kernels.input_cache), compiles overlapped with measuring
(kernels.toolchain.build.CompilePool and the profiler's kernel order), on the CPU."""

from __future__ import annotations

import os

import numpy as np
import pytest

from kernels.input_cache import CANONICAL, InputCache, InputKey, nbytes_of
from kernels.problems import Params
from kernels.quant import quant
from kernels.registry import KernelSpec
from tests.fakes_profiler import FAKE_SPEC, FakeNvmlDevice, FakeRunner, FakeTimer
from workbench.measure.environment import Environment
from workbench.measure.nvml import NvmlSampler
from workbench.measure.profiler import Shape, plan, run_sweep
from workbench.measure.timing import TimingConfig
from workbench.storage import store

W4 = Params("w4a16", "w4", "f16", group_size=128)


def key(layout: str = CANONICAL, N: int = 256, K: int = 512, copy: int = 0, params: Params = W4) -> InputKey:
    return InputKey(layout, params, N, K, seed=0, copy=copy)


def array(n: int) -> np.ndarray:
    return np.zeros(n, dtype=np.uint8)


def test_same_key_gives_the_same_arrays_and_another_key_new_ones():
    cache, made = InputCache(), []

    def make(n: int = 100):
        made.append(n)
        return array(n)

    a = cache.get(key(), make)
    assert cache.get(key(), make) is a and made == [100]  # made once, then the same arrays
    b = cache.get(key(copy=1), make)  # another rotation copy: distinct arrays
    c = cache.get(key(N=512), make)  # another shape
    d = cache.get(key(params=Params("w8a16", "w8", "f16")), make)  # other weights
    assert len({id(v) for v in (a, b, c, d)}) == 4 and len(made) == 4
    assert (cache.hits, cache.misses) == (1, 4)


def test_a_kernel_layout_keeps_one_shape_and_frees_the_finished_one():
    cache = InputCache()
    cache.get(key(CANONICAL), lambda: array(10))
    for copy in range(3):
        cache.get(key("w4a16_gemv", copy=copy), lambda: array(10))
    cache.get(key("tc_w4a16"), lambda: array(10))
    cache.get(key("w4a16_gemv", N=1024), lambda: array(10))  # the kernel moved on to the next shape
    assert key("w4a16_gemv") not in cache and key("w4a16_gemv", copy=2) not in cache
    assert key("w4a16_gemv", N=1024) in cache
    assert key(CANONICAL) in cache and key("tc_w4a16") in cache  # shared weights and other kernels stay
    assert cache.nbytes == 30


def test_memory_stays_bounded_least_recently_used_first():
    cache = InputCache(max_bytes=250)
    for n in (256, 512, 1024):
        cache.get(key(N=n), lambda: array(100))
    assert cache.nbytes == 200 and key(N=256) not in cache  # the oldest dropped
    cache.get(key(N=512), lambda: array(100))  # used: now the newest
    cache.get(key(N=2048), lambda: array(100))
    assert key(N=512) in cache and key(N=1024) not in cache
    big = cache.get(key(N=4096), lambda: array(1000))  # larger than the bound: kept alone (it is in use)
    assert len(cache) == 1 and cache.get(key(N=4096), lambda: array(1)) is big
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0
    with pytest.raises(ValueError):
        InputCache(max_bytes=-1)


def test_bytes_of_canonical_weights_count_every_array():
    w = quant.W4(array(64), np.zeros(8, np.float16), array(8), 32)
    assert nbytes_of(w) == 64 + 16 + 8
    assert nbytes_of((array(3), {"a": array(4)}, None)) == 7


# ---------------------------------------------------------------------------------------------------- the sweep
CFG = TimingConfig(budget_s=0.01, sample_s=1e-4)
SECOND = KernelSpec(name="fake_fp32_b", scheme="fp32", backend="nvrtc", role="reference", runner="tests:fake")


class Pool:
    """A CompilePool stand-in: `order` is the order the kernels' cubins become ready."""

    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.waited: list[list[str]] = []

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def ready(self, name: str) -> bool:
        return True  # (a pool not ready for the first kernel makes the sweep warm CuPy and torch up: GPU tests)

    def wait_ready(self, names: list[str]) -> str:
        self.waited.append(list(names))
        return next(n for n in self.order if n in names)

    def errors(self, name: str) -> list[str]:
        return ["b.cu k: boom"] if name == "fake_fp32_b" else []


def test_a_kernel_is_measured_as_soon_as_it_is_compiled(tmp_path, monkeypatch):
    """The kernel compiled first is measured first, whatever the plan order; each kernel's points stay together and
    every point is measured once; a failed compile is noted."""
    from workbench.measure import profiler

    pool = Pool(["fake_fp32_b", "fake_fp32"])
    monkeypatch.setattr(profiler, "start_compiles", lambda points, runners: pool)
    runner = FakeRunner()  # one NumPy runner for both kernels (the rows name the point's kernel)
    points = plan([FAKE_SPEC, SECOND], [Shape("", 32, 16)], [1, 2], 90)
    logged: list[str] = []
    out = tmp_path / "s.parquet"
    env = Environment("Fake GPU", "", "GPU-fake-0001", "9.0", 4, 1 << 16, 1 << 30, "0.0", "13.0", "14.2", "", "abc")
    res = run_sweep(points, out, env, cfg=CFG, timer=FakeTimer(runner), runner_factory=lambda name: runner,
                    sampler=NvmlSampler(device=FakeNvmlDevice()), progress=False, log=logged.append)
    assert res.measured == 4 and pool.waited == [["fake_fp32", "fake_fp32_b"], ["fake_fp32"]]
    df = store.load_measurements(out)
    assert list(df["kernel"]) == ["fake_fp32_b"] * 2 + ["fake_fp32"] * 2
    assert "note: compile failed: b.cu k: boom" in logged and "compile" in res.phases


def test_compile_pool_compiles_each_cubin_once_and_reports_failures(tmp_path, monkeypatch):
    """Real NVRTC in background processes (no GPU): groups sharing a cubin compile it once; a group is ready when
    its cubins are in the cache; a broken instance is one line in its group's errors; a warm cache compiles
    nothing."""
    from kernels.toolchain import build, compile_check

    try:
        compile_check.nvrtc_library()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    if compile_check.cuda_include_dir() is None:
        pytest.skip("no CUDA headers")
    monkeypatch.setenv("WORKBENCH_CUBIN_CACHE", str(tmp_path))
    common = ("problems.cu", "fill_normal", "sm_90", ())
    groups = {"a": [common], "b": [common, ("wg_gemm_w4a16.cu", "wg_gemm_w4a16<16, 1, 2, 1>", "sm_90a", ())]}
    with build.CompilePool(groups, workers=2, nice=5) as pool:
        assert pool.compiled == 2  # the shared module once
        assert pool._executor.submit(os.nice, 0).result() == os.nice(0) + 5  # the workers yield to the measuring
        first = pool.wait_ready(["b", "a"])
        assert first in ("a", "b") and pool.ready(first)
        assert pool.wait_ready(["b"]) == "b" and pool.ready("a")
        assert pool.errors("a") == []
        assert len(pool.errors("b")) == 1 and "wg_gemm_w4a16<16, 1, 2, 1>" in pool.errors("b")[0]
    assert build._is_cached(*common)
    with build.CompilePool({"a": [common]}) as again:
        assert again.compiled == 0 and again.wait_ready(["a"]) == "a"
