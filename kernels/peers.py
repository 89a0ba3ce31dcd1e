"""Peer kernels as registry entries: cuBLAS (through torch, or CuPy without torch) and torch's quantized kernels.

Every launch enqueues on CuPy's current stream (torch work is wrapped in a torch.cuda.ExternalStream of that stream)
and writes into a preallocated output, so the profiler can time peers back to back or inside a CUDA graph. cuBLAS goes
through torch where it can: CuPy refuses cuBLAS calls during stream capture, so a CuPy matmul can only be timed as eager
launches, which measures host dispatch on small shapes.
torch is imported only when a torch peer is run; these entries are listed whether or not torch is installed (the
runner raises a clear InputError where it is missing).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from kernels import quant
from kernels.registry import KernelSpec, Problem, check_batch
from models.errors import InputError

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


def _on_cupy_stream() -> Any:
    import cupy

    return _torch().cuda.stream(_external_stream(cupy.cuda.get_current_stream().ptr))


class PeerRunner:
    def __init__(self, spec: KernelSpec) -> None:
        self.spec = spec

    def check(self, M: int, N: int, K: int) -> None:
        check_batch(self.spec, M)
        if self.spec.name == "torch_int4_tinygemm" and K % 256:
            raise InputError(f"torch_int4_tinygemm needs K divisible by 256, got K={K}")
        if K % 16 or N % 16:
            raise InputError(f"{self.spec.name}: N and K must be multiples of 16, got N={N}, K={K}")

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy as cp

        self.check(M, N, K)
        name = self.spec.name
        r = cp.random.RandomState(seed)
        x = r.standard_normal((M, K), dtype=cp.float32)
        arrays: dict[str, Any] = {}
        if name in ("cublas_fp16", "cublas_fp32") and not _has_torch():
            dt = cp.float16 if name == "cublas_fp16" else cp.float32
            w = (r.standard_normal((N, K), dtype=cp.float32) * cp.float32(K**-0.5)).astype(dt)
            arrays |= {"x": x.astype(dt), "w": w}
            out = cp.empty((M, N), dtype=dt)
            ref_x, ref_w = arrays["x"], w
        else:
            torch = _torch()
            with _on_cupy_stream():
                out, ref_x, ref_w = self._make_torch(torch, arrays, x, M, N, K, seed)
            torch.cuda.synchronize()  # setup done before the reference reads it and before any other stream launches
        nbytes = int(sum(a.nbytes for a in arrays.values() if hasattr(a, "nbytes")))
        y_ref = None
        if reference:
            y_ref = cp.asnumpy(cp.asarray(ref_x, cp.float64) @ cp.asarray(ref_w, cp.float64).T)
        return Problem(M=M, N=N, K=K, arrays=arrays, out=out, nbytes=nbytes, ref=y_ref)

    def _make_torch(self, torch: Any, arrays: dict[str, Any], x: Any, M: int, N: int, K: int, seed: int) -> Any:
        import cupy as cp

        name = self.spec.name
        xt = torch.as_tensor(x, device="cuda")
        pad = _PAD.get(name, lambda m: m)(M)
        if name in _TORCH_DTYPES:
            dt = getattr(torch, _TORCH_DTYPES[name])
            w = torch.randn(N, K, device="cuda", generator=torch.Generator("cuda").manual_seed(seed)) * K**-0.5
            arrays |= {"x": xt.to(dt), "w": w.to(dt)}
            arrays["out"] = torch.empty(M, N, device="cuda", dtype=dt)
            return arrays["out"], arrays["x"].double(), arrays["w"].double()
        if name == "torch_int4_tinygemm":
            q = quant.random_w4(N, K, 128, seed=seed + 1, xp=cp)
            codes = torch.as_tensor(q.codes, device="cuda").to(torch.int32)
            packed_u8 = ((codes[:, ::2] << 4) | codes[:, 1::2]).to(torch.uint8)  # even k in the high nibble
            wp = torch.ops.aten._convert_weight_to_int4pack(packed_u8, 8 if K % 1024 == 0 else 2)
            s = torch.as_tensor(q.scales, device="cuda").float()
            z = torch.as_tensor(q.zeros, device="cuda").float()
            sz = torch.stack([s, (8.0 - z) * s], dim=2).transpose(0, 1).contiguous().bfloat16()  # [K/G, N, 2]
            arrays |= {"x": xt.bfloat16(), "w": wp, "sz": sz}
            arrays["out"] = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            s_full = sz[..., 0].double().t().repeat_interleave(128, dim=1)
            z_full = sz[..., 1].double().t().repeat_interleave(128, dim=1)
            w_ref = (torch.as_tensor(q.codes, device="cuda").double() - 8.0) * s_full + z_full
            return arrays["out"], arrays["x"].double(), w_ref
        if name == "torch_fp8_scaled_mm":
            q = quant.random_fp8(N, K, per="tensor", seed=seed + 1, xp=cp)
            wq = torch.as_tensor(q.codes, device="cuda").view(torch.float8_e4m3fn)
            xs = float(xt.abs().max()) / 448.0
            xq = torch.zeros(pad, K, device="cuda", dtype=torch.float8_e4m3fn)
            xq[:M] = (xt / xs).to(torch.float8_e4m3fn)
            arrays |= {"x": xq, "w": wq, "sx": torch.tensor(xs, device="cuda"),
                       "sw": torch.as_tensor(q.scales, device="cuda").reshape(())}
            arrays["out"] = torch.empty(pad, N, device="cuda", dtype=torch.bfloat16)
            w_ref = wq.double() * float(q.scales[0])
            return arrays["out"], xq[:M].double() * xs, w_ref
        if name == "torch_int_mm":
            q = quant.random_w8(N, K, seed=seed + 1, xp=cp)
            xc, _ = quant.quantize_act_int8(x, cp)
            xq = torch.zeros(pad, K, device="cuda", dtype=torch.int8)
            xq[:M] = torch.as_tensor(xc, device="cuda")
            wq = torch.as_tensor(q.codes, device="cuda")
            arrays |= {"x": xq, "w": wq}
            arrays["out"] = torch.empty(pad, N, device="cuda", dtype=torch.int32)
            return arrays["out"], xq[:M].double(), wq.double()
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
                a["out"].copy_(torch._weight_int4pack_mm(a["x"], a["w"], 128, a["sz"]))
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


def make_runner(spec: KernelSpec) -> PeerRunner:
    return PeerRunner(spec)
