"""The W4A16 ladder on the GPU (run on the device: pytest -m gpu): every rung's float64 check, and the registered
chapter kernel beside a direct standalone port of the chapter's program.

Float64 checks: fresh random inputs (never zeros), outputs poisoned with NaN, rel = ||y - ref|| / ||ref|| against the
reference of the dequantized weights at M = 1, 3, 4, 16 on small shapes (N not a multiple of 4 warps, K with a
remainder K-tile) and the LLM layers. Tolerances: fp32 kernels 1e-5; the half2 rungs sum 8 fp16 products per half per
chunk and round the output to fp16, as w4a16_gemv: 2e-3.
Chapter port: the chapter's gemv_w4 at batch 1 as a plain cupy.RawKernel (x staged whole in shared memory, GROUP a
constant, launched directly) with the one pragma that gives NVRTC nvcc's code for it (its word loop unrolled by 2; on
an H100 60.1 / 70.8 us on 22016x4096 / 4096x11008 against nvcc's 60.0 / 71.0, without it 63.3 / 85.9), on the same
inputs as the registered gemv_w4_ref: outputs equal to fp32 round-off, and both timed L2-cold by the profiler's loop
(workbench.measure.timing.measure) within +-15 % of each other.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels import problems, registry
from kernels import reference as ref
from kernels.gemv import gemv, ladder

pytestmark = pytest.mark.gpu

RUNG_KERNELS = tuple(k for r in ladder.RUNGS[:5] for k in r.kernels)  # rungs 0-4 (GEMV class, M <= 16)
TOL = {"gemv_w4_ref": 1e-5, "ladder_w4_vec16": 1e-5, "ladder_w4_magic": 2e-3, "ladder_w4_reorder": 2e-3,
       "w4a16_gemv": 2e-3}
SMALL = ((37, 256), (101, 640), (1029, 4096 + 128), (203, 16384 + 128))  # the last: K-tiles at every M
LLM = ((22016, 4096), (4096, 11008))


def _check(name: str, M: int, N: int, K: int, seed: int, group_size: int | None = None) -> float:
    runner = registry.runner(name, group_size=group_size)
    prob = runner.make(M, N, K, seed=seed, reference=True)
    gemv.poison_output(prob.out)
    runner.launch(prob)
    y = runner.output(prob)
    assert np.isfinite(y).all(), f"{name}: unwritten or NaN outputs"
    assert np.abs(prob.ref).max() > 0
    return ref.rel_error(y, prob.ref)


@pytest.mark.parametrize("name", RUNG_KERNELS)
@pytest.mark.parametrize("M", [1, 3, 4, 16])
def test_rung_small_shapes(cp, name, M):
    for i, (N, K) in enumerate(SMALL):
        err = _check(name, M, N, K, seed=300 * M + i)
        assert err < TOL[name], f"{name} M={M} {N}x{K}: rel err {err:.2e} > {TOL[name]:.0e}"


@pytest.mark.parametrize("name", RUNG_KERNELS)
@pytest.mark.parametrize("M", [1, 3, 4, 16])
def test_rung_llm_shapes(cp, name, M):
    for i, (N, K) in enumerate(LLM):
        err = _check(name, M, N, K, seed=11 + 100 * M + i)
        assert err < TOL[name], f"{name} M={M} {N}x{K}: rel err {err:.2e}"


@pytest.mark.parametrize("name", RUNG_KERNELS[:4])
@pytest.mark.parametrize("G", [32, 256])
def test_rung_group_sizes(cp, name, G):
    for M in (1, 5):
        err = _check(name, M, 77, 2048 + 512, seed=G + M, group_size=G)
        assert err < TOL[name], f"{name} G={G} M={M}: rel err {err:.2e}"


# ---------------------------------------------------------------- the chapter's program, ported as written
CHAPTER_GEMV_W4 = r"""
#define GROUP 128
extern "C" __global__ void gemv_w4(const unsigned int* Wq, const float* scales, const float* zeros,
                                   const float* x, float* y, int N, int K) {
    extern __shared__ float xs[];
    for (int i = threadIdx.x; i < K; i += blockDim.x) xs[i] = x[i];
    __syncthreads();
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= N) return;
    int words = K / 8, groups = K / GROUP;
    float acc = 0.f;
