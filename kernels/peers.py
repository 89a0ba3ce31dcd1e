"""Peer kernels as registry entries: cuBLAS (through torch, or CuPy without torch) and torch's quantized kernels.

Every launch enqueues on CuPy's current stream (torch work is wrapped in a torch.cuda.ExternalStream of that stream)
and writes into a preallocated output, so the profiler can time peers back to back or inside a CUDA graph. cuBLAS goes
through torch where it can: CuPy refuses cuBLAS calls during stream capture, so a CuPy matmul can only be timed as eager
launches, which measures host dispatch on small shapes.
torch is imported only when a torch peer is run; these entries are listed whether or not torch is installed (the
runner raises a clear InputError where it is missing).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

import numpy as np

from kernels import problems
from kernels.registry import KernelSpec, Problem, check_batch
from models.errors import InputError
from models.kernel_terms import KernelFacts
from models.schemes import GROUP_SIZES, SCHEME_PARAMS

W4_GROUP: int = SCHEME_PARAMS["w4a16"]["group_size"]

_RUN = "kernels.peers:make_runner"
SPECS: tuple[KernelSpec, ...] = (
    KernelSpec("cublas_fp16", "fp16", "torch", "peer", _RUN, m_max=256, geometry="torch.mm (cuBLAS)",
               notes="x @ W.T with W row-major N x K (a transposed operand, no copy); CuPy matmul without torch"),
    KernelSpec("cublas_bf16", "bf16", "torch", "peer", _RUN, m_max=256, geometry="torch.mm (cuBLAS)",
               notes="through torch (CuPy has no bfloat16)"),
    KernelSpec("cublas_fp32", "fp32", "torch", "peer", _RUN, m_max=256, geometry="torch.mm (cuBLAS)",
               notes="TF32 off (torch's and CuPy's default); CuPy matmul without torch"),
    KernelSpec("torch_int4_tinygemm", "w4a16", "torch", "peer", _RUN, m_max=256,
               geometry="torch._weight_int4pack_mm (tinygemm), G=128, inner_k_tiles=8 (2 where K % 1024 != 0)",
               notes="bf16 activations and output; zero point stored as a bf16 offset ((8 - z) * s)"),
    KernelSpec("torch_fp8_scaled_mm", "fp8", "torch", "peer", _RUN, m_max=256, min_cc=89,
               geometry="torch._scaled_mm, e4m3 x e4m3, per-tensor scales",
               notes="M padded to a multiple of 16; e4m3 activations (quantized per tensor outside the timing)"),
    KernelSpec("torch_int_mm", "w8a8", "torch", "peer", _RUN, m_max=256,
               geometry="torch._int_mm int8 x int8 -> int32",
               notes="M padded to >= 32 (multiple of 8); int32 output, the rescale is not included"),
)
# name -> (weights, activations, scale granularity) as the peer reads them (kernels.problems.Params)
_PARAMS = {"cublas_fp16": ("f16", "f16", "channel"), "cublas_bf16": ("bf16", "bf16", "channel"),
           "cublas_fp32": ("f32", "f32", "channel"), "torch_int4_tinygemm": ("w4", "bf16", "channel"),
           "torch_fp8_scaled_mm": ("e4m3", "e4m3", "tensor"), "torch_int_mm": ("w8", "i8", "channel")}
_TORCH_DTYPES = {"cublas_fp16": "float16", "cublas_bf16": "bfloat16", "cublas_fp32": "float32"}
_PAD = {"torch_fp8_scaled_mm": lambda M: -(-M // 16) * 16, "torch_int_mm": lambda M: max(32, -(-M // 8) * 8)}


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise InputError("this peer needs torch (pip install torch); it is not installed") from exc
    return torch


@cache
def _external_stream(ptr: int) -> Any:
    return _torch().cuda.ExternalStream(ptr)


def _on_device(t: Any) -> Any:
    """A float64 torch tensor as a contiguous CuPy array sharing its memory (DLPack); call on the CuPy stream."""
    import cupy

    return cupy.from_dlpack(t.contiguous())


def _on_cupy_stream() -> Any:
    import cupy

    return _torch().cuda.stream(_external_stream(cupy.cuda.get_current_stream().ptr))


class PeerRunner:
    def __init__(self, spec: KernelSpec, group_size: int | None = None) -> None:
        self.spec = spec
        self.group_size = (group_size or W4_GROUP) if spec.scheme == "w4a16" else 0

    def check(self, M: int, N: int, K: int) -> None:
        check_batch(self.spec, M)
        if self.spec.name == "torch_int4_tinygemm" and K % 256:
            raise InputError(f"torch_int4_tinygemm needs K divisible by 256, got K={K}")
        if self.group_size and self.group_size not in GROUP_SIZES:
            raise InputError(f"{self.spec.name} takes group sizes {GROUP_SIZES}, got {self.group_size}")
        if K % 16 or N % 16:
            raise InputError(f"{self.spec.name}: N and K must be multiples of 16, got N={N}, K={K}")

    def params(self) -> problems.Params:
        """The problem this peer reads (kernels.problems)."""
        weight, act, scales = _PARAMS[self.spec.name]
        return problems.Params(self.spec.scheme, weight, act, group_size=self.group_size, weight_scales=scales,
                               act_scales=scales)

    def warm(self) -> None:
        """Import torch and initialise its CUDA state and cuBLAS on tiny matrices (what the first point would do;
        the profiler runs it while the first kernel compiles)."""
        if not _has_torch():
            return
        torch = _torch()
        a = torch.ones(16, 16, device="cuda", dtype=torch.bfloat16)
        torch.mm(a, a.t())
        torch.cuda.synchronize()

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy as cp

        self.check(M, N, K)
        name = self.spec.name
        inputs = problems.make_inputs(self.params(), M, N, K, seed=seed, reference=reference)
        arrays: dict[str, Any] = {}
        ref = inputs.ref
        if name in ("cublas_fp16", "cublas_fp32") and not _has_torch():
            arrays |= {"x": inputs.x[0], "w": inputs.w}
            out = cp.empty((M, N), dtype=inputs.w.dtype)
        else:
            torch = _torch()
            with _on_cupy_stream():
                out, own_ref = self._make_torch(torch, arrays, inputs, reference)
            torch.cuda.synchronize()  # setup done before the reference reads it and before any other stream launches
            ref = own_ref if own_ref is not None else ref
        nbytes = problems.bytes_read(*(a for k, a in arrays.items() if k != "out"))
        return Problem(M=M, N=N, K=K, arrays=arrays, out=out, nbytes=nbytes, ref=ref,
                       quant_error_rel=inputs.quant_error_rel, bytes=nbytes + problems.bytes_read(out))

    def _make_torch(self, torch: Any, arrays: dict[str, Any], inputs: problems.Inputs, reference: bool) -> Any:
        """Pack the canonical inputs for torch; returns (output, the reference when the peer's own arithmetic
        differs from the canonical one: tinygemm's bf16 zero offsets, _int_mm's unscaled int32 sums)."""
        name, M, N, K = self.spec.name, inputs.M, inputs.N, inputs.K
        pad = _PAD.get(name, lambda m: m)(M)

        def t(a: Any) -> Any:  # a CuPy array as a torch tensor (bf16 bit patterns through int16)
            if str(a.dtype) == "uint16":
                return torch.as_tensor(a.view("int16"), device="cuda").view(torch.bfloat16)
            return torch.as_tensor(a, device="cuda")

        if name in _TORCH_DTYPES:
            arrays |= {"x": t(inputs.x[0]), "w": t(inputs.w)}
            arrays["out"] = torch.empty(M, N, device="cuda", dtype=getattr(torch, _TORCH_DTYPES[name]))
            return arrays["out"], None
        if name == "torch_int4_tinygemm":
            q, G = inputs.w, self.group_size
            codes = t(q.codes).to(torch.int32)
            packed_u8 = ((codes[:, ::2] << 4) | codes[:, 1::2]).to(torch.uint8)  # even k in the high nibble
            wp = torch.ops.aten._convert_weight_to_int4pack(packed_u8, 8 if K % 1024 == 0 else 2)
            s, z = t(q.scales).float(), t(q.zeros).float()
            sz = torch.stack([s, (8.0 - z) * s], dim=2).transpose(0, 1).contiguous().bfloat16()  # [K/G, N, 2]
            arrays |= {"x": t(inputs.x[0]), "w": wp, "sz": sz}
            arrays["out"] = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            if not reference:
                return arrays["out"], None
            s_full = sz[..., 0].double().t().repeat_interleave(G, dim=1)
            z_full = sz[..., 1].double().t().repeat_interleave(G, dim=1)
            w_ref = (codes.double() - 8.0) * s_full + z_full
            return arrays["out"], _on_device(arrays["x"].double() @ w_ref.t())
        if name == "torch_fp8_scaled_mm":
            codes, sx = inputs.x
            xq = torch.zeros(pad, K, device="cuda", dtype=torch.uint8)
            xq[:M] = t(codes)
            arrays |= {"x": xq.view(torch.float8_e4m3fn), "w": t(inputs.w.codes).view(torch.float8_e4m3fn),
                       "sx": t(sx).reshape(()), "sw": t(inputs.w.scales).reshape(())}
            arrays["out"] = torch.empty(pad, N, device="cuda", dtype=torch.bfloat16)
            return arrays["out"], None
        if name == "torch_int_mm":
            xq = torch.zeros(pad, K, device="cuda", dtype=torch.int8)
            xq[:M] = t(inputs.x[0])
            arrays |= {"x": xq, "w": t(inputs.w.codes)}
            arrays["out"] = torch.empty(pad, N, device="cuda", dtype=torch.int32)
            if not reference:
                return arrays["out"], None
            return arrays["out"], _on_device(xq[:M].double() @ arrays["w"].double().t())
        raise InputError(f"unknown peer {name}")

    def launch(self, problem: Problem) -> None:
        import cupy as cp

        a = problem.arrays
        name = self.spec.name
        if isinstance(problem.out, cp.ndarray):  # cuBLAS through CuPy (torch missing)
            cp.matmul(a["x"], a["w"].T, out=problem.out)
            return
        torch = _torch()
        with _on_cupy_stream():
            if name in _TORCH_DTYPES:
                torch.mm(a["x"], a["w"].t(), out=a["out"])
            elif name == "torch_int4_tinygemm":
                a["out"].copy_(torch._weight_int4pack_mm(a["x"], a["w"], self.group_size, a["sz"]))
            elif name == "torch_fp8_scaled_mm":
                torch._scaled_mm(a["x"], a["w"].t(), scale_a=a["sx"], scale_b=a["sw"], out_dtype=torch.bfloat16,
                                 out=a["out"])
            elif name == "torch_int_mm":
                torch._int_mm(a["x"], a["w"].t(), out=a["out"])

    def output(self, problem: Problem) -> Any:
        import cupy as cp

        out = problem.out
        if isinstance(out, cp.ndarray):
            return cp.asnumpy(out.astype(cp.float64))
        return out[: problem.M].double().cpu().numpy().astype(np.float64)

    def device_output(self, problem: Problem) -> Any:
        """The output as a float64 device array (CuPy; a torch output converted on the CuPy stream, shared through
        DLPack), M x N."""
        import cupy as cp

        out = problem.out
        if isinstance(out, cp.ndarray):
            return problems.to_float64(out)
        with _on_cupy_stream():
            return _on_device(out[: problem.M].double())


def make_runner(spec: KernelSpec, group_size: int | None = None) -> PeerRunner:
    return PeerRunner(spec, group_size)


# What the kernel-aware model needs (models.kernel_terms): the library kernels' instruction paths; their tiles are not
# known, only the M padding the runners add (_PAD). tinygemm's measured time grows with M from M = 1: one pass over
# the dequantized weights per batch row. cuBLAS SGEMM with one batch row (n = 1 in its column-major call) is a
# matrix-vector product and runs a GEMV: H200 M = 1 at 1.03-1.27x the L2-cold read of its bytes on 10 shapes, M = 2 at
# 1.29-3.63x and growing with M (a GEMM); its 16-bit GEMMs take the same time at M = 1 and 2, so they declare none.
_FACTS = {
    "cublas_fp16": KernelFacts("library", "wgmma_f16"),
    "cublas_bf16": KernelFacts("library", "wgmma_bf16"),
    "cublas_fp32": KernelFacts("library", "library_fp32", gemv_m=1),
    "torch_int4_tinygemm": KernelFacts("library", "mma_sync_bf16", "w4", ((256, 1),)),
    "torch_fp8_scaled_mm": KernelFacts("library", "wgmma_e4m3", "none", ((256, 16),)),
    "torch_int_mm": KernelFacts("library", "wgmma_s8", "none", ((32, 32), (256, 8))),
}
SPECS = tuple(replace(s, facts=_FACTS[s.name]) for s in SPECS)
