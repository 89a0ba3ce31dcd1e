"""Compiling our `.cu` files: through CuPy's NVRTC on a GPU machine, cached per process.

CuPy also caches compiled cubins on disk (~/.cupy/kernel_cache), so a second run pays no NVRTC time.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

KERNEL_DIR = Path(__file__).resolve().parent
NVRTC_OPTIONS: tuple[str, ...] = ("-std=c++17", f"-I{KERNEL_DIR}")


def source_path(name: str) -> Path:
    path = KERNEL_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"no kernel source {name} in {KERNEL_DIR}")
    return path


def cu_sources() -> list[Path]:
    """Every CUDA source file of the project (what the CPU compile check covers)."""
    return sorted(KERNEL_DIR.glob("*.cu"))


@cache
def module(name: str, extra_options: tuple[str, ...] = ()) -> Any:
    """The CuPy RawModule for kernels/<name> (compiled on first use of one of its functions)."""
    import cupy

    code = source_path(name).read_text()
    return cupy.RawModule(code=code, options=NVRTC_OPTIONS + extra_options)


@cache
def function(name: str, entry: str, extra_options: tuple[str, ...] = ()) -> Any:
    """A compiled kernel function: kernels/<name>, extern "C" entry point <entry>."""
    return module(name, extra_options).get_function(entry)


def _cubin_cache_dir() -> Path:
    return Path(os.environ.get("WORKBENCH_CUBIN_CACHE", Path.home() / ".cache" / "roofline-workbench" / "cubin"))


def cached_cubin(name: str, expression: str, arch: str, extra_options: tuple[str, ...] = ()) -> tuple[Path, str]:
    """(cubin path, mangled entry name) of template instance `expression` of kernels/<name> compiled for `arch` by
    kernels.nvrtc (no GPU needed). Cubins are cached on disk ($WORKBENCH_CUBIN_CACHE, else ~/.cache/...) by a hash of
    the source, every header of kernels/, the options and the expression; a compile error raises RuntimeError with
    NVRTC's log."""
    from kernels import nvrtc

    include = nvrtc.include_dir()
    opts = (f"--gpu-architecture={arch}",) + NVRTC_OPTIONS + ((f"-I{include}",) if include else ()) + extra_options
    source = source_path(name).read_bytes()
    key = hashlib.sha256(source)
    for header in sorted(KERNEL_DIR.glob("*.cuh")):
        key.update(header.read_bytes())
    key.update("\0".join(opts + (expression,)).encode())
    folder = _cubin_cache_dir()
    cubin, meta = folder / f"{key.hexdigest()[:24]}.cubin", folder / f"{key.hexdigest()[:24]}.json"
    if not (cubin.is_file() and meta.is_file()):
        result = nvrtc.compile_cubin(source, name, opts, (expression,))
        if not result.ok:
            raise RuntimeError(f"NVRTC could not compile {expression} of {name} for {arch}:\n{result.log}")
        folder.mkdir(parents=True, exist_ok=True)
        for path, data in ((cubin, result.cubin), (meta, json.dumps(result.lowered).encode())):
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(data)
            tmp.replace(path)
    return cubin, json.loads(meta.read_text())[expression]


@cache
def arch_function(name: str, expression: str, arch: str, extra_options: tuple[str, ...] = ()) -> Any:
    """Template instance `expression` of kernels/<name>, compiled for an architecture-specific target (sm_90a, which
    wgmma needs and CuPy's own NVRTC call does not name) by `cached_cubin`, and loaded into CuPy from the cubin."""
    import cupy

    cubin, lowered = cached_cubin(name, expression, arch, extra_options)
    return cupy.RawModule(path=str(cubin)).get_function(lowered)
