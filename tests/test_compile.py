"""Every kernels/*.cu compiles for sm_80 and sm_90 through NVRTC, with no GPU (kernels.compile_check)."""

from __future__ import annotations

import pytest

from kernels import compile_check
from kernels.build import cu_sources


def _nvrtc_or_skip() -> None:
    try:
        compile_check.nvrtc_library()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    if compile_check.cuda_include_dir() is None:
        pytest.skip("no CUDA headers (cuda_fp16.h): pip install nvidia-cuda-runtime or set CUDA_HOME")


@pytest.mark.parametrize("path", cu_sources(), ids=lambda p: p.name)
def test_every_kernel_compiles(path):
    _nvrtc_or_skip()
    archs, opts = compile_check.file_directives(path)
    for arch in compile_check.DEFAULT_ARCHS:
        if archs is not None and arch not in archs:
            continue
        r = compile_check.compile_source(path, arch, opts)
        assert r.ok, f"{path.name} for {arch} failed to compile:\n{r.log}"


@pytest.mark.parametrize("options", [("-DGEMV_MB=16", "-DGEMV_RW=2", "-DGEMV_U=2", "-DGEMV_XREG=0"),
                                     ("-DGEMV_MB=3", "-DGEMV_RW=4", "-DGEMV_U=1", "-DGEMV_XREG=1")])
def test_gemv_configs_compile(options):
    _nvrtc_or_skip()
    for path in cu_sources():
        if path.name.startswith("gemv_"):
            r = compile_check.compile_source(path, "sm_90", options)
            assert r.ok, f"{path.name} {options}:\n{r.log}"


def test_broken_kernel_fails_with_log(tmp_path):
    _nvrtc_or_skip()
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k(float* y) { y[0] = undefined_name; }\n')
    r = compile_check.compile_source(bad, "sm_90")
    assert not r.ok and "undefined_name" in r.log


def test_arch_directive(tmp_path):
    f = tmp_path / "hopper.cu"
    f.write_text("// arch: sm_90\n// nvrtc-options: -DX=1\nextern \"C\" __global__ void k() {}\n")
    assert compile_check.file_directives(f) == (("sm_90",), ("-DX=1",))
