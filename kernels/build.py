"""Compiling our `.cu` files: NVRTC through ctypes (kernels.nvrtc) into a disk cache of cubins, loaded by CuPy.

One path for every kernel: `function` (extern "C" entry points, for the current device's architecture) and
`arch_function` (template instances or named targets such as sm_90a) both go through `cached_cubin`, so a second
run pays no NVRTC time and `prewarm` can fill the cache from several processes at once (NVRTC needs no GPU): the
profiler compiles every kernel a sweep needs that way before it measures anything.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
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
def device_arch() -> str:
    """The current device's real architecture, e.g. "sm_90" (what `function` compiles for)."""
    import cupy

    return f"sm_{cupy.cuda.Device().compute_capability}"  # CuPy gives "90" for 9.0


def function(name: str, entry: str, extra_options: tuple[str, ...] = ()) -> Any:
    """A compiled kernel function: kernels/<name>, extern "C" entry point <entry>, for the current device."""
    return arch_function(name, entry, device_arch(), extra_options)


def _cache_entry(name: str, expression: str, arch: str,
                 extra_options: tuple[str, ...]) -> tuple[Path, Path, tuple[str, ...], bytes]:
    """(cubin path, lowered-names path, NVRTC options, source) of one compile."""
    from kernels import nvrtc

    include = nvrtc.include_dir()
    opts = (f"--gpu-architecture={arch}",) + NVRTC_OPTIONS + ((f"-I{include}",) if include else ()) + extra_options
    source = source_path(name).read_bytes()
    key = hashlib.sha256(source)
    for header in sorted(KERNEL_DIR.glob("*.cuh")):
        key.update(header.read_bytes())
    key.update("\0".join(opts + ("" if expression.isidentifier() else expression,)).encode())
    stem = _cubin_cache_dir() / key.hexdigest()[:24]
    return stem.with_suffix(".cubin"), stem.with_suffix(".json"), opts, source


def _is_cached(name: str, expression: str, arch: str, extra_options: tuple[str, ...] = ()) -> bool:
    cubin, meta, _, _ = _cache_entry(name, expression, arch, extra_options)
    return cubin.is_file() and meta.is_file()


def _cubin_cache_dir() -> Path:
    return Path(os.environ.get("WORKBENCH_CUBIN_CACHE", Path.home() / ".cache" / "roofline-workbench" / "cubin"))


def cached_cubin(name: str, expression: str, arch: str, extra_options: tuple[str, ...] = ()) -> tuple[Path, str]:
    """(cubin path, mangled entry name) of template instance `expression` of kernels/<name> compiled for `arch` by
    kernels.nvrtc (no GPU needed). Cubins are cached on disk ($WORKBENCH_CUBIN_CACHE, else ~/.cache/...) by a hash of
    the source, every header of kernels/, the options and the expression; a compile error raises RuntimeError with
    NVRTC's log."""
    from kernels import nvrtc

    cubin, meta, opts, source = _cache_entry(name, expression, arch, extra_options)
    plain = expression.isidentifier()  # extern "C" names: one cubin per (source, options) holds them all
    if not (cubin.is_file() and meta.is_file()):
        result = nvrtc.compile_cubin(source, name, opts, () if plain else (expression,))
        if not result.ok:
            raise RuntimeError(f"NVRTC could not compile {expression} of {name} for {arch}:\n{result.log}")
        cubin.parent.mkdir(parents=True, exist_ok=True)
        for path, data in ((cubin, result.cubin), (meta, json.dumps(result.lowered).encode())):
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(data)
            tmp.replace(path)
    if plain:
        return cubin, expression
    return cubin, json.loads(meta.read_text())[expression]


@cache
def arch_function(name: str, expression: str, arch: str, extra_options: tuple[str, ...] = ()) -> Any:
    """Template instance `expression` (or extern "C" entry) of kernels/<name>, compiled for `arch` (sm_90, or an
    architecture-specific target such as sm_90a, which wgmma needs) by `cached_cubin`, loaded into CuPy."""
    cubin, lowered = cached_cubin(name, expression, arch, extra_options)
    return _loaded(str(cubin)).get_function(lowered)


@cache
def _loaded(cubin: str) -> Any:
    import cupy

    return cupy.RawModule(path=cubin)


Job = tuple[str, str, str, tuple[str, ...]]  # (source file, entry or template expression, arch, extra options)


def _compile_job(job: Job) -> str:
    try:
        cached_cubin(*job)
    except (RuntimeError, OSError) as exc:
        return f"{job[0]} {job[1]}: {str(exc).splitlines()[0]}"
    return ""


def prewarm(jobs: Iterable[Job], workers: int | None = None) -> tuple[int, list[str]]:
    """Compile every job not yet in the cubin cache, in parallel processes (NVRTC needs no GPU); returns how many
    were compiled and one line per compile that failed (the kernel's first use raises the full NVRTC log)."""
    by_cubin = {_cache_entry(*j)[0]: j for j in sorted(set(jobs))}  # extern "C" entries of one module: one compile
    todo = [j for j in by_cubin.values() if not _is_cached(*j)]
    n = max(1, min(len(todo), workers or (os.cpu_count() or 1)))
    if n == 1:
        errors = [_compile_job(j) for j in todo]
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn")) as ex:
            errors = list(ex.map(_compile_job, todo))
    return len(todo), [e for e in errors if e]
