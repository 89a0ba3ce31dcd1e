"""Launch helpers shared by the GEMV-class kernel families (kernels/gemv/gemv.py, ladder.py, tc_gemv.py, tc_gemv_q8.py,
tc_gemv_f16.py): a bound launch, the Problem the profiler times around it and the runner methods that enqueue and read
it (`device_output`: as float64 on the device, where the profiler checks it), the check of the arrays a kernel reads
with 16-byte loads, the runner skeleton of the table-driven tensor-core GEMVs, the device's SM count, how many blocks
of a compiled kernel fit on one SM. CuPy is imported inside functions only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kernels import problems
from kernels.registry import KernelSpec, Problem
from kernels.toolchain import build
from models.errors import InputError


@dataclass
class Launch:
    """One kernel launch with its arrays and geometry bound: calling it enqueues the kernel on the current stream (no
    allocation, CUDA-graph capturable)."""

    func: Any
    grid: int
    block: int
    args: tuple[Any, ...]
    shared_mem: int = 0  # dynamic shared memory bytes

    def __call__(self) -> None:
        self.func((self.grid,), (self.block,), self.args, shared_mem=self.shared_mem)


class BoundLaunchRunner:
    """The Runner methods shared by the kernels whose Problem carries its bound Launch (bound_problem): enqueue it, and
    read the fp16 output back as float64."""

    def launch(self, problem: Problem) -> None:
        problem.arrays["launch"]()

    def output(self, problem: Problem) -> Any:
        import cupy as cp

        return cp.asnumpy(problem.out.astype(cp.float64))

    def device_output(self, problem: Problem) -> Any:
        """The output as a float64 device array (fp16, fp32, or bf16 bits converted by kernels/problems.cu)."""
        return problems.to_float64(problem.out)


def check_aligned(name: str, arrays: Iterable[Any]) -> None:
    """The device arrays a kernel reads or writes with 16-byte accesses: C-contiguous and 16-byte aligned."""
    for a in arrays:
        if not a.flags.c_contiguous or a.data.ptr % 16:
            raise InputError(f"{name}: device arrays must be C-contiguous and 16-byte aligned (ptr {a.data.ptr:#x})")


class TableRunner(BoundLaunchRunner):
    """The runner skeleton of a table-driven GEMV family (kernels.tcgemv.tc_gemv_q8, kernels.tcgemv.tc_gemv_f16): a
    kernel of the family's `kinds`, its shape check (`shape_check(spec, M, N, K)`), configuration overrides on top of
    its table (`choose(M, N, sms, name, **override)`), one source compiled per configuration (`_job`); the family adds
    `make`."""

    family = ""  # for the refusal: "no <family> named ..."
    kinds: dict[str, Any] = {}
    shape_check: Callable[..., None]
    choose: Callable[..., Any]

    def __init__(self, spec: KernelSpec, config: dict[str, Any] | None = None) -> None:
        if spec.name not in self.kinds:
            raise InputError(f"no {self.family} named {spec.name!r}; known: {sorted(self.kinds)}")
        self.spec = spec
        self.config = dict(config or {})
        self._packed = problems.PackedCache(spec.name)

    def check(self, M: int, N: int, K: int) -> None:
        type(self).shape_check(self.spec, M, N, K)
        self._config(M, N)

    def compile_jobs(self, M: int, N: int, K: int) -> list[build.Job]:
        return [self._job(self._config(M, N))]

    def _config(self, M: int, N: int) -> Any:
        return type(self).choose(M, N, device_sms(), self.spec.name, **self.config)

    def _job(self, cfg: Any) -> build.Job:
        raise NotImplementedError


def bound_problem(inputs: problems.Inputs, xs: tuple[Any, ...], ws: tuple[Any, ...], out: Any,
                  launch: Launch) -> Problem:
    """The Problem a runner hands the profiler: the arrays its launch reads (x0.., w0..) kept alive with the launch,
    `nbytes` what they hold, `bytes` that plus the output, the reference and quantization error of `inputs`."""
    arrays: dict[str, Any] = {f"x{i}": a for i, a in enumerate(xs)} | {f"w{i}": a for i, a in enumerate(ws)}
    arrays["launch"] = launch
    nbytes = problems.bytes_read(*xs, *ws)
    return Problem(M=inputs.M, N=inputs.N, K=inputs.K, arrays=arrays, out=out, nbytes=nbytes, ref=inputs.ref,
                   quant_error_rel=inputs.quant_error_rel, bytes=nbytes + problems.bytes_read(out))


def device_sms() -> int:
    """SMs of the current device (of the planned one inside kernels.toolchain.build.planned_device)."""
    if build.planned_sms():
        return build.planned_sms()
    import cupy

    return _sms(cupy.cuda.Device().id)


@cache
def _sms(device_id: int) -> int:
    """SMs of a device, read once (Device.attributes queries every attribute on each use)."""
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def resident_blocks(func: Any, threads: int) -> int:
    """Blocks of `threads` threads of a compiled kernel that fit on one SM by registers and threads (>= 1)."""
    regs = max(int(func.num_regs), 1)
    regs_per_warp = -(-regs * 32 // 256) * 256
    warps = -(-threads // 32)
    return max(1, min(32, 2048 // threads, (65536 // regs_per_warp) // warps))
