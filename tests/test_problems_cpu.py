"""kernels.problems' parameters and the group size through the runners, on the CPU (no GPU needed)."""

from __future__ import annotations

import pytest

from kernels import problems, registry
from kernels.gemv import gemv
from models.errors import InputError


def test_params_validate_their_choices():
    with pytest.raises(InputError, match="weight"):
        problems.Params("x", "int3", "f16")
    with pytest.raises(InputError, match="group size"):
        problems.Params("w4a16", "w4", "f16", group_size=12)
    with pytest.raises(InputError, match="per token"):
        problems.Params("w8a8", "w8", "i8", act_scales="tensor")
    with pytest.raises(InputError, match="K divisible"):
        problems.Params("w4a16", "w4", "f16", group_size=64).check(1, 128, 96)
    with pytest.raises(InputError, match="M, N, K"):
        problems.Params("fp16", "f16", "f16").check(0, 128, 128)


@pytest.mark.parametrize("name,weight,act", [("w4a16_gemv", "w4", "f16"), ("gemv_w4_ref", "w4", "f32"),
                                             ("w8a8_gemv", "w8", "i8"), ("fp8_gemv", "e4m3", "f16"),
                                             ("bf16_gemv", "bf16", "bf16"), ("fp32_gemv", "f32", "f32")])
def test_gemv_kernels_read_their_params(name, weight, act):
    p = gemv.params(name, 64)
    assert (p.weight, p.act) == (weight, act)
    assert p.group_size == (64 if weight == "w4" else 0)


def test_group_size_reaches_the_runners_and_unsupported_ones_refuse():
    assert registry.runner("w4a16_gemv", group_size=64).group_size == 64
    assert registry.runner("w4a16_gemv").group_size == 128
    assert registry.runner("fp16_gemv", group_size=64).group_size == 0  # not a w4a16 kernel: no groups
    registry.runner("w4a16_gemv", group_size=256).check(1, 256, 1024)
    registry.runner("gemv_w4_ref", group_size=32).check(1, 256, 1024)
    with pytest.raises(InputError, match="group size 128 only"):
        registry.runner("tc_w4a16", group_size=64).check(16, 256, 1024)
    with pytest.raises(InputError, match="group size 128 only"):
        registry.runner("wg_w4a16", group_size=32).check(16, 256, 1024)
    registry.runner("tc_w4a16", group_size=128).check(16, 256, 1024)
    with pytest.raises(InputError, match="group sizes"):
        registry.runner("torch_int4_tinygemm", group_size=16).check(1, 256, 1024)
    with pytest.raises(InputError, match="power of two"):
        registry.runner("w4a16_gemv", group_size=96).check(1, 256, 1536)


def test_compile_jobs_name_the_kernels_of_a_point(monkeypatch):
    from kernels.toolchain import build

    monkeypatch.setattr(build, "device_arch", lambda: "sm_90")
    (src, entry, arch, opts), = registry.runner("w4a16_gemv").compile_jobs(1, 4096, 4096)
    assert (src, entry, arch) == ("gemv_w4a16.cu", "gemv_w4a16", "sm_90") and "-DGEMV_MB=1" in opts
    (src, entry, arch, opts), = registry.runner("tc_bf16").compile_jobs(16, 4096, 4096)
    assert src == "tc_gemm_f16.cu" and entry.startswith("tc_gemm_bf16_m") and arch == "sm_90"
    (src, expr, arch, _), = registry.runner("wg_bf16").compile_jobs(64, 8192, 4096)
    assert src == "wg_gemm.cu" and expr.startswith("wg_gemm<") and arch == "sm_90a"


def test_sweep_records_the_group_size_and_the_kernels_bytes(tmp_path):
    """A w4a16 sweep at G = 64 stores group_size 64 and the runner's bytes; G = 128 is another point (the key)."""
    from dataclasses import replace

    from kernels.registry import KernelSpec
    from tests.fakes_profiler import FakeNvmlDevice, FakeRunner, FakeTimer
    from tests.test_profiler_cpu import CFG, ENV
    from workbench.measure.nvml import NvmlSampler
    from workbench.measure.profiler import Shape, plan, run_sweep

    spec = KernelSpec(name="fake_w4", scheme="w4a16", backend="nvrtc", role="optimized", runner="tests:fake")
    runner = FakeRunner(spec)
    made = runner.make

    def make(M, N, K, *, seed, reference):
        p = made(M, N, K, seed=seed, reference=reference)
        return replace(p, bytes=12345)

    runner.make = make
    groups = []

    def factory(name, group_size=None):
        groups.append(group_size)
        return runner

    points = plan([spec], [Shape("", 32, 128)], [1], cc=90)
    out = tmp_path / "g.parquet"
    kw = dict(cfg=CFG, timer=FakeTimer(runner), runner_factory=factory,
              sampler=NvmlSampler(device=FakeNvmlDevice()), progress=False, log=lambda m: None)
    first = run_sweep(points, out, ENV, group_size=64, **kw)
    again = run_sweep(points, out, ENV, group_size=64, **kw)
    other = run_sweep(points, out, ENV, **kw)
    assert (first.measured, again.measured, again.skipped_done, other.measured) == (1, 0, 1, 1)
    assert groups[0] == 64
    df = other.frame.sort_values("group_size")
    assert list(df["group_size"]) == [64, 128] and set(df["bytes"]) == {12345.0}
