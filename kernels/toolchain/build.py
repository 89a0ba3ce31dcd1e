"""Compiling our `.cu` files: NVRTC through ctypes (kernels.toolchain.nvrtc) into a disk cache of cubins, loaded by
CuPy.

One path for every kernel: `function` (extern "C" entry points, for the current device's architecture) and
`arch_function` (template instances or named targets such as sm_90a) both go through `cached_cubin`, so a second
run pays no NVRTC time and `prewarm` can fill the cache from several processes at once (NVRTC needs no GPU): the
profiler compiles every kernel a sweep needs that way (`CompilePool`), measuring each kernel as soon as its cubins
are there while the others compile.

Two ways to build for a device that is not the one here:
- `ptx_target("compute_80")`: inside the block every kernel loaded is compiled to PTX of that virtual architecture
  and JIT-compiled by the driver for this device, so an H200 runs the code path an A100 (compute_80) or L40S
  (compute_89) takes (`__CUDA_ARCH__` < 900); `$WORKBENCH_PTX_TARGET` sets it for a whole process.
- `planned_device("sm_80", sms)`: `device_arch()` and kernels.launch's SM count answer for that device with no GPU
  asked, so the runners' `compile_jobs` give the jobs they would compile there (the CPU compile check).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

KERNEL_DIR = Path(__file__).resolve().parents[1]  # kernels/: each family's folder holds its .cu and .cuh files
CUDA_SUFFIXES = (".cu", ".cuh")


def cuda_files() -> list[Path]:
    """Every .cu and .cuh file under kernels/, in whichever family's folder (file names are unique across them)."""
    return sorted(p for p in KERNEL_DIR.rglob("*") if p.suffix in CUDA_SUFFIXES)


# One include path per folder that holds CUDA files: `#include "gemv_common.cuh"` finds a header (or a kernel that
# another includes, as the grouped kernels do) by its file name, whichever family it lives in.
SOURCE_DIRS: tuple[Path, ...] = tuple(sorted({p.parent for p in cuda_files()}))
NVRTC_OPTIONS: tuple[str, ...] = ("-std=c++17", *(f"-I{d}" for d in SOURCE_DIRS))


@cache
def _by_name() -> dict[str, Path]:
    return {p.name: p for p in cuda_files()}


def source_path(name: str) -> Path:
    """The .cu/.cuh file named `name` (a bare file name, as the launchers and KernelSpec.source give it)."""
    path = _by_name().get(name)
    if path is None or not path.is_file():
        raise FileNotFoundError(f"no kernel source {name} under {KERNEL_DIR}")
    return path


def cu_sources() -> list[Path]:
    """Every CUDA source file of the project (what the CPU compile check covers)."""
    return [p for p in cuda_files() if p.suffix == ".cu"]


_PLANNED: list[tuple[str, int]] = []  # planned_device's (arch, SMs), innermost last
_PTX: list[tuple[str, list[tuple[str, str, Any]]]] = []  # ptx_target's (target, what was loaded), innermost last
_VIRTUAL = re.compile(r"^compute_\d+[af]?$")


def device_arch() -> str:
    """The current device's real architecture, e.g. "sm_90" (what `function` compiles for), or the planned one."""
    return _PLANNED[-1][0] if _PLANNED else _device_arch()


@cache
def _device_arch() -> str:
    import cupy

    return f"sm_{cupy.cuda.Device().compute_capability}"  # CuPy gives "90" for 9.0


def planned_sms() -> int:
    """The SM count of the planned device (planned_device), 0 outside one."""
    return _PLANNED[-1][1] if _PLANNED else 0


@contextmanager
def planned_device(arch: str, sms: int = 132) -> Iterator[None]:
    """Inside the block `device_arch()` is `arch` ("sm_80") and kernels.launch.device_sms() is `sms`, with no GPU
    asked: the runners' `compile_jobs` plan for that device."""
    _PLANNED.append((arch, sms))
    try:
        yield
    finally:
        _PLANNED.pop()


