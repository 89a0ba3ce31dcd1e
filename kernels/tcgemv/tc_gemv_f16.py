"""The 16-bit GEMV-class kernels on tensor cores (batch 1-16): `bf16_tc_gemv` and `fp16_tc_gemv`, one source
(kernels/tcgemv/gemv_f16_tc.cu) compiled per type.

The weights are the mma's A operand and the batch its N, as in the W4A16 and 8-bit tensor-core GEMVs
(kernels/tcgemv/tc_gemv.py, kernels/tcgemv/tc_gemv_q8.py), with nothing to convert: the weights (the row-major N x K
array reordered offline by `pack_f16_tc`, the same bytes) go from global memory straight into the registers of the warp
that needs them, each 16-byte load half of an mma fragment, 512 contiguous bytes per warp-wide load. Why: the
CUDA-core GEMV (`bf16_gemv`) multiplies each weight once per batch row, so its time grows from M = 4, and the wgmma
GEMM (`wg_bf16`) stages the weights through shared memory; this one reads the weights once at any M up to 16, as the
4-bit and 8-bit tensor-core GEMVs do.

`TABLE` is the one table of launch configurations: per batch bin, columns by the layer's row tiles per SM (as
kernels.tcgemv.tc_gemv's, whose `column` picks one). `choose_config` reads it; a benchmark may override any field.
CuPy is imported inside functions only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kernels import problems
from kernels.launch import Launch, TableRunner, bound_problem, check_aligned
from kernels.quant import quant
from kernels.registry import KernelSpec, Problem, check_batch
from kernels.tcgemv.tc_gemv import Columns, check_config, column
from kernels.toolchain import build
from models.errors import InputError
from models.kernel_terms import KernelFacts, cta_tiles_from

SOURCE, ENTRY = "gemv_f16_tc.cu", "gemv_f16_tc"
ROWS, CHUNK = 16, 64  # channels per row tile (the mma's M), K per chunk (four k-steps of 16)
M_MAX = 16


@dataclass(frozen=True)
class Kind:
    scheme: str
    dtype: str  # weights, activations and output: "bf16" or "f16" (kernels.problems' names)
    bf16: bool  # the .cu's F16_BF16


KINDS: dict[str, Kind] = {
    "bf16_tc_gemv": Kind("bf16", "bf16", bf16=True),
    "fp16_tc_gemv": Kind("fp16", "f16", bf16=False),
}


@dataclass(frozen=True)
class Config:
    nt: int  # n-tiles of 8 batch rows (M <= 8 nt)
    warps: int = 8  # per CTA, splitting the K chunks of its row tiles
    u: int = 1  # chunks of weights (2 KB per warp and row tile) each warp loads before the first mma
    tiles: int = 1  # row tiles of 16 channels per CTA: each x fragment a warp loads serves all of them
    minb: int = 1  # __launch_bounds__ minimum CTAs per SM (caps the registers)

    def options(self, bf16: bool) -> tuple[str, ...]:
        return (f"-DF16_BF16={int(bf16)}", f"-DTCF_NT={self.nt}", f"-DTCF_WARPS={self.warps}", f"-DTCF_U={self.u}",
                f"-DTCF_TILES={self.tiles}", f"-DTCF_MINB={self.minb}")

    def smem_bytes(self) -> int:
        return self.warps * ROWS * self.nt * 8 * 4


# H200 (bench/bench_tc_gemv.py --kernel bf16_tc_gemv, docs/kernels-tc-gemv.md "The 16-bit GEMVs"): at M <= 8 16 warps
# of one chunk each, fastest or within 1 % on four of the five layers of the first run (12288x4096: 4 % slower than 4
# warps of 2 chunks; 6144x4096 and 8192x8192, measured later: 3-9 % slower than 8 warps, 2 CTAs per SM — a middle
# column not adopted, no recording with it); at M 9-16 the same on 4096-channel layers (1.9 row tiles per SM), 8 warps
# under a 64-register cap (4 CTAs per SM) from 6144 channels (2.9 per SM: 14.27 against 16.70 us at M = 16 on
# 6144x4096, 32.72 against 35.75 on 8192x8192).
FEW_TILES_PER_SM = 2.5
TABLE: tuple[tuple[int, Columns], ...] = (  # (largest M, columns as kernels.tcgemv.tc_gemv's)
    (8, ((math.inf, Config(nt=1, warps=16, u=1, minb=2)),)),
    (16, ((FEW_TILES_PER_SM, Config(nt=2, warps=16, u=1, minb=2)), (math.inf, Config(nt=2, warps=8, u=1, minb=4)))),
)


def choose_config(M: int, N: int = 0, sms: int = 132, name: str = "bf16_tc_gemv", **override: Any) -> Config:
    """The table's configuration for batch M on a layer of N channels (N = 0: the last column) on `sms` SMs."""
    if not 1 <= M <= M_MAX:
        raise InputError(f"{name} takes M in [1, {M_MAX}], got M={M}")
    if name not in KINDS:
        raise InputError(f"no 16-bit tensor-core GEMV named {name!r}; known: {', '.join(KINDS)}")
    return check_config(name, replace(column(next(c for top, c in TABLE if M <= top), N, sms), **override), M)


def check_shape(spec: KernelSpec, M: int, N: int, K: int) -> None:
    check_batch(spec, M)
    if N < 1 or K < 1 or K % CHUNK:
        raise InputError(f"{spec.name} needs N >= 1 and K a positive multiple of {CHUNK}, got N={N}, K={K}")


