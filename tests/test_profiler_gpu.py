"""A tiny real sweep on the device: timing, NVML, calibration kernels, store (skips without a GPU / CuPy)."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.registry import KernelSpec, Problem

pytestmark = pytest.mark.gpu

MATMUL_SPEC = KernelSpec(name="test_cupy_matmul_fp16", scheme="fp16", backend="cublas", role="peer",
                         runner="tests.test_profiler_gpu:MatmulRunner", m_min=1, m_max=256)


@pytest.fixture(scope="module")
def cp():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception:
        pytest.skip("no CUDA device")
    return cupy


class MatmulRunner:
    """cuBLAS fp16 through cupy.matmul(out=...): capturable, no allocation in launch."""

    def __init__(self, spec: KernelSpec = MATMUL_SPEC):
        self.spec = spec

    def check(self, M, N, K):
        return None

    def make(self, M, N, K, *, seed, reference):
        import cupy

        rng = cupy.random.default_rng(seed)
        x = rng.standard_normal((M, K), dtype=cupy.float32).astype(cupy.float16)
        w = rng.standard_normal((N, K), dtype=cupy.float32).astype(cupy.float16)
        wt = w.T
        ref = x.astype(cupy.float64) @ wt.astype(cupy.float64) if reference else None
        out = cupy.empty((M, N), cupy.float16)
        return Problem(M, N, K, {"x": x, "wt": wt}, out, x.nbytes + w.nbytes, ref=ref)

    def launch(self, p: Problem) -> None:
        import cupy

        cupy.matmul(p.arrays["x"], p.arrays["wt"], out=p.out)

    def output(self, p: Problem):
        return p.out.astype("float64").get()


def test_measure_real_kernel_graph_and_cold(cp):
    from workbench.environment import detect
    from workbench.timing import CudaTimer, TimingConfig, measure

    env = detect()
    timer = CudaTimer()
    t = measure(MatmulRunner(), 1, 4096, 4096, env.l2_bytes, timer, TimingConfig())
    assert t.method == "graph"
    assert t.rotate_bytes >= 3 * env.l2_bytes
    assert t.stats.n >= 10 and 1e-6 < t.stats.median < 1e-3
    assert t.ref_error_rel < 1e-2
    # at least 80 GB/s of weights even for the slowest plausible path; less means the timer is broken
    assert 4096 * 4096 * 2 / t.stats.median > 80e9
    hot = measure(MatmulRunner(), 1, 4096, 4096, env.l2_bytes, timer, TimingConfig(hot=True))
    assert hot.rotate_sets == 1


def test_nvml_reads_clocks(cp):
    from workbench.environment import detect
    from workbench.nvml import NvmlSampler

    env = detect()
    sampler = NvmlSampler(uuid=env.gpu_uuid)
    with sampler, sampler.window() as w:
        x = cp.ones(1 << 26, dtype=cp.float32)
        for _ in range(20):
            x *= 1.0001
        cp.cuda.Device().synchronize()
    assert sampler.enabled, sampler.warning
    assert w.summary.n_samples >= 1 and w.summary.sm_clock_median_hz > 1e8


def test_calibration_kernels_compile_and_run(cp):
    from workbench.calibrate import _launch_ceilings, _module
    from workbench.environment import detect
    from workbench.timing import CudaTimer

    env = detect()
    mod, has_fp8 = _module(env.cc, print)
    assert has_fp8 == (env.cc >= 89)
    timer = CudaTimer()
    with timer:
        floors = {c.key: c.value for c in _launch_ceilings(mod, timer)}
    assert 0 < floors["graph_launch_floor_s"] < floors["launch_floor_s"] < 50e-6


def test_tiny_sweep_end_to_end(cp, tmp_path):
    from workbench import store
    from workbench.environment import detect
    from workbench.nvml import NvmlSampler
    from workbench.profiler import Shape, plan, run_sweep
    from workbench.timing import CudaTimer, TimingConfig

    env = detect()
    points = plan([MATMUL_SPEC], [Shape("", 1024, 2048)], [1, 16], env.cc)
    out = tmp_path / "tiny.parquet"
    res = run_sweep(points, out, env, cfg=TimingConfig(budget_s=0.05), timer=CudaTimer(),
                    sampler=NvmlSampler(uuid=env.gpu_uuid), runner_factory=lambda name: MatmulRunner(),
                    progress=False)
    assert res.measured == 2 and not res.failed
    df = store.load_measurements(out)
    assert (df["ref_error_rel"] < 1e-2).all() and (df["timer"] == "graph").all()
    assert np.isfinite(df["sm_clock_median_hz"]).all()
    assert (df["gpu_uuid"] == env.gpu_uuid).all() and (df["time_single_call_s"] > df["time_median_s"]).all()
