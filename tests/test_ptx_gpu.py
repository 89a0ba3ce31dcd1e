"""Every registered NVRTC kernel run from PTX of its declared minimum architecture (run on the device: pytest -m gpu).

kernels.toolchain.build.ptx_target("compute_80") compiles each kernel loaded to compute_80 PTX, which the driver
JIT-compiles for the GPU here: the H200 then runs the code an A100 (compute_80) or L40S (compute_89) would run
(`__CUDA_ARCH__` below 900), so a change that breaks an older GPU's path fails here. Each kernel (KernelSpec.min_cc; the
sm_90a wgmma kernels from compute_90a) is checked against its float64 reference at its smallest, a middle and its
largest batch, on the first shape its runner accepts: rel = ||y - ref|| / ||ref|| < 1e-2 (every kernel's outputs are
16-bit or wider; a path that computes the wrong thing is off by O(1)). Every kernel module loaded inside the block must
have been compiled from PTX of that target, and where CuPy reports it, the loaded function's PTX version must be it.
A kernel declared for sm_80 must fail from compute_75 PTX, one for sm_89 from compute_80: the minimum is needed,
not a guess (kernels.registry.NEEDS says what needs it; the CUDA-core GEMVs run from compute_75).
"""

from __future__ import annotations

import numpy as np
import pytest

from kernels import reference as ref
from kernels import registry
from kernels.gemv import gemv
from kernels.toolchain import build

pytestmark = pytest.mark.gpu

TOL = 1e-2
SHAPES = ((1029, 4096 + 64), (512, 1024), (4096, 4096))  # the first the runner accepts
NVRTC = [s for s in registry.specs() if s.backend == "nvrtc"]


def _run(spec: registry.KernelSpec, M: int, seed: int) -> float:
    runner = registry.runner(spec.name)
    for N, K in SHAPES:
        try:
            runner.check(M, N, K)
        except Exception:  # noqa: BLE001 - a shape this kernel refuses: the next one
            continue
        prob = runner.make(M, N, K, seed=seed, reference=True)
        gemv.poison_output(prob.out)
        runner.launch(prob)
        y = runner.output(prob)
        assert np.isfinite(y).all(), f"{spec.name} M={M} {N}x{K}: unwritten or NaN outputs"
        return ref.rel_error(y, prob.ref)
    raise AssertionError(f"{spec.name} accepts none of {SHAPES} at M={M}")


def _batches(spec: registry.KernelSpec) -> list[int]:
    return sorted({spec.m_min, min(spec.m_max, max(spec.m_min, 9)), spec.m_max})


@pytest.mark.parametrize("spec", NVRTC, ids=lambda s: s.name)
def test_kernel_runs_from_ptx_of_its_minimum_architecture(cp, spec):
    target = f"compute_{spec.min_cc}"
    cc = int(cp.cuda.Device().compute_capability)
    if not spec.supports(spec.m_min, cc):
        pytest.skip(f"{spec.name} does not run on this GPU (sm_{cc})")
    with build.ptx_target(target) as loaded:
        for M in _batches(spec):
            err = _run(spec, M, seed=7 + M)
            assert err < TOL, f"{spec.name} from {target} PTX, M={M}: rel err {err:.2e}"
    mine = [(src, t, obj) for src, t, obj in loaded if src == spec.source]
    assert mine, f"{spec.name}: nothing of {spec.source} was loaded inside the PTX block"
    for src, t, obj in loaded:
        assert t.startswith("compute_"), f"{src} was compiled for {t}, not from PTX"
        assert t.removeprefix("compute_").rstrip("af") == str(spec.min_cc) or t.endswith(("a", "f")), (src, t)
        version = getattr(obj, "ptx_version", None)
        if version is not None:
            assert int(version) == int(t.removeprefix("compute_").rstrip("af")), (src, t, version)


BELOW = {80: "compute_75", 89: "compute_80"}  # the PTX one step below each declared minimum that has one


@pytest.mark.parametrize("spec", [s for s in NVRTC if s.min_cc in BELOW], ids=lambda s: s.name)
def test_kernel_fails_from_ptx_below_its_minimum(cp, spec):
    """The declared minimum is needed: from the PTX below it the kernel does not compile or load (NVRTC's or the
    driver's JIT error), e.g. fp8_tc_gemv's e4m3 mma from compute_80, the mma.sync m16n8k16 kernels from compute_75."""
    with build.ptx_target(BELOW[spec.min_cc]), pytest.raises(Exception):  # noqa: B017 - NVRTC's or the driver's
        _run(spec, spec.m_min, seed=1)