def check_virtual(target: str) -> str:
    """A virtual architecture such as "compute_80" (or compute_90a); ValueError in one line otherwise."""
    if not _VIRTUAL.match(target):
        raise ValueError(f"a PTX target is a virtual architecture such as compute_80 or compute_90a, got {target!r}")
    return target


@contextmanager
def ptx_target(target: str) -> Iterator[list[tuple[str, str, Any]]]:
    """Inside the block, every kernel loaded (`function`, `arch_function`, `module`) is compiled to PTX of `target`
    ("compute_80") and JIT-compiled by the driver for this device: the code path of that older GPU, run here. A
    request for an architecture-specific target (sm_90a) becomes its own virtual one (compute_90a): that code has no
    older path. Yields the list of (source, target compiled, loaded function or module) filled inside the block."""
    loaded: list[tuple[str, str, Any]] = []
    _PTX.append((check_virtual(target), loaded))
    try:
        yield loaded
    finally:
        _PTX.pop()


def _ptx_default() -> str | None:
    env = os.environ.get("WORKBENCH_PTX_TARGET", "")
    return check_virtual(env) if env else None


def resolve_target(arch: str) -> str:
    """What a request for `arch` compiles for: itself, or under ptx_target (or $WORKBENCH_PTX_TARGET) the virtual
    target (an sm_XXa / sm_XXf request: compute_XXa / compute_XXf)."""
    target = _PTX[-1][0] if _PTX else _ptx_default()
    if target is None or not arch.startswith("sm_"):
        return arch
    return "compute_" + arch[3:] if arch[-1] in "af" else target


def _record(name: str, target: str, obj: Any) -> Any:
    if _PTX:
        _PTX[-1][1].append((name, target, obj))
    return obj


def module(name: str, extra_options: tuple[str, ...] = ()) -> Any:
    """The CuPy RawModule of kernels/*/<name> with every extern "C" entry, for the current device (via the cache)."""
    target = resolve_target(device_arch())
    try:
        return _record(name, target, _module(name, target, extra_options))
    except NotCached:
        return _stand_in(name, "module", target)


@cache
def _module(name: str, target: str, extra_options: tuple[str, ...]) -> Any:
    cubin, _ = cached_cubin(name, "module", target, extra_options)  # any plain name: one cubin per module
    return _loaded(str(cubin))


def function(name: str, entry: str, extra_options: tuple[str, ...] = ()) -> Any:
    """A compiled kernel function: kernels/*/<name>, extern "C" entry point <entry>, for the current device."""
    return arch_function(name, entry, device_arch(), extra_options)


def _cache_entry(name: str, expression: str, arch: str,
                 extra_options: tuple[str, ...]) -> tuple[Path, Path, tuple[str, ...], bytes]:
    """(cubin path, lowered-names path, NVRTC options, source) of one compile."""
    from kernels.toolchain import nvrtc

    include = nvrtc.include_dir()
    opts = (f"--gpu-architecture={arch}",) + NVRTC_OPTIONS + ((f"-I{include}",) if include else ()) + extra_options
    source = source_path(name).read_bytes()
    key = hashlib.sha256(source)
    key.update(_headers(tuple((p, p.stat().st_mtime_ns) for p in _by_name().values() if p.suffix == ".cuh")))
    key.update("\0".join(opts + ("" if expression.isidentifier() else expression,)).encode())
    stem = _cubin_cache_dir() / key.hexdigest()[:24]
    image = stem.with_suffix(".ptx" if arch.startswith("compute_") else ".cubin")
    return image, stem.with_suffix(".json"), opts, source


@cache
def _headers(stamps: tuple[tuple[Path, int], ...]) -> bytes:
    """Every header's bytes in path order (part of each cubin's cache key), read again only when one changed: a sweep
    looks its cubins up some 500 times."""
    return b"".join(path.read_bytes() for path, _ in stamps)


