"""The 8-bit GEMV-class kernels on tensor cores (batch 1-16): `fp8_tc_gemv` (e4m3 x e4m3) and `w8a8_tc_gemv` (int8 x
int8), one source (kernels/tcgemv/gemv_q8_tc.cu) compiled per scheme.

The weights are the mma's A operand and the batch its N, as in the W4A16 tensor-core GEMV (kernels/tcgemv/tc_gemv.py),
with no dequantization: the weights go from global memory straight into the registers of the warp that needs them, in
the layout of kernels/quant/pack_q8.py, int8 feeds the s8 mma as it is, e4m3 is converted to fp16 once per fragment (the
kind's `f16`), and the per-channel and per-token scales are applied once per output. Inputs are
those of the GEMM kernels of the same scheme (per-token quantized activations, per-channel weight scales), so the
families are compared on identical data.

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
from kernels.quant import pack_q8
from kernels.registry import KernelSpec, Problem, check_batch
from kernels.tcgemv.tc_gemv import FEW_TILES_PER_SM, Columns, check_config, column
from kernels.toolchain import build
from models.errors import InputError
from models.kernel_terms import KernelFacts, cta_tiles_from

SOURCE, ENTRY = "gemv_q8_tc.cu", "gemv_q8_tc"
ROWS, CHUNK = pack_q8.ROWS, pack_q8.CHUNK
M_MAX = 16  # measured to M = 64: from 32 on slower than the wgmma GEMMs on every shape (docs/kernels-tc-gemv.md)


@dataclass(frozen=True)
class Kind:
    scheme: str
    weight: str  # as kernels.problems reads them
    act: str
    s8: bool  # the .cu's Q8_S8: int8 operands and s32 sums (else e4m3 and fp32 sums)
    f16: bool  # e4m3 converted to fp16 once per fragment, f16 mma (Config.f16's default for this kernel)


# The e4m3 kernel runs the f16 mma: sm_90's e4m3 mma.sync was no faster at M <= 8 and up to 2x slower from M = 32
# (it converts both operands at every instruction); through f16 it runs within 4 % of the s8 kernel at M <= 16.
KINDS: dict[str, Kind] = {
    "fp8_tc_gemv": Kind("fp8", "e4m3", "e4m3", s8=False, f16=True),
    "w8a8_tc_gemv": Kind("w8a8", "w8", "i8", s8=True, f16=False),
}


@dataclass(frozen=True)
class Config:
    nt: int  # n-tiles of 8 batch rows (M <= 8 nt)
    warps: int = 8  # per CTA, splitting the K chunks of its row tiles
    u: int = 2  # chunks of weights each warp loads before the first mma
    tiles: int = 1  # row tiles of 16 channels per CTA: each x fragment a warp loads serves all of them
    minb: int = 1  # __launch_bounds__ minimum CTAs per SM (caps the registers)
    f16: bool = False  # e4m3 only: each fragment converted to fp16 once, f16 mma (not the e4m3 mma)

    def options(self, s8: bool) -> tuple[str, ...]:
        return (f"-DQ8_S8={int(s8)}", f"-DTCQ_NT={self.nt}", f"-DTCQ_WARPS={self.warps}", f"-DTCQ_U={self.u}",
                f"-DTCQ_TILES={self.tiles}", f"-DTCQ_MINB={self.minb}", f"-DQ8_F16={int(self.f16)}")

    def smem_bytes(self) -> int:
        return self.warps * ROWS * self.nt * 8 * 4


# H200, fp8 and w8a8 on 4096x4096, 4096x11008 (few), 22016x4096, 28672x8192 (many), docs/kernels-tc-gemv.md: at M <= 8
# one configuration is within 2.5 % of the best of seven on every shape; at M 9-16 the columns differ.
TABLE: tuple[tuple[int, Columns], ...] = (  # (largest M, columns as kernels.tcgemv.tc_gemv's); f16 comes from the kind
    (8, ((math.inf, Config(nt=1, warps=16, u=1, minb=2)),)),
    (16, ((FEW_TILES_PER_SM, Config(nt=2, warps=16, u=1, minb=1)), (math.inf, Config(nt=2, warps=8, u=1, minb=4)))),
)


def choose_config(M: int, N: int = 0, sms: int = 132, name: str = "fp8_tc_gemv", **override: Any) -> Config:
    """The table's configuration for batch M on a layer of N channels (N = 0: the last column) on `sms` SMs."""
    if not 1 <= M <= M_MAX:
        raise InputError(f"{name} takes M in [1, {M_MAX}], got M={M}")
    if name not in KINDS:
        raise InputError(f"no 8-bit tensor-core GEMV named {name!r}; known: {', '.join(KINDS)}")
    cfg = replace(column(next(c for top, c in TABLE if M <= top), N, sms), f16=KINDS[name].f16)
    cfg = replace(cfg, **override)
    if cfg.f16 and KINDS[name].s8:
        raise InputError(f"{name}: f16 converts e4m3 operands; an int8 kernel has nothing to convert")
    return check_config(name, cfg, M)