def params(name: str) -> problems.Params:
    kind = KINDS[name]
    return problems.Params(kind.scheme, kind.dtype, kind.dtype)


def pack_f16_tc(w: Any, xp: Any = np) -> Any:
    """The kernel's weight layout from a row-major N x K array of 16-bit values (any 2-byte dtype; NumPy or CuPy via
    `xp`): for row tile T (16 channels, zero-padded past N), chunk c (64 of K), word j = 2 h + e and lane L =
    4 g + t, the eight values of channel 16 T + g + 8 e at k = 64 c + 32 h + 8 t .. + 7, at 16-byte index
    ((T * chunks + c) * 4 + j) * 32 + L (kernels/tcgemv/gemv_f16_tc.cu). Returns a flat array of the input's dtype."""
    N, K = (int(v) for v in w.shape)
    if K % CHUNK or w.dtype.itemsize != 2:
        raise InputError(f"pack_f16_tc takes 16-bit N x K weights with K a multiple of {CHUNK}, got {w.dtype} "
                         f"{N}x{K}")
    tiles = -(-N // ROWS)
    padded = xp.zeros((tiles * ROWS, K), dtype=w.dtype)
    padded[:N] = w
    # (T, e, g, c, h, t, elem) -> (T, c, h, e, g, t, elem)
    blocks = padded.reshape(tiles, 2, 8, K // CHUNK, 2, 4, 8).transpose(0, 3, 4, 1, 2, 5, 6)
    return xp.ascontiguousarray(blocks).reshape(-1)


def as_device(a: Any, bf16: bool) -> Any:
    """A float (or already converted) array as the kernel reads it: bf16 bit patterns (uint16) or fp16, on the
    device, C-contiguous."""
    import cupy as cp

    d = cp.asarray(a)
    if bf16:
        return cp.ascontiguousarray(d if d.dtype == cp.uint16 else quant.to_bf16_bits(d, cp))
    return cp.ascontiguousarray(d if d.dtype == cp.float16 else d.astype(cp.float16))


def make_launch(name: str, cfg: Config, M: int, N: int, K: int, x: Any, w: Any, out: Any) -> Launch:
    check_aligned(name, (x, w, out))
    func = build.function(SOURCE, ENTRY, cfg.options(KINDS[name].bf16))
    i32 = np.int32
    ntiles = -(-N // ROWS)
    return Launch(func, -(-ntiles // cfg.tiles), cfg.warps * 32, (w, x, out, i32(M), i32(N), i32(K)))


class TcGemvF16Runner(TableRunner):
    family, kinds = "16-bit tensor-core GEMV", KINDS
    shape_check, choose = staticmethod(check_shape), staticmethod(choose_config)

    def _job(self, cfg: Config) -> build.Job:
        return (SOURCE, ENTRY, build.device_arch(), cfg.options(KINDS[self.spec.name].bf16))

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy as cp

        self.check(M, N, K)
        bf16 = KINDS[self.spec.name].bf16
        inputs, xs, ws = self._packed.make(params(self.spec.name), M, N, K, seed=seed, reference=reference,
                                           pack=lambda w: (pack_f16_tc(as_device(w, bf16), cp),))
        xs = (as_device(xs[0], bf16),)
        out = cp.empty((M, N), dtype=cp.uint16 if bf16 else cp.float16)
        launch = make_launch(self.spec.name, self._config(M, N), M, N, K, xs[0], ws[0], out)
        return bound_problem(inputs, xs, ws, out, launch)

    def output(self, problem: Problem) -> Any:
        import cupy as cp

        out = problem.out
        if KINDS[self.spec.name].bf16:
            out = quant.from_bf16_bits(out, cp)
        return cp.asnumpy(out.astype(cp.float64))


def make_runner(spec: KernelSpec, group_size: int | None = None) -> TcGemvF16Runner:
    return TcGemvF16Runner(spec)


_GEOMETRY = ("one CTA per row tile of 16 channels (kernels.tcgemv.tc_gemv_f16.TABLE), warps splitting the K chunks, "
             "weights straight to registers (16-byte loads in the mma's fragment order, "
             "kernels.tcgemv.tc_gemv_f16.pack_f16_tc), sums across warps in shared memory")


def _spec(name: str, notes: str) -> KernelSpec:
    kind = KINDS[name]
    facts = KernelFacts("gemv", "mma_sync_bf16" if kind.bf16 else "mma_sync_f16", "none",
                        tuple((m, cols[0][1].nt * 8) for m, cols in TABLE), bn=ROWS, cta_tiles=cta_tiles_from(TABLE))
    return KernelSpec(name, kind.scheme, "nvrtc", "optimized", "kernels.tcgemv.tc_gemv_f16:make_runner", m_max=M_MAX,
                      source=SOURCE, entry=ENTRY, geometry=_GEOMETRY, notes=notes, facts=facts)


SPECS: tuple[KernelSpec, ...] = (
    _spec("bf16_tc_gemv", "bf16 weights (reordered offline, the same bytes) and activations, mma.sync m16n8k16 with "
          "the weights as A and the batch as N (padded to 8 or 16); fp32 sums over all of K; bf16 output"),
    _spec("fp16_tc_gemv", "fp16 weights (reordered offline, the same bytes) and activations, mma.sync m16n8k16 with "
          "the weights as A and the batch as N (padded to 8 or 16); fp32 sums over all of K; fp16 output"),
)
