"""Compiling our `.cu` files: through CuPy's NVRTC on a GPU machine, cached per process.

CuPy also caches compiled cubins on disk (~/.cupy/kernel_cache), so a second run pays no NVRTC time.
"""

from __future__ import annotations

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