def _is_cached(name: str, expression: str, arch: str, extra_options: tuple[str, ...] = ()) -> bool:
    cubin, meta, _, _ = _cache_entry(name, expression, arch, extra_options)
    return cubin.is_file() and meta.is_file()


_LOCAL = threading.local()  # cached_only's list of missing cubins, per thread (None: compile as usual)


class NotCached(RuntimeError):
    """A cubin asked for inside `cached_only()` that is not in the cubin cache: nothing was compiled."""


@contextmanager
def cached_only() -> Iterator[list[str]]:
    """Inside the block, in this thread only, nothing is compiled: `cached_cubin` raises NotCached for a cubin not in
    the cache, and `function` / `arch_function` / `module` hand back an `Unbuilt` stand-in for it (kept in no cache,
    it launches nothing). The profiler's warm-up threads prepare every runner's inputs this way while the
    background processes compile (workbench.measure.warm_up): no compile twice, no wait on one. Yields the list
    of "source expression target" lines that were stood in for."""
    missing: list[str] = []
    before = getattr(_LOCAL, "missing", None)
    _LOCAL.missing = missing
    try:
        yield missing
    finally:
        _LOCAL.missing = before


class Unbuilt:
    """A kernel whose cubin is not in the cache yet (cached_only): what runners read of a CuPy RawKernel while they
    make a problem, and a call that launches nothing; `kernel` (the CUfunction) raises RuntimeError."""

    num_regs = 32
    max_threads_per_block = 1024
    shared_size_bytes = 0
    max_dynamic_shared_size_bytes = 0

    def __init__(self, name: str, expression: str) -> None:
        self.name = name
        self.expression = expression

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None

    def get_function(self, expression: str) -> Unbuilt:
        return Unbuilt(self.name, expression)

    @property
    def kernel(self) -> Any:
        raise RuntimeError(f"{self.name} {self.expression} is not built yet (kernels.toolchain.build.cached_only)")


def _stand_in(name: str, expression: str, target: str) -> Unbuilt:
    _LOCAL.missing.append(f"{name} {expression} {target}")
    return Unbuilt(name, expression)


def _cubin_cache_dir() -> Path:
    return Path(os.environ.get("WORKBENCH_CUBIN_CACHE", Path.home() / ".cache" / "roofline-workbench" / "cubin"))


def cached_cubin(name: str, expression: str, arch: str, extra_options: tuple[str, ...] = ()) -> tuple[Path, str]:
    """(cubin path, mangled entry name) of template instance `expression` of kernels/*/<name> compiled for `arch` by
    kernels.toolchain.nvrtc (no GPU needed; a virtual compute_XX arch gives a .ptx file). Cubins are cached on disk
    ($WORKBENCH_CUBIN_CACHE, else ~/.cache/...) by a hash of the source, every header of kernels/, the options and
    the expression; a compile error raises RuntimeError with NVRTC's log."""
    from kernels.toolchain import nvrtc

    cubin, meta, opts, source = _cache_entry(name, expression, arch, extra_options)
    plain = expression.isidentifier()  # extern "C" names: one cubin per (source, options) holds them all
    if not (cubin.is_file() and meta.is_file()):
        if getattr(_LOCAL, "missing", None) is not None:
            raise NotCached(f"{name} {expression} {arch}: not in the cubin cache")
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


def arch_function(name: str, expression: str, arch: str, extra_options: tuple[str, ...] = ()) -> Any:
    """Template instance `expression` (or extern "C" entry) of kernels/*/<name>, compiled for `arch` (sm_90, or an
    architecture-specific target such as sm_90a, which wgmma needs; under ptx_target, PTX: resolve_target) by
    `cached_cubin`, loaded into CuPy."""
    target = resolve_target(arch)
    try:
        return _record(name, target, _arch_function(name, expression, target, extra_options))
    except NotCached:  # cached_only: compiling elsewhere (or never asked for); a stand-in, kept nowhere
        return _stand_in(name, expression, target)


