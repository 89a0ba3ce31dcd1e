"""The W8A16 GEMV-class kernels on tensor cores: `w8a16_tc_gemv` (fp16 activations, the W8A16 scheme's) and
`w8a16_bf16_tc_gemv` (bf16 activations), one source (kernels/tcgemv/gemv_w8a16_tc.cu) compiled per activation type.

int8 per-channel weights (kernels/quant/quant.py W8: one fp16 scale per output row) are the A operand of mma.sync
m16n8k16 and the batch its N, as in the 8-bit tensor-core GEMVs (kernels/tcgemv/tc_gemv_q8.py, whose weight layout this
one shares, each byte stored as q + 128: kernels/quant/pack_q8.py `pack_w8a16_tc`): the weights go from global memory
straight into the registers of the warp that needs them, one 16-byte load per lane and k-step, are converted to fp16 /
bf16 exactly in registers (prmt + the 0x6400 magic number and hsub2 for fp16; prmt into fp32 2^23 + u and one FADD for
bf16), and the row scale multiplies each output once. Why: the CUDA-core `w8a16_gemv` multiplies each weight once per
batch row (its time grows with M: 0.37x cuBLAS bf16 at M = 16, issue 34), and no W8A16 kernel ran above M = 16.

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
from kernels.quant import pack_q8, quant
from kernels.registry import KernelSpec, Problem, check_batch
from kernels.tcgemv.tc_gemv import Columns, check_config, column
from kernels.toolchain import build
from models.errors import InputError
from models.kernel_terms import KernelFacts, cta_tiles_from

SOURCE, ENTRY = "gemv_w8a16_tc.cu", "gemv_w8a16_tc"
ROWS, CHUNK = pack_q8.ROWS, pack_q8.CHUNK


@dataclass(frozen=True)
class Kind:
    act: str  # activations and output, as kernels.problems names them: "f16" or "bf16"
    bf16: bool  # the .cu's W8_BF16


KINDS: dict[str, Kind] = {
    "w8a16_tc_gemv": Kind("f16", bf16=False),
    "w8a16_bf16_tc_gemv": Kind("bf16", bf16=True),
}


@dataclass(frozen=True)
class Config:
    nt: int  # n-tiles of 8 batch rows (M <= 8 nt)
    warps: int = 8  # per CTA, splitting the K chunks of its row tiles
    u: int = 1  # chunks of weights (1 KB per warp and row tile) each warp loads before the first mma
    tiles: int = 1  # row tiles of 16 channels per CTA: each x fragment a warp loads serves all of them
    minb: int = 1  # __launch_bounds__ minimum CTAs per SM (caps the registers)

    def options(self, bf16: bool) -> tuple[str, ...]:
        return (f"-DW8_BF16={int(bf16)}", f"-DTCW_NT={self.nt}", f"-DTCW_WARPS={self.warps}", f"-DTCW_U={self.u}",
                f"-DTCW_TILES={self.tiles}", f"-DTCW_MINB={self.minb}")

    def smem_bytes(self) -> int:
        return self.warps * ROWS * self.nt * 8 * 4


# Columns by the layer's row tiles (N / 16) per SM, as kernels.tcgemv.tc_gemv's. At M <= 8 (H200, bench/bench_tc_gemv.py
# --kernel w8a16_tc_gemv on 22016x4096, 4096x11008, 4096x4096 and 28672x8192, docs/kernels-tc-gemv.md "The W8A16
# GEMVs") the 8-bit GEMVs' configuration is fastest or within 2.2 % on all four (16 warps of one chunk each, 2 CTAs per
# SM). M 9-32 (H100 GPU-83193ee3, 2026-12-06, the same bench at M = 12, 16, 24, 32, chosen on 4096x4096, 4096x11008,
# 8192x8192, 12288x4096, 22016x4096 and 28672x8192): up to 2 row tiles per SM 16 warps of one row tile at M <= 16, 8
# warps at 17-32 (4096x4096 M = 32 11.66 us against 13.18 for 2 row tiles of 16 warps); up to 4 (8192) 8 warps, one
# row tile and 4 CTAs per SM at M <= 16, 2 row tiles and 2 CTAs at 17-32; up to 8 (12288, 14336) 4 warps, one row
# tile and 4 CTAs per SM (12288x4096 M = 16 and 32 at 1.14-1.26x this time with the wide column); wider 4 row tiles of
# 4 warps, 2 CTAs per SM, except at M 17-32 beyond 12 (28672): 2 row tiles of 4 warps, 2 chunks ahead (28672x8192
# M = 32 1.18x faster; the held-out 32000x4096 1.15x). Held out (14336x4096, 6144x4096, 5120x5120, 32000x4096): this
# table within 1.00-1.09x the fastest configuration tried at every M 12-32 on two H100s (GPU-83193ee3, GPU-1a7af0ce).
# M 33-64 (8 n-tiles) was 0.49-0.87x cuBLAS bf16 on every shape (H200): x, loaded per row-tile set, then moves more
# bytes than the weights.
FEW_TILES_PER_SM = 4
_WIDE = Config(nt=2, warps=4, u=1, tiles=4, minb=2)
TABLE: tuple[tuple[int, Columns], ...] = (  # (largest M, columns as kernels.tcgemv.tc_gemv's)
    (8, ((math.inf, Config(nt=1, warps=16, u=1, minb=2)),)),
    (16, ((2, Config(nt=2, warps=16, u=1, minb=1)),
          (FEW_TILES_PER_SM, Config(nt=2, warps=8, u=1, minb=4)),
          (8, Config(nt=2, warps=4, u=1, minb=4)),
          (math.inf, _WIDE))),
    (32, ((2, Config(nt=4, warps=8, u=1, minb=2)),
          (FEW_TILES_PER_SM, Config(nt=4, warps=8, u=1, tiles=2, minb=2)),
          (8, Config(nt=4, warps=4, u=1, minb=4)),
          (12, replace(_WIDE, nt=4)),
          (math.inf, Config(nt=4, warps=4, u=2, tiles=2, minb=2)))),
)
M_MAX = TABLE[-1][0]


def choose_config(M: int, N: int = 0, sms: int = 132, name: str = "w8a16_tc_gemv", **override: Any) -> Config:
    """The table's configuration for batch M on a layer of N channels (N = 0: the last column) on `sms` SMs."""
    if not 1 <= M <= M_MAX:
        raise InputError(f"{name} takes M in [1, {M_MAX}], got M={M}")
    if name not in KINDS:
        raise InputError(f"no W8A16 tensor-core GEMV named {name!r}; known: {', '.join(KINDS)}")
    return check_config(name, replace(column(next(c for top, c in TABLE if M <= top), N, sms), **override), M)