#pragma unroll 2  // what nvcc 13.0 does to this loop on its own (NVRTC 13.0 does not): nvcc's SASS, and its time
    for (int i = lane; i < words; i += 32) {
        unsigned int packed = Wq[(size_t)row * words + i];
        int g = (i * 8) / GROUP;
        float s = scales[(size_t)row * groups + g];
        float z = zeros[(size_t)row * groups + g];
        for (int j = 0; j < 8; ++j) {
            float w = ((float)((packed >> (4 * j)) & 0xF) - z) * s;
            acc += w * xs[i * 8 + j];
        }
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffff, acc, o);
    if (lane == 0) y[row] = acc;
}
"""


class ChapterPortRunner:
    """The port behind the profiler's Runner protocol, on the registered kernel's inputs and layout (M = 1)."""

    def __init__(self, cp) -> None:
        self.cp = cp
        self.kernel = cp.RawKernel(CHAPTER_GEMV_W4, "gemv_w4")
        self.spec = registry.get("gemv_w4_ref")
        self.base = registry.runner("gemv_w4_ref")

    def check(self, M, N, K) -> None:
        assert M == 1 and K * 4 <= 48 * 1024

    def make(self, M, N, K, *, seed, reference):
        prob = self.base.make(M, N, K, seed=seed, reference=reference)
        out = self.cp.empty(N, dtype=self.cp.float32)
        a = prob.arrays
        prob.arrays = {**a, "port": ((-(-N // 4),), (128,), (a["w0"], a["w1"], a["w2"], a["x0"], out, np.int32(N),
                                                               np.int32(K)), K * 4)}
        prob.out = out
        return prob

    def launch(self, prob) -> None:
        grid, block, args, smem = prob.arrays["port"]
        self.kernel(grid, block, args, shared_mem=smem)

    def output(self, prob):
        return self.cp.asnumpy(prob.out.astype(self.cp.float64))[None, :]


def _l2_bytes(cp) -> int:
    return int(cp.cuda.Device().attributes["L2CacheSize"])


@pytest.mark.parametrize("N,K", [(22016, 4096), (4096, 11008)])
def test_registered_chapter_kernel_matches_the_port(cp, N, K):
    from workbench.measure.timing import CudaTimer, TimingConfig, measure

    port = ChapterPortRunner(cp)
    prob = port.make(1, N, K, seed=5, reference=True)
    port.launch(prob)
    ours = port.base
    ours.launch(prob)  # the registered kernel on the same arrays (its own output array)
    cp.cuda.Device().synchronize()
    y_port = cp.asnumpy(prob.out).astype(np.float64)
    y_ours = cp.asnumpy(prob.arrays["launch"].args[4]).astype(np.float64)[0]
    assert np.abs(y_port).max() > 0
    assert ref.rel_error(y_ours, y_port) < 1e-6, "the registered chapter kernel and the port disagree"
    assert ref.rel_error(y_port[None, :], prob.ref) < 1e-5
    cfg = TimingConfig(budget_s=0.3)
    t_port = measure(port, 1, N, K, _l2_bytes(cp), CudaTimer(), cfg)
    t_ours = measure(registry.runner("gemv_w4_ref"), 1, N, K, _l2_bytes(cp), CudaTimer(), cfg)
    ratio = t_ours.stats.median / t_port.stats.median
    print(f"{N}x{K}: registered gemv_w4_ref {t_ours.stats.median * 1e6:.2f} us, chapter port "
          f"{t_port.stats.median * 1e6:.2f} us, ratio {ratio:.3f}")
    assert 0.85 <= ratio <= 1.15, f"registered {t_ours.stats.median:.3e} s vs the port {t_port.stats.median:.3e} s"
    assert t_port.ref_error_rel < 1e-5 and t_ours.ref_error_rel < 1e-5


def test_ladder_bytes_are_the_arrays(cp):
    for name in ladder.DEFS:
        runner = registry.runner(name)
        M, N, K = 3, 100, 1024
        prob = runner.make(M, N, K, seed=0, reference=False)
        out_bytes = M * N * (4 if ladder.DEFS[name].out_kind == "f32" else 2)
        assert prob.bytes == problems.bytes_read(*[a for k, a in prob.arrays.items() if k != "launch"]) + out_bytes
