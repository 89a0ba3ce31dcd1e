"""Fakes at the device boundary for the profiler's CPU tests: a NumPy Runner, a timer that counts launches, NVML."""

from __future__ import annotations

import numpy as np

from kernels.registry import KernelSpec, Problem
from models.errors import InputError
from workbench.measure.nvml import Sample

FAKE_SPEC = KernelSpec(name="fake_fp32", scheme="fp32", backend="nvrtc", role="reference", runner="tests:fake",
                       m_min=1, m_max=16)


class FakeRunner:
    """Computes y = x @ w.T in NumPy; `launches` counts launches; `bad_value` corrupts outputs."""

    def __init__(self, spec: KernelSpec = FAKE_SPEC, bad_value: float | None = None, refuse_k: int | None = None):
        self.spec = spec
        self.launches = 0
        self.made = 0
        self.bad_value = bad_value
        self.refuse_k = refuse_k

    def check(self, M: int, N: int, K: int) -> None:
        if self.refuse_k is not None and K == self.refuse_k:
            raise InputError(f"K={K} refused")

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((M, K)).astype(np.float32)
        w = rng.standard_normal((N, K)).astype(np.float32)
        self.made += 1
        ref = x.astype(np.float64) @ w.astype(np.float64).T if reference else None
        return Problem(M, N, K, {"x": x, "w": w}, np.empty((M, N), np.float32), x.nbytes + w.nbytes, ref=ref)

    def launch(self, p: Problem) -> None:
        self.launches += 1
        np.matmul(p.arrays["x"], p.arrays["w"].T, out=p.out)
        if self.bad_value is not None:
            p.out[0, 0] = self.bad_value

    def output(self, p: Problem) -> np.ndarray:
        return p.out.astype(np.float64)


class FakeTimer:
    """Reports `t_launch` seconds per launch the runner made inside each timed call, times a noise pattern."""

    method = "graph"

    def __init__(self, runner: FakeRunner, t_launch: float = 10e-6, noise: list[float] | None = None):
        self.runner = runner
        self.t_launch = t_launch
        self.noise = noise or [1.0]
        self.calls = 0
        self.captured = 0

    def __enter__(self) -> FakeTimer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def capture(self, fn):
        self.captured += 1
        return fn

    def _timed(self, fn) -> float:
        before = self.runner.launches
        fn()
        n = self.runner.launches - before
        factor = self.noise[self.calls % len(self.noise)]
        self.calls += 1
        return n * self.t_launch * factor

    def elapsed(self, fn, repeats: int) -> np.ndarray:
        return np.array([self._timed(fn) for _ in range(repeats)])

    def single(self, fn) -> float:
        return self._timed(fn) + 5e-6

    def synchronize(self) -> None:
        return None


class FakeNvmlDevice:
    def __init__(self, sm_mhz: float = 1980, reasons: int = 0):
        self.sm_mhz = sm_mhz
        self.reasons = reasons

    def read(self) -> Sample:
        return Sample(0.0, self.sm_mhz * 1e6, 3201e6, 500.0, 50.0, self.reasons)