@cache
def _arch_function(name: str, expression: str, target: str, extra_options: tuple[str, ...]) -> Any:
    cubin, lowered = cached_cubin(name, expression, target, extra_options)
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
    todo = _uncached({"": jobs})[0]
    n = max(1, min(len(todo), workers or (os.cpu_count() or 1)))
    if n == 1:
        errors = [_compile_job(j) for j in todo.values()]
        return len(todo), [e for e in errors if e]
    with CompilePool({"": jobs}, workers=n) as pool:
        pool.wait_ready([""])
        return pool.compiled, pool.errors("")


def _uncached(groups: Mapping[str, Iterable[Job]]) -> tuple[dict[Path, Job], dict[str, list[Path]]]:
    """(the jobs not yet in the cubin cache by cubin path, in the groups' order; each group's cubin paths): the
    jobs as loading will compile them (resolve_target), the extern "C" entries of one module as one compile."""
    todo: dict[Path, Job] = {}
    paths: dict[str, list[Path]] = {}
    for name, jobs in groups.items():
        mine = paths.setdefault(name, [])
        for src, expr, arch, opts in sorted(set(jobs)):
            job = (src, expr, resolve_target(arch), opts)
            image, meta, _, _ = _cache_entry(*job)
            if image not in mine:
                mine.append(image)
            if image not in todo and not (image.is_file() and meta.is_file()):
                todo[image] = job
    return todo, paths


class CompilePool:
    """Compiles groups of jobs (a kernel's, by name) in background processes, each cubin once, group by group in
    the order given: a caller runs the first group that is ready (`wait_ready`) while the rest compile."""

    def __init__(self, groups: Mapping[str, Iterable[Job]], workers: int | None = None, nice: int = 0) -> None:
        """`nice`: the workers' scheduling niceness (POSIX), so that a process measuring beside them keeps its
        cores."""
        todo, self._paths = _uncached(groups)
        self.compiled = len(todo)
        self._futures: dict[Path, Future[str]] = {}
        self._executor: Any = None
        if todo:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            n = max(1, min(len(todo), workers or (os.cpu_count() or 1)))
            niced = {"initializer": os.nice, "initargs": (nice,)} if nice > 0 and hasattr(os, "nice") else {}
            self._executor = ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn"), **niced)
            self._futures = {path: self._executor.submit(_compile_job, job) for path, job in todo.items()}

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pending(self, name: str) -> list[Future[str]]:
        return [f for p in self._paths.get(name, ()) if (f := self._futures.get(p)) is not None and not f.done()]

    def ready(self, name: str) -> bool:
        """Every cubin of group `name` is in the cache (or failed to compile)."""
        return not self._pending(name)

    def wait_ready(self, names: Iterable[str]) -> str:
        """The first of `names` that is ready, waiting for compiles until one is."""
        names = list(names)
        if not names:
            raise ValueError("wait_ready needs at least one group")
        while True:
            for name in names:
                if self.ready(name):
                    return name
            wait({f for name in names for f in self._pending(name)}, return_when=FIRST_COMPLETED)

    def errors(self, name: str) -> list[str]:
        """One line per compile of group `name` that failed (call when it is ready)."""
        out = []
        for p in self._paths.get(name, ()):
            f = self._futures.get(p)
            if f is None or not f.done():
                continue
            try:
                msg = f.result()
            except Exception as exc:  # a worker that died (BrokenProcessPool): the kernel compiles on first use
                msg = f"{p.name}: {type(exc).__name__}: {exc}".splitlines()[0]
            if msg:
                out.append(msg)
        return out

    def close(self) -> None:
        """Stop: compiles not started are cancelled, running ones finish into the cache (atomic writes)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