def check_shape(spec: KernelSpec, M: int, N: int, K: int) -> None:
    check_batch(spec, M)
    if N < 1 or K < 1 or K % CHUNK:
        raise InputError(f"{spec.name} needs N >= 1 and K a positive multiple of {CHUNK}, got N={N}, K={K}")


def params(name: str) -> problems.Params:
    kind = KINDS[name]
    return problems.Params(kind.scheme, kind.weight, kind.act)


def prepare_weights(w: Any) -> tuple[Any, ...]:
    """(packed codes, fp32 per-channel scales) from quant.FP8 (per channel) or quant.W8 on the device."""
    import cupy as cp

    scales = cp.asarray(w.scales)
    if scales.ndim != 1 or scales.size != w.codes.shape[0]:
        raise InputError(f"the 8-bit tensor-core GEMV takes one weight scale per channel, got {scales.shape}")
    return pack_q8.pack_q8_tc(cp.asarray(w.codes), cp), scales.astype(cp.float32)


def make_launch(name: str, cfg: Config, M: int, N: int, K: int, xs: tuple[Any, ...], ws: tuple[Any, ...],
                out: Any) -> Launch:
    check_aligned(name, xs + ws)
    func = build.function(SOURCE, ENTRY, cfg.options(KINDS[name].s8))
    i32 = np.int32
    ntiles = -(-N // ROWS)
    args = (ws[0], ws[1], xs[0], xs[1], out, i32(M), i32(N), i32(K))
    return Launch(func, -(-ntiles // cfg.tiles), cfg.warps * 32, args)


class TcGemvQ8Runner(TableRunner):
    family, kinds = "8-bit tensor-core GEMV", KINDS
    shape_check, choose = staticmethod(check_shape), staticmethod(choose_config)

    def _job(self, cfg: Config) -> build.Job:
        return (SOURCE, ENTRY, build.device_arch(), cfg.options(KINDS[self.spec.name].s8))

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy as cp

        self.check(M, N, K)
        inputs, xs, ws = self._packed.make(params(self.spec.name), M, N, K, seed=seed, reference=reference,
                                           pack=prepare_weights)
        xs = (xs[0], xs[1].astype(cp.float32))
        out = cp.empty((M, N), dtype=cp.float16)
        launch = make_launch(self.spec.name, self._config(M, N), M, N, K, xs, ws, out)
        return bound_problem(inputs, xs, ws, out, launch)


def make_runner(spec: KernelSpec, group_size: int | None = None) -> TcGemvQ8Runner:
    return TcGemvQ8Runner(spec)


_GEOMETRY = ("one CTA per row tile of 16 channels (kernels.tcgemv.tc_gemv_q8.TABLE), warps splitting the K chunks, "
             "weights straight to registers (16-byte loads in the mma's fragment order), sums across warps in shared "
             "memory")


def _spec(name: str, notes: str) -> KernelSpec:
    kind = KINDS[name]
    facts = KernelFacts("gemv", "mma_sync_s8" if kind.s8 else "mma_sync_f16", "e4m3" if kind.f16 else "none",
                        tuple((m, cols[0][1].nt * 8) for m, cols in TABLE), bn=ROWS, cta_tiles=cta_tiles_from(TABLE))
    return KernelSpec(name, kind.scheme, "nvrtc", "optimized", "kernels.tcgemv.tc_gemv_q8:make_runner", m_max=M_MAX,
                      min_cc=80 if kind.s8 else 89, source=SOURCE, entry=ENTRY, geometry=_GEOMETRY, notes=notes,
                      facts=facts)


SPECS: tuple[KernelSpec, ...] = (
    _spec("fp8_tc_gemv", "e4m3 weights and per-token e4m3 activations, each fragment converted to fp16 once "
          "(cvt.rn.f16x2.e4m3x2, exact) for mma.sync m16n8k16 with the weights as A and the batch as N (padded to 8 or "
          "16); fp32 sums over all of K; per-channel x per-token fp32 scales; fp16 output; activation quantization "
          "not timed"),
    _spec("w8a8_tc_gemv", "s8 mma.sync m16n8k32 with the weights as A and the batch as N (padded to 8 or 16); s32 "
          "sums over all of K; per-channel x per-token fp32 scales; fp16 output; activation quantization not timed"),
)