def check_shape(spec: KernelSpec, M: int, N: int, K: int) -> None:
    check_batch(spec, M)
    if N < 1 or K < 1 or K % CHUNK:
        raise InputError(f"{spec.name} needs N >= 1 and K a positive multiple of {CHUNK}, got N={N}, K={K}")


def params(name: str) -> problems.Params:
    return problems.Params("w8a16", "w8", KINDS[name].act)


def prepare_weights(w: Any) -> tuple[Any, ...]:
    """(packed biased codes, fp16 per-channel scales) from quant.W8 on the device."""
    import cupy as cp

    if not isinstance(w, quant.W8):
        raise InputError(f"the W8A16 tensor-core GEMV takes weights as kernels.quant.quant.W8, got {type(w).__name__}")
    scales = cp.ascontiguousarray(cp.asarray(w.scales).astype(cp.float16))
    if scales.ndim != 1 or scales.size != w.codes.shape[0]:
        raise InputError(f"the W8A16 tensor-core GEMV takes one weight scale per channel, got {scales.shape}")
    return pack_q8.pack_w8a16_tc(cp.asarray(w.codes), cp), scales


def make_launch(name: str, cfg: Config, M: int, N: int, K: int, x: Any, ws: tuple[Any, ...], out: Any) -> Launch:
    check_aligned(name, (x, ws[0], out))
    func = build.function(SOURCE, ENTRY, cfg.options(KINDS[name].bf16))
    i32 = np.int32
    ntiles = -(-N // ROWS)
    args = (ws[0], ws[1], x, out, i32(M), i32(N), i32(K))
    return Launch(func, -(-ntiles // cfg.tiles), cfg.warps * 32, args)


class TcGemvW8A16Runner(TableRunner):
    family, kinds = "W8A16 tensor-core GEMV", KINDS
    shape_check, choose = staticmethod(check_shape), staticmethod(choose_config)

    def _job(self, cfg: Config) -> build.Job:
        return (SOURCE, ENTRY, build.device_arch(), cfg.options(KINDS[self.spec.name].bf16))

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy as cp

        self.check(M, N, K)
        bf16 = KINDS[self.spec.name].bf16
        inputs, xs, ws = self._packed.make(params(self.spec.name), M, N, K, seed=seed, reference=reference,
                                           pack=prepare_weights)
        out = cp.empty((M, N), dtype=cp.uint16 if bf16 else cp.float16)
        launch = make_launch(self.spec.name, self._config(M, N), M, N, K, xs[0], ws, out)
        return bound_problem(inputs, xs, ws, out, launch)

    def output(self, problem: Problem) -> Any:
        import cupy as cp

        out = problem.out
        if KINDS[self.spec.name].bf16:
            out = quant.from_bf16_bits(out, cp)
        return cp.asnumpy(out.astype(cp.float64))


def make_runner(spec: KernelSpec, group_size: int | None = None) -> TcGemvW8A16Runner:
    return TcGemvW8A16Runner(spec)


_GEOMETRY = ("one CTA per 1-2 row tiles of 16 channels (kernels.tcgemv.tc_gemv_w8a16.TABLE), warps splitting the "
             "K chunks, weights straight to registers (16-byte loads in the mma's fragment order, "
             "kernels.quant.pack_q8.pack_w8a16_tc), sums across warps in shared memory")


def _spec(name: str, notes: str) -> KernelSpec:
    kind = KINDS[name]
    facts = KernelFacts("gemv", "mma_sync_bf16" if kind.bf16 else "mma_sync_f16", "w8",
                        tuple((m, cols[0][1].nt * 8) for m, cols in TABLE), bn=ROWS, cta_tiles=cta_tiles_from(TABLE))
    return KernelSpec(name, "w8a16", "nvrtc", "optimized", "kernels.tcgemv.tc_gemv_w8a16:make_runner", m_max=M_MAX,
                      source=SOURCE, entry=ENTRY, geometry=_GEOMETRY, notes=notes, facts=facts)


SPECS: tuple[KernelSpec, ...] = (
    _spec("w8a16_tc_gemv", "int8 per-channel weights (fp16 scale per row) converted to fp16 in registers (prmt + "
          "0x6400 magic, hsub2; exact), fp16 activations, mma.sync m16n8k16 with the weights as A and the batch as N "
          "(padded to 8, 16 or 32); fp32 sums over all of K, the row scale applied once; fp16 output"),
    _spec("w8a16_bf16_tc_gemv", "int8 per-channel weights (fp16 scale per row) converted to bf16 in registers (prmt "
          "into fp32 2^23 + u, FADD, upper halves; exact), bf16 activations, mma.sync m16n8k16 bf16 with the weights "
          "as A and the batch as N (padded to 8, 16 or 32); fp32 sums over all of K, the row scale applied once; "
          "bf16 output"),
)
