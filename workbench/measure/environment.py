"""The environment recorded with every measured row: GPU identity and geometry, driver, runtimes, git commit."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from models.errors import InputError

NO_GPU_HINT = (
    "profile and calibrate need a CUDA GPU with CuPy; predict, export, validate and the dashboard "
    "(workbench serve) still work without one"
)
REPO_ROOT = Path(__file__).resolve().parents[2]  # workbench/measure/environment.py -> the checkout


@dataclass(frozen=True)
class Environment:
    gpu_name: str
    gpu_key: str
    gpu_uuid: str
    compute_capability: str
    sm_count: int
    l2_bytes: int
    mem_total_bytes: int
    driver_version: str
    cuda_runtime: str
    cupy_version: str
    torch_version: str
    git_commit: str

    @property
    def cc(self) -> int:
        """Compute capability as an integer, 90 for "9.0"."""
        major, _, minor = self.compute_capability.partition(".")
        return int(major) * 10 + int(minor or 0)

    def columns(self) -> dict[str, Any]:
        return asdict(self)


def git_commit(root: Path = REPO_ROOT) -> str:
    """WORKBENCH_GIT_COMMIT when set, else HEAD of the repo (with "-dirty" for local changes).

    The variable wins because a copy of the working tree sent to a GPU machine can carry a .git that lags the files
    (seen on the device machine: HEAD at the session's first commit, the tree at a later one, read as "-dirty");
    scripts/record_h200.sh is run with the commit whose tree it was sent.
    """
    env = os.environ.get("WORKBENCH_GIT_COMMIT", "").strip()
    if env:
        return env
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return "unknown"
        status = ["git", "status", "--porcelain", "--untracked-files=no"]
        dirty = subprocess.run(status, cwd=root, capture_output=True, text=True, timeout=5)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def gpu_key_for(name: str) -> str:
    """The catalogue key (data/gpus.toml) of a CUDA device name, "" when it is not catalogued."""
    try:
        from models.hardware import get_gpu

        return get_gpu(name).key
    except (ImportError, InputError, KeyError, LookupError):
        return ""


def _version(module: str) -> str:
    """The installed version of `module` without importing it: its __version__ when it is already imported, else the
    `__version__ = "..."` line of its package's version.py (torch's carries the CUDA build, "2.11.0+cu130", which
    the distribution metadata leaves out), else the distribution's metadata; "" when none is there. Importing torch
    only to read its version took 7.6 s of a freshly started machine's first sweep, before anything else could
    start; the warm-up threads import it beside the compiles."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        return str(getattr(loaded, "__version__", ""))
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "version.py"
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
        if found:
            return found.group(1)
    try:
        return importlib.metadata.version(module)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return ""


def require_gpu() -> Any:
    """The CuPy module with a usable device, or InputError saying what still works."""
    try:
        import cupy
    except Exception as exc:
        raise InputError(f"CuPy is not importable ({type(exc).__name__}); {NO_GPU_HINT}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        raise InputError(f"no CUDA GPU found ({type(exc).__name__}); {NO_GPU_HINT}") from None
    if count < 1:
        raise InputError(f"no CUDA GPU found; {NO_GPU_HINT}")
    return cupy


def _decode(v: Any) -> str:
    return v.decode(errors="replace").rstrip("\x00") if isinstance(v, bytes) else str(v)


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def detect(device: int = 0) -> Environment:
    """Read the environment of CUDA device `device` (needs CuPy and a GPU)."""
    from workbench.measure.nvml import cuda_uuid_to_nvml, uuid_of_pci_bus

    cupy = require_gpu()
    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(device)
    name = _decode(props["name"])
    uuid = cuda_uuid_to_nvml(props.get("uuid", b"")) or uuid_of_pci_bus(rt.deviceGetPCIBusId(device))
    driver = ""
    try:
        import pynvml

        pynvml.nvmlInit()
        driver = _decode(pynvml.nvmlSystemGetDriverVersion())
    except Exception:
        driver = f"cuda {_cuda_version(rt.driverGetVersion())}"
    return Environment(
        gpu_name=name,
        gpu_key=gpu_key_for(name),
        gpu_uuid=uuid,
        compute_capability=f"{props['major']}.{props['minor']}",
        sm_count=int(props["multiProcessorCount"]),
        l2_bytes=int(props["l2CacheSize"]),
        mem_total_bytes=int(props["totalGlobalMem"]),
        driver_version=driver,
        cuda_runtime=_cuda_version(rt.runtimeGetVersion()),
        cupy_version=cupy.__version__,
        torch_version=_version("torch"),
        git_commit=git_commit(),
    )


def free_device_bytes() -> int:
    """Free device memory now, counting what CuPy's pool holds but does not use."""
    import cupy

    free, _total = cupy.cuda.runtime.memGetInfo()
    pool = cupy.get_default_memory_pool()
    return int(free + pool.total_bytes() - pool.used_bytes())


def release_device_caches() -> None:
    """Hand back what CuPy's pool and, if torch was imported, torch's caching allocator hold but no longer use. The
    anchor benchmark at 91ef9d1 (688 points of many shapes in one process, torch peers among them) ran out of device
    memory at one point with CuPy's pool holding 9.9 of the H200's 141 GB; torch's cache, which nothing emptied, is
    the likely holder of the rest (not verified on the device)."""
    import sys

    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
