"""Every kernels/*/*.cu compiles for sm_80 and sm_90 (or the targets its `// arch:` line names) through NVRTC, with no
GPU (kernels.toolchain.compile_check)."""

from __future__ import annotations

import pytest

from kernels.toolchain import compile_check
from kernels.toolchain.build import cu_sources


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
    _, opts = compile_check.file_directives(path)
    for arch in compile_check.targets(path):
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


_GROUPS = sorted(compile_check.launcher_jobs().items())


@pytest.mark.parametrize(("group", "expressions"), _GROUPS,
                         ids=[f"{src}-{arch}-{' '.join(o.removeprefix('-D') for o in opts)}"
                              for (src, arch, opts), _ in _GROUPS])
def test_every_launcher_option_set_compiles_for_its_minimum_architecture(group, expressions):
    """Each (source, options) a registered kernel's runner compiles at some batch and layer of the launch tables,
    for that kernel's declared minimum architecture (sm_75 for the CUDA-core GEMVs, sm_80, sm_89, sm_90a)."""
    _nvrtc_or_skip()
    r = compile_check.compile_group(group, expressions)
    assert r.ok, f"{group} ({len(expressions)} entries) failed to compile:\n{r.log}"


def test_launcher_jobs_cover_every_table_column_and_kernel():
    from kernels import registry
    from kernels.tcgemv import tc_gemv_w8a16

    groups = compile_check.launcher_jobs()
    sources = {src for src, _, _ in groups}
    assert sources == {s.source for s in registry.specs() if s.backend == "nvrtc"}
    w8 = {opts for (src, arch, opts) in groups if src == "gemv_w8a16_tc.cu"}
    for bf16 in (False, True):
        for _, columns in tc_gemv_w8a16.TABLE:
            assert all(cfg.options(bf16) in w8 for _, cfg in columns)
    assert {arch for (src, arch, _) in groups if src == "gemv_q8_tc.cu"} == {"sm_80", "sm_89"}
    assert {arch for (src, arch, _) in groups if src.startswith("wg_")} == {"sm_90a"}


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


def test_arch_directive_replaces_default_archs(tmp_path):
    f = tmp_path / "wg.cu"
    f.write_text("// arch: sm_90a\nextern \"C\" __global__ void k() {}\n")
    assert compile_check.targets(f) == ("sm_90a",)
    g = tmp_path / "plain.cu"
    g.write_text("extern \"C\" __global__ void k() {}\n")
    assert compile_check.targets(g, ("sm_80",)) == ("sm_80",)


@pytest.mark.parametrize("op", ["OpBF16", "OpFP16", "OpW8A8", "OpFP8"])
def test_wgmma_tiles_compile_for_sm90a(op):
    """Every tile of WG_TILES and WG_BANDS, and the tiles the GPU test forces, instantiate for sm_90a (the template
    is compiled only through name expressions, so the plain file check above compiles none of it)."""
    from kernels.toolchain import nvrtc
    from kernels.toolchain.build import source_path
    from kernels.wgmma import wgmma

    _nvrtc_or_skip()
    tables = [wgmma.WG_TILES] + [table for _, table in wgmma.WG_BANDS]
    tiles = {(bm, t.warpgroups, t.stages, t.kt) for table in tables for bm, t in table.items()}
    tiles |= {(16, 1, 8, 128), (64, 2, 3, 128)}
    exprs = tuple(f"wg_gemm<wg::{op}, {bm}, {g}, {s}, {kt}>" for bm, g, s, kt in sorted(tiles))
    exprs += tuple(f"wg_gemm_tma<wg::{op}, {bm}, {g}, {mb}, {s}, {kt}>" for bm, g, s, kt in sorted(tiles)
                   for mb in (1, 2) if mb * bm <= 256)
    r = compile_check.compile_source(source_path("wg_gemm.cu"), "sm_90a", (), exprs)
    assert r.ok, r.log
    compiled = nvrtc.compile_cubin(source_path("wg_gemm.cu").read_bytes(), "wg_gemm.cu", r.options, exprs[:1])
    assert compiled.ok and len(compiled.cubin) > 1000 and compiled.lowered[exprs[0]].startswith("_Z7wg_gemm")


@pytest.mark.parametrize("source", ["wg_gemm.cu", "wg_gemm_w4a16.cu"])
def test_wgmma_cluster_instances_compile_for_sm90a(source):
    """The cluster kernels (a split tile's pieces summed in distributed shared memory) of every registered batch tile
    at 2, 4 and 8 pieces, through the runners' own name expressions."""
    from dataclasses import replace

    from kernels import registry
    from kernels.toolchain.build import source_path
    from kernels.wgmma import wgmma

    _nvrtc_or_skip()
    exprs = []
    for name in ("wg_fp8", "wg_bf16", "wg_w8a8") if source == "wg_gemm.cu" else ("wg_w4a16",):
        runner = registry.runner(name)
        for M in sorted(wgmma.W4_TILES if name == "wg_w4a16" else wgmma.WG_TILES):
            for N in (8192, 4096, 2048):  # the wide tiles and the narrow bands' (WG_BANDS)
                exprs += [runner._expression(replace(runner.config(M, N, 4096), cluster=s)) for s in (2, 4, 8)]
        exprs = list(dict.fromkeys(exprs))
    r = compile_check.compile_source(source_path(source), "sm_90a", (), tuple(exprs))
    assert r.ok, r.log


