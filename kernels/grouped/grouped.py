"""Grouped kernels for MoE decode: every expert of one layer in one launch (`KERNELS`). GEMV-class on the tensor
cores: grouped_tc.cu, grouped_w4_tc.cu and grouped_q8_tc.cu (mma.sync, weights from global memory into fragments);
on CUDA cores, grouped_gemv.cu; `grouped_bf16_wg` (grouped_wg.cu, sm_90a only) a wgmma GEMM whose width follows each
expert's rows, for the batches where experts get tens of rows (launch configurations: grouped_config.py).
`grouped_bf16_tc_silu` is grouped_bf16_tc on a gate+up layer with silu(gate) * up in its epilogue (output N / 2
wide); `GroupedRunner(..., separate_silu=True)` the unfused pair it is measured against. docs/moe.md has the numbers.

A problem is one MoE expert layer at batch B: E experts of N x K weights (stacked [E, N, K]), top-k routing drawn by
models.moe.draw with a fixed routing seed, the routed token list (rows sorted by expert, offsets per expert), and the
output [B * k, N] in routed order. Only the touched experts' weights are read; `touched_bytes` is what the launch
must move (the read-limit anchor of bench/bench_moe.py).

`GroupedRunner` follows the registry's Runner protocol with M = the batch B (so workbench.measure.timing.measure times
it: float64 check, L2-cold rotation, CUDA-graph replays). Its input sets share one weight allocation and differ by a
relabelling of the experts (the same routing histogram on other experts' bytes), so the rotation stays L2-cold without
a second copy of tens of GB of experts. The grouped kernels are not in the registry's PROVIDERS: their problems have
E, top-k and a routing besides (M, N, K), which the dense profiler sweep does not carry.
Weights are random bit patterns drawn on the device (bf16 with exponents around 2^-7; W4 codes, scales and zeros;
e4m3 codes of magnitude 0.25-3.75 and one fp32 scale per expert), valid for every scheme and cheap for DeepSeek-V3's
15 GB of expert weights; the reference reads them back. FP8 activations are e4m3 with one fp32 scale per token,
quantized outside the timed launch by kernels.problems.quantize_fp8 (as the dense fp8_tc_gemv's inputs are).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels import problems
from kernels.grouped.grouped_config import (
    MAX_EXPERTS,
    WG_SLOTS,
    Config,
    TcConfig,
    WgConfig,
    choose_config,
    choose_tc_config,
    choose_wg_config,
    expert_bytes,
)
from kernels.grouped.grouped_data import G, dequantized, random_weights, silu_mul
from kernels.launch import device_sms, resident_blocks
from kernels.quant import quant
from kernels.registry import Problem
from kernels.toolchain import build
from models.errors import InputError
from models.moe import Routing, draw, parse_routing, route

# kernel -> (scheme, source, tensor cores)
KERNELS = {"grouped_bf16": ("bf16", "grouped_gemv.cu", False), "grouped_bf16_tc": ("bf16", "grouped_tc.cu", True),
           "grouped_w4a16": ("w4a16", "grouped_gemv.cu", False),
           "grouped_w4a16_tc": ("w4a16", "grouped_w4_tc.cu", True),
           "grouped_fp8_tc": ("fp8", "grouped_q8_tc.cu", True),
           "grouped_bf16_tc_silu": ("bf16", "grouped_tc.cu", True),
           "grouped_bf16_wg": ("bf16", "grouped_wg.cu", True)}
# gate+up with SiLU·mul fused into the epilogue (TCF_SILU): output silu(gate) * up, N / 2 wide (grouped_tc.cu)
SILU_KERNELS = ("grouped_bf16_tc_silu",)
MIN_CC = {"grouped_fp8_tc": 89, "grouped_bf16_wg": 90}  # e4m3 cvt and mma.sync (sm_89); wgmma; the others: sm_80
MAX_CC = {"grouped_bf16_wg": 90}  # the sm_90a target runs on compute capability 9.0 only
WG_KERNELS = ("grouped_bf16_wg",)
ENTRY = {("grouped_bf16", True): "grouped_gemv_bf16", ("grouped_bf16", False): "grouped_gemv_bf16",
         ("grouped_bf16_tc", True): "grouped_f16_tc", ("grouped_bf16_tc", False): "grouped_f16_tc",
         ("grouped_w4a16", True): "grouped_gemv_w4a16", ("grouped_w4a16", False): "grouped_gemv_w4a16_routed",
         ("grouped_w4a16_tc", True): "grouped_w4a16_tc", ("grouped_w4a16_tc", False): "grouped_w4a16_tc",
         ("grouped_fp8_tc", True): "grouped_fp8_tc", ("grouped_fp8_tc", False): "grouped_fp8_tc",
         ("grouped_bf16_tc_silu", True): "grouped_f16_tc", ("grouped_bf16_tc_silu", False): "grouped_f16_tc",
         ("grouped_bf16_wg", True): "grouped_wg_bf16", ("grouped_bf16_wg", False): "grouped_wg_bf16"}
def check(kernel: str, batch: int, N: int, K: int, experts: int, top_k: int) -> None:
    """InputError for a problem these kernels refuse, before anything is allocated."""
    if kernel not in KERNELS:
        raise InputError(f"unknown grouped kernel {kernel!r}; valid: {', '.join(KERNELS)}")
    scheme, _, tc = KERNELS[kernel]
    if tc and (N % (64 if kernel in WG_KERNELS else 16) or K % 64):  # SiLU·mul: 8 gate + 8 up channels per tile
        raise InputError(f"{kernel} needs N divisible by {64 if kernel in WG_KERNELS else 16} and K by 64, "
                         f"got N={N}, K={K}")
    if min(batch, N, K, experts, top_k) < 1 or top_k > experts:
        raise InputError(f"grouped GEMV needs B, N, K >= 1 and 1 <= top-k <= E, got B={batch}, N={N}, K={K}, "
                         f"E={experts}, top-k={top_k}")
    mult = 32 if scheme == "w4a16" else 64 if scheme == "fp8" else 8
    if K % mult or (scheme == "w4a16" and K % G):
        raise InputError(f"grouped {scheme} needs K divisible by {G if scheme == 'w4a16' else mult}, got K={K}")
    if experts > MAX_EXPERTS:
        raise InputError(f"grouped kernels take at most {MAX_EXPERTS} experts, got E={experts}")
    if kernel in WG_KERNELS and experts + -(-batch * top_k // 64) > WG_SLOTS:
        raise InputError(f"{kernel} takes at most {WG_SLOTS} passes of 64 rows over the experts, got E={experts}, "
                         f"B*k={batch * top_k}")
    if experts * N * K >= 2**31 * 8:
        raise InputError(f"grouped {scheme}: E*N*K={experts * N * K} is too large for the kernel's indexing")


@dataclass
class Routed:
    """One routing of a batch: [B, k] choices, the routed rows and offsets (host and device)."""

    choices: np.ndarray
    rows: np.ndarray
    offsets: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def touched(self) -> int:
        return int(np.count_nonzero(self.counts))


def routed(batch: int, experts: int, top_k: int, routing: Routing | str | None, seed: int,
           relabel: int | None = None) -> Routed:
    """The routing drawn with `seed`; `relabel` (a seed) maps the experts through a random permutation."""
    c = draw(batch, experts, top_k, routing, seed)
    if relabel is not None:
        c = np.random.default_rng(relabel).permutation(experts)[c]
    rows, offsets = route(c, experts)
    return Routed(c, rows, offsets)


class GroupedRunner:
    """Runner protocol (M = batch) of one grouped kernel (KERNELS) on one MoE layer (E, top_k, routing, seed).
    `config` overrides the kernel's launch configuration (TcConfig, Config or WgConfig fields). `separate_silu`
    (grouped_bf16_tc only): the unfused gate+up + SiLU·mul, the GEMM then grouped_tc.cu's elementwise
    silu_mul_bf16 in the same launch function (named grouped_bf16_tc+silu_mul)."""

    def __init__(self, kernel: str, experts: int, top_k: int, routing: Routing | str | None = None,
                 routing_seed: int = 0, gather: bool = True, separate_silu: bool = False, **config: Any) -> None:
        if kernel not in KERNELS:
            raise InputError(f"unknown grouped kernel {kernel!r}; valid: {', '.join(KERNELS)}")
        if separate_silu and kernel != "grouped_bf16_tc":
            raise InputError(f"separate_silu runs after grouped_bf16_tc only, not {kernel!r}")
        self.kernel, self.experts, self.top_k, self.separate = kernel, experts, top_k, separate_silu
        self.name = kernel + "+silu_mul" if separate_silu else kernel
        self.silu = "interleaved" if kernel in SILU_KERNELS else "halves" if separate_silu else ""
        self.scheme, self.source, self.tc = KERNELS[kernel]
        self.routing = parse_routing(routing)
        self.routing_seed, self.gather, self.config = routing_seed, gather, config
        self._weights: dict[tuple[int, int], tuple[Any, ...]] = {}

    def check(self, M: int, N: int, K: int) -> None:
        check(self.kernel, M, N, K, self.experts, self.top_k)
        self.routing.check(self.experts, self.top_k)

    def weights(self, N: int, K: int) -> tuple[Any, ...]:
        if (N, K) not in self._weights:
            self._weights[(N, K)] = random_weights(self.scheme, self.experts, N, K, seed=N * 7 + K)
        return self._weights[(N, K)]

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy as cp

        self.check(M, N, K)
        self.check_device()
        r = routed(M, self.experts, self.top_k, self.routing, self.routing_seed,
                   None if seed == self.routing_seed else seed)
        R = M * self.top_k
        xdt = cp.uint16 if self.scheme == "bf16" else cp.float16
        rng = cp.random.RandomState(seed + 12345)
        xf = rng.standard_normal((M if self.gather else R, K), dtype=cp.float32)
        sa = None
        if self.scheme == "fp8":  # e4m3 codes, one fp32 scale per row (token), as the dense fp8 kernels' inputs
            q = problems.quantize_fp8(xf, "channel")
            x, sa = q.codes, q.scales
        else:
            x = quant.to_bf16_bits(xf, cp) if self.scheme == "bf16" else xf.astype(cp.float16)
        y = cp.empty((R, N // 2 if self.silu == "interleaved" else N), dtype=xdt)
        rows, offsets = cp.asarray(r.rows), cp.asarray(r.offsets)
        w = self.weights(N, K)
        cfg = self.launch_config(M, N, K)
        source, entry, arch, options = self.compile_job(M, N, K)
        if isinstance(cfg, WgConfig):
            func = build.arch_function(source, entry, arch, options)
            func.max_dynamic_shared_size_bytes = cfg.smem_bytes()
            threads, dyn = cfg.wg * 128, cfg.smem_bytes()
            slots = min(self.experts, M * self.top_k) + -(-M * self.top_k // cfg.bm_max)  # the most pass slots
            grid = min(slots * (N // (64 * cfg.wg)), device_sms())
        else:
            func = build.function(source, entry, options)
            threads, dyn = cfg.warps * 32, 0
            tiles = -(-N // 16) if self.tc else -(-N // cfg.rw)
            items = min(self.experts, M * self.top_k) * tiles  # the most (touched expert, tile) items
            smem = int(getattr(func, "shared_size_bytes", 0) or 0)
            per_sm = min(resident_blocks(func, threads), max(1, (227 * 1024) // (smem + 1024)))
            grid = min(items, per_sm * device_sms())
        if self.scheme == "bf16":  # the bf16 kernels take the same arguments
            args = (w[0], x, y, rows, offsets, np.int32(self.experts), np.int32(N), np.int32(K),
                    np.int32(int(self.gather)))
        elif self.scheme == "fp8":
            args = (w[0], w[1], x, sa, y, rows, offsets, np.int32(self.experts), np.int32(N), np.int32(K),
                    np.int32(int(self.gather)))
        else:
            last = np.int32(int(self.gather)) if self.tc else np.int32(int(math.log2(G // 32)))  # gather / gshift
            args = (w[0], w[1], x, y, rows, offsets, np.int32(self.experts), np.int32(N), np.int32(K), last)

        def launch() -> None:
            func((grid,), (threads,), args, shared_mem=dyn)

        if self.separate:  # then silu(y[:, :N/2]) * y[:, N/2:] by a second kernel, out N / 2 wide
            gemm, out = launch, cp.empty((R, N // 2), dtype=xdt)
            silu_fn = build.function(self.source, "silu_mul_bf16", cfg.options())
            silu_grid = min(-(-R * (N // 16) // 256), 8 * device_sms())
            silu_args = (y, out, np.int32(R), np.int32(N // 2))

            def launch() -> None:
                gemm()
                silu_fn((silu_grid,), (256,), silu_args)

            y = out
        touched = r.touched * expert_bytes(self.scheme, N, K)
        moved = x.nbytes + y.nbytes + rows.nbytes + offsets.nbytes + (0 if sa is None else sa.nbytes)  # the output
        ref = self.reference(w, x if sa is None else (x, sa), r, N, K) if reference else None
        arrays = {"w": w, "x": x, "sa": sa, "rows": rows, "offsets": offsets, "launch": launch, "routed": r,
                  "config": cfg, "grid": grid}
        return Problem(M=M, N=N, K=K, arrays=arrays, out=y, nbytes=touched + moved, ref=ref, bytes=touched + moved)

    def compile_job(self, M: int, N: int, K: int) -> build.Job:
        """(source, entry or template instance, arch, options): what `make` compiles for this problem."""
        cfg = self.launch_config(M, N, K)
        if isinstance(cfg, WgConfig):
            return self.source, cfg.expression(), "sm_90a", ()
        return self.source, ENTRY[(self.kernel, self.gather)], build.device_arch(), cfg.options()

    def launch_config(self, M: int, N: int, K: int) -> Config | TcConfig | WgConfig:
        if self.kernel in WG_KERNELS:
            return choose_wg_config(M, N, K, self.experts, self.top_k, **self.config)
        if self.tc:
            import cupy as cp

            l2 = int(cp.cuda.Device().attributes["L2CacheSize"])
            silu = {"silu": True} if self.silu == "interleaved" else {}
            return choose_tc_config(M, N, K, self.experts, self.top_k, scheme=self.scheme, l2_bytes=l2,
                                    **{**silu, **self.config})
        return choose_config(self.scheme, M, K, self.experts, self.top_k, **self.config)

    def reference(self, w: tuple[Any, ...], x: Any, r: Routed, N: int, K: int) -> Any:
        """float64 y [R, N] from the weights the kernel reads (dequantized) and the activations it reads (bf16, fp16,
        or (e4m3 codes, per-row scales) dequantized); SiLU·mul runners: silu(gate) * up of it, [R, N / 2]."""
        import cupy as cp

        if self.scheme == "fp8":
            xf = problems.dequantize_act(x)
        else:
            xf = quant.from_bf16_bits(x, cp).astype(cp.float64) if self.scheme == "bf16" else x.astype(cp.float64)
        rows = cp.asarray(r.rows) if self.gather else cp.arange(len(r.rows))
        y = cp.zeros((len(r.rows), N), dtype=cp.float64)
        for e in np.flatnonzero(r.counts):
            lo, hi = int(r.offsets[e]), int(r.offsets[e + 1])
            y[lo:hi] = xf[rows[lo:hi]] @ dequantized(self.kernel, w, int(e), N, K).T
        return silu_mul(y, self.silu == "interleaved", cp) if self.silu else y

    def check_device(self) -> None:
        """InputError on a GPU older than the kernel's minimum compute capability (MIN_CC)."""
        import cupy as cp

        need, cc = MIN_CC.get(self.kernel, 80), int(cp.cuda.Device().compute_capability)
        if cc < need:
            raise InputError(f"{self.name} needs compute capability {need} or newer (sm_{need}); this GPU is sm_{cc}")
        if cc > MAX_CC.get(self.kernel, cc):
            raise InputError(f"{self.name} runs on compute capability {MAX_CC[self.kernel]} only (sm_90a: wgmma); "
                             f"this GPU is sm_{cc}")

    def launch(self, problem: Problem) -> None:
        problem.arrays["launch"]()

    def output(self, problem: Problem) -> Any:
        import cupy as cp

        y = problem.out
        return cp.asnumpy(quant.from_bf16_bits(y, cp).astype(cp.float64) if self.scheme == "bf16"
                          else y.astype(cp.float64))

    def device_output(self, problem: Problem) -> Any:
        """The output as a float64 device array (fp16, or bf16 bits: kernels/problems.cu's conversions)."""
        return problems.to_float64(problem.out)
