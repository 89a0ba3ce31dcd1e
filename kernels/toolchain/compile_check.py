"""Compile every kernels/*/*.cu for sm_80 and sm_90 with NVRTC, on a machine without a GPU (CI); and every option set
the registered kernels' launchers really compile (`launcher_jobs`), for each kernel's declared minimum architecture.

NVRTC is called directly through ctypes (kernels.toolchain.nvrtc: where the library and the CUDA headers are looked
for), so neither CuPy nor cuda-bindings is needed.

Per-file convention: a line `// arch: sm_90a` (comma- or space-separated list) among the first five lines replaces
the architectures that file is compiled for (for kernels that need sm_90-only features, or the sm_90a target of
wgmma); without it, every architecture of the check is used. A line `// nvrtc-options: -DFOO=1 ...` adds options.
The options are those of kernels.toolchain.build (so what compiles here is what CuPy compiles on the GPU).
"""

from __future__ import annotations

import ctypes
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from kernels.toolchain import build, nvrtc
from kernels.toolchain.build import KERNEL_DIR, NVRTC_OPTIONS, cu_sources, source_path

DEFAULT_ARCHS = ("sm_80", "sm_90")
_ARCH_LINE = re.compile(r"^\s*//\s*arch:\s*(.+)$")
_OPTS_LINE = re.compile(r"^\s*//\s*nvrtc-options:\s*(.+)$")


@dataclass(frozen=True)
class CompileResult:
    source: str
    arch: str
    options: tuple[str, ...]
    ok: bool
    log: str


def nvrtc_library() -> ctypes.CDLL:
    return nvrtc.library()


def cuda_include_dir() -> str | None:
    return nvrtc.include_dir()


def file_directives(path: Path) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """(archs or None, extra options) from the first five lines of a .cu file."""
    archs: tuple[str, ...] | None = None
    opts: tuple[str, ...] = ()
    for line in path.read_text().splitlines()[:5]:
        if m := _ARCH_LINE.match(line):
            archs = tuple(a for a in re.split(r"[,\s]+", m.group(1).strip()) if a)
        if m := _OPTS_LINE.match(line):
            opts = tuple(m.group(1).split())
    return archs, opts


def compile_source(path: Path, arch: str, extra_options: tuple[str, ...] = (),
                   name_expressions: tuple[str, ...] = ()) -> CompileResult:
    """Compile one file to a cubin for `arch` ("sm_90"); never raises for a compile error (ok=False, log)."""
    include = nvrtc.include_dir()
    opts = (f"--gpu-architecture={arch}",) + NVRTC_OPTIONS + ((f"-I{include}",) if include else ()) + extra_options
    r = nvrtc.compile_cubin(path.read_bytes(), path.name, opts, name_expressions)
    log = r.log
    if include is None and not r.ok:
        log += "\n(no CUDA include directory found: install nvidia-cuda-runtime or set CUDA_HOME)"
    return CompileResult(path.name, arch, opts, r.ok, log)


def targets(path: Path, archs: tuple[str, ...] = DEFAULT_ARCHS) -> tuple[str, ...]:
    """The architectures a file is checked for: its `// arch:` list when it has one (which may name targets outside
    the default list, such as sm_90a), else `archs`."""
    file_archs, _ = file_directives(path)
    return archs if file_archs is None else file_archs


def check_all(archs: tuple[str, ...] = DEFAULT_ARCHS, extra_options: tuple[str, ...] = ()) -> list[CompileResult]:
    results = []
    for path in cu_sources():
        _, file_opts = file_directives(path)
        for arch in targets(path, archs):
            results.append(compile_source(path, arch, file_opts + extra_options))
    return results


# Layers whose row tiles (16 channels) per SM span every column of the launch tables on 132 SMs (0.7 to 15 per SM),
# with K of one to several 4096-wide passes, at every batch 1-256.
LAUNCH_SHAPES = ((1536, 8960), (4096, 4096), (4096, 11008), (5120, 5120), (8192, 8192), (12288, 4096),
                 (22016, 4096), (28672, 8192))
LAUNCH_BATCHES = tuple(range(1, 257))

JobGroup = tuple[str, str, tuple[str, ...]]  # (source, arch, options): one NVRTC compile


def launcher_jobs(sms: int = 132) -> dict[JobGroup, set[str]]:
    """Per (source, arch, options), the entries or template expressions the registered NVRTC kernels' runners
    compile (their `compile_jobs`) on a device of each kernel's declared minimum architecture (kernels.toolchain.build.
    planned_device: sm_{min_cc}, `sms` SMs; sm_90a kernels name their own target) over LAUNCH_SHAPES and
    LAUNCH_BATCHES; what the kernel refuses is left out. Plain Python: no GPU, no CuPy."""
    from kernels import registry
    from models.errors import InputError

    groups: dict[JobGroup, set[str]] = defaultdict(set)
    for spec in registry.specs():
        if spec.backend != "nvrtc":
            continue
        with build.planned_device(f"sm_{spec.min_cc}", sms):
            runner = registry.runner(spec.name)
            for N, K in LAUNCH_SHAPES:
                for M in LAUNCH_BATCHES:
                    if not spec.m_min <= M <= spec.m_max:
                        continue
                    try:
                        jobs = runner.compile_jobs(M, N, K)
                    except InputError:
                        continue
                    for source, expression, arch, options in jobs:
                        groups[(source, arch, tuple(options))].add(expression)
    return dict(groups)


def compile_group(group: JobGroup, expressions: set[str]) -> CompileResult:
    """One launcher group compiled as its runner compiles it: template instances as name expressions (extern "C"
    entries need none: one compile holds them all)."""
    source, arch, options = group
    exprs = tuple(sorted(e for e in expressions if not e.isidentifier()))
    return compile_source(source_path(source), arch, options, exprs)


def main() -> int:
    results = check_all()
    for r in results:
        print(f"{'ok  ' if r.ok else 'FAIL'} {r.arch} {r.source}")
        if not r.ok:
            print(r.log)
    print(f"{sum(r.ok for r in results)}/{len(results)} compiled (kernels in {KERNEL_DIR})")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