def test_wgmma_w4a16_tiles_compile_for_sm90a():
    from kernels.toolchain.build import source_path
    from kernels.wgmma import wgmma

    _nvrtc_or_skip()
    tiles = {(bm, t.warpgroups, t.mb, t.stages) for bm, t in wgmma.W4_TILES.items()}
    tiles |= {(16, 2, 2, 8), (64, 1, 2, 3), (16, 2, 1, 6), (128, 2, 1, 5), (64, 4, 1, 4)}
    exprs = tuple(f"wg_gemm_w4a16<{bm}, {g}, {mb}, {s}>" for bm, g, mb, s in sorted(tiles))
    r = compile_check.compile_source(source_path("wg_gemm_w4a16.cu"), "sm_90a", (), exprs)
    assert r.ok, r.log


def test_wgmma_header_is_generated():
    from kernels.wgmma import gen_wg_mma

    assert gen_wg_mma.HEADER.read_text() == gen_wg_mma.render(), "run: python -m kernels.wgmma.gen_wg_mma"


def test_cached_cubin_compiles_once_and_reports_errors(tmp_path, monkeypatch):
    """kernels.toolchain.build's sm_90a path without a GPU: the cubin is written once and reused; a bad instance raises
    with NVRTC's log."""
    from kernels.toolchain import build

    _nvrtc_or_skip()
    monkeypatch.setenv("WORKBENCH_CUBIN_CACHE", str(tmp_path))
    expr = "wg_gemm_w4a16<16, 1, 2, 6>"
    cubin, lowered = build.cached_cubin("wg_gemm_w4a16.cu", expr, "sm_90a")
    assert cubin.parent == tmp_path and cubin.stat().st_size > 1000 and lowered.startswith("_Z13wg_gemm_w4a16")
    stamp = cubin.stat().st_mtime_ns
    assert build.cached_cubin("wg_gemm_w4a16.cu", expr, "sm_90a") == (cubin, lowered)
    assert cubin.stat().st_mtime_ns == stamp  # served from the cache
    with pytest.raises(RuntimeError, match="NVRTC could not compile"):
        build.cached_cubin("wg_gemm_w4a16.cu", "wg_gemm_w4a16<16, 1, 2, 1>", "sm_90a")  # static_assert: 2+ stages


def test_a_virtual_target_gives_ptx_of_that_architecture():
    """The PTX build path: compute_80 compiles to PTX text for .target sm_80 (the driver JIT-compiles it on the GPU),
    cached as .ptx beside the cubins."""
    from kernels.toolchain import build, nvrtc
    from kernels.toolchain.build import source_path

    _nvrtc_or_skip()
    r = compile_check.compile_source(source_path("gemv_w8a16_tc.cu"), "compute_80", ("-DTCW_NT=2",))
    assert r.ok, r.log
    compiled = nvrtc.compile_cubin(source_path("gemv_w8a16_tc.cu").read_bytes(), "gemv_w8a16_tc.cu", r.options)
    text = compiled.cubin.decode(errors="replace")
    assert ".target sm_80" in text and "mma.sync.aligned.m16n8k16" in text and ".entry gemv_w8a16_tc" in text
    path, entry = build.cached_cubin("gemv_w8a16_tc.cu", "gemv_w8a16_tc", "compute_80", ("-DTCW_NT=2",))
    assert path.suffix == ".ptx" and entry == "gemv_w8a16_tc"


def test_ptx_target_maps_every_request_and_records_loads():
    from kernels.toolchain import build

    assert build.resolve_target("sm_90") == "sm_90"
    with build.ptx_target("compute_80") as loaded:
        assert build.resolve_target("sm_90") == "compute_80" and build.resolve_target("sm_89") == "compute_80"
        assert build.resolve_target("sm_90a") == "compute_90a"  # architecture-specific code has no older path
        with build.ptx_target("compute_89"):
            assert build.resolve_target("sm_90") == "compute_89"
        assert build.resolve_target("sm_90") == "compute_80" and loaded == []
    assert build.resolve_target("sm_90") == "sm_90"
    with pytest.raises(ValueError, match="virtual architecture such as compute_80"):
        with build.ptx_target("sm_80"):
            pass


def test_planned_device_answers_for_an_absent_gpu():
    from kernels import launch
    from kernels.tensorcore import tensorcore
    from kernels.toolchain import build

    with build.planned_device("sm_80", 108):
        assert build.device_arch() == "sm_80" and launch.device_sms() == 108 == tensorcore.device_sms()
    assert build.planned_sms() == 0


def test_chapter_kernel_keeps_nvccs_unrolled_loop():
    """gemv_w4_m1 (the chapter's program at M = 1) as nvcc 13.0 compiles it has two weight words' loads in flight per
    lane: nvcc unrolls the loop by 2 on its own, NVRTC does not (1.05-1.2x slower), so the source carries the pragma.
    Its PTX has more global loads than the same source without it."""
    _nvrtc_or_skip()
    from kernels.gemv import gemv
    from kernels.toolchain import nvrtc
    from kernels.toolchain.build import source_path

    source = source_path("gemv_reference.cu").read_text()
    opts = ("--gpu-architecture=compute_90", *gemv.choose_config("gemv_w4_ref", 1, 22016, 4096).options())

    def loads(text: str) -> int:
        ptx = nvrtc.compile_cubin(text.encode(), "gemv_reference.cu", opts).cubin.decode()
        body = ptx[ptx.index(".entry gemv_w4_m1"):]
        return body[:body.find(".entry ", 1) if ".entry " in body[1:] else None].count("ld.global")

    assert source.count("#pragma unroll 2\n") == 1
    assert loads(source) >= loads(source.replace("#pragma unroll 2\n", "")) + 3
