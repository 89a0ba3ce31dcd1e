"""NVRTC called directly through ctypes: compile CUDA source to a cubin with no GPU, no CuPy, no cuda-bindings.

Used by the CPU compile check (kernels.toolchain.compile_check) and by kernels.toolchain.build for sources that need an
architecture-specific target CuPy's own NVRTC call does not take (sm_90a for wgmma). The library is $WORKBENCH_NVRTC
when set (a path: to check against the NVRTC version of a GPU machine), else the one of the `nvidia-cuda-nvrtc` pip
package, $CUDA_HOME/$CUDA_PATH, or /usr/local/cuda; CUDA headers (cuda_fp16.h ...) from the
first include directory found among $CUDA_HOME/include, $CUDA_PATH/include, the nvidia-* pip packages' include
folders and /usr/local/cuda/include.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class Compiled:
    ok: bool
    log: str
    cubin: bytes = b""  # the image: a cubin, or PTX text (NUL-terminated) for a virtual compute_XX target
    lowered: dict[str, str] = field(default_factory=dict)  # name expression -> mangled entry name


def _site_dirs() -> list[Path]:
    return [Path(p) / "nvidia" for p in sys.path if (Path(p) / "nvidia").is_dir()]


@cache
def library() -> ctypes.CDLL:
    candidates: list[str] = [os.environ["WORKBENCH_NVRTC"]] if os.environ.get("WORKBENCH_NVRTC") else []
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
        # some NVRTC releases (13.0) dlopen their builtins library by name only: load the one beside it first
        for builtins in sorted(glob.glob(os.path.join(os.path.dirname(c), "libnvrtc-builtins.so*"))):
            if ".alt." not in builtins:
                try:
                    ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    pass
        try:
            return ctypes.CDLL(c)
        except OSError:
            continue
    raise RuntimeError("no NVRTC library found: pip install nvidia-cuda-nvrtc, or set CUDA_HOME")


@cache
def include_dir() -> str | None:
    candidates = [os.path.join(os.environ[e], "include") for e in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(e)]
    for d in _site_dirs():
        candidates += sorted(glob.glob(str(d / "*" / "include")))
    candidates.append("/usr/local/cuda/include")
    for c in candidates:
        if os.path.isfile(os.path.join(c, "cuda_fp16.h")):
            return c
    return None


def compile_cubin(source: bytes, name: str, options: tuple[str, ...],
                  name_expressions: tuple[str, ...] = ()) -> Compiled:
    """Compile `source` with `options` (which name the target, e.g. --gpu-architecture=sm_90a); never raises for a
    compile error (ok=False and the log). For a virtual target (--gpu-architecture=compute_80) the image returned
    in `cubin` is PTX text, which the driver JIT-compiles for the device it is loaded on."""
    lib = library()
    lib.nvrtcGetLoweredName.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source, name.encode(), 0, None, None)
    if rc:
        return Compiled(False, f"nvrtcCreateProgram failed with code {rc}")
    try:
        for expr in name_expressions:
            lib.nvrtcAddNameExpression(prog, expr.encode())
        arr = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = lib.nvrtcCompileProgram(prog, len(options), arr)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(max(size.value, 1))
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        if rc:
            return Compiled(False, log)
        virtual = any(o.startswith("--gpu-architecture=compute_") for o in options)
        get_size, get = ((lib.nvrtcGetPTXSize, lib.nvrtcGetPTX) if virtual
                         else (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN))
        get_size(prog, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        if size.value == 0 or get(prog, cubin):
            return Compiled(False, log + "\nno image (the target must be an sm_XX or compute_XX architecture)")
        lowered = {}
        for expr in name_expressions:
            out = ctypes.c_char_p()
            lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(out))
            lowered[expr] = out.value.decode()
        return Compiled(True, log, cubin.raw, lowered)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
