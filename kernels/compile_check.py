"""Compile every kernels/*.cu for sm_80 and sm_90 with NVRTC, on a machine without a GPU (CI).

NVRTC is called directly through ctypes (libnvrtc from the `nvidia-cuda-nvrtc` pip package, a CUDA toolkit, or
$CUDA_HOME), so neither CuPy nor cuda-bindings is needed. CUDA headers (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h) come from
the first include directory found among: $CUDA_HOME/include, $CUDA_PATH/include, the nvidia-* pip packages'
include folders (e.g. nvidia-cuda-runtime's), /usr/local/cuda/include.

Per-file convention: a line `// arch: sm_90` (comma- or space-separated list) among the first five lines restricts
the architectures that file is compiled for (for kernels that need sm_90-only features); without it, every
architecture of the check is used. A line `// nvrtc-options: -DFOO=1 ...` adds options. The options are those of
kernels.build (so what compiles here is what CuPy compiles on the GPU).
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kernels.build import KERNEL_DIR, NVRTC_OPTIONS, cu_sources

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


def _site_dirs() -> list[Path]:
    dirs = []
    for p in sys.path:
        d = Path(p) / "nvidia"
        if d.is_dir():
            dirs.append(d)
    return dirs


@cache
def nvrtc_library() -> ctypes.CDLL:
    candidates: list[str] = []
    for d in _site_dirs():
        candidates += sorted(glob.glob(str(d / "*" / "lib" / "libnvrtc.so*")))
        candidates += sorted(glob.glob(str(d / "*" / "bin" / "nvrtc64_*.dll")))
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates += sorted(glob.glob(os.path.join(os.environ[env], "lib64", "libnvrtc.so*")))
    candidates += sorted(glob.glob("/usr/local/cuda/lib64/libnvrtc.so*")) + ["libnvrtc.so"]
    for c in candidates:
        if "builtins" in c:
            continue
        try:
            return ctypes.CDLL(c)
        except OSError:
            continue
    raise RuntimeError("no NVRTC library found: pip install nvidia-cuda-nvrtc, or set CUDA_HOME")


@cache
def cuda_include_dir() -> str | None:
    candidates = [os.path.join(os.environ[e], "include") for e in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(e)]
    for d in _site_dirs():
        candidates += sorted(glob.glob(str(d / "*" / "include")))
    candidates.append("/usr/local/cuda/include")
    for c in candidates:
        if os.path.isfile(os.path.join(c, "cuda_fp16.h")):
            return c
    return None


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


def compile_source(path: Path, arch: str, extra_options: tuple[str, ...] = ()) -> CompileResult:
    """Compile one file to a cubin for `arch` ("sm_90"); never raises for a compile error (ok=False, log)."""
    lib = nvrtc_library()
    include = cuda_include_dir()
    opts = (f"--gpu-architecture={arch}",) + NVRTC_OPTIONS + ((f"-I{include}",) if include else ()) + extra_options
    prog = ctypes.c_void_p()
    src = path.read_bytes()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), src, path.name.encode(), 0, None, None)
    if rc:
        return CompileResult(path.name, arch, opts, False, f"nvrtcCreateProgram failed with code {rc}")
    try:
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(max(size.value, 1))
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        if include is None and rc:
            log += "\n(no CUDA include directory found: install nvidia-cuda-runtime or set CUDA_HOME)"
        return CompileResult(path.name, arch, opts, rc == 0, log)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def check_all(archs: tuple[str, ...] = DEFAULT_ARCHS, extra_options: tuple[str, ...] = ()) -> list[CompileResult]:
    results = []
    for path in cu_sources():
        file_archs, file_opts = file_directives(path)
        for arch in archs:
            if file_archs is not None and arch not in file_archs:
                continue
            results.append(compile_source(path, arch, file_opts + extra_options))
    return results


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
