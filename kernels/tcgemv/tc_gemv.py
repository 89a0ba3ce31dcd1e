"""The W4A16 GEMV-class kernel on tensor cores (batch 1-16): `w4a16_tc_gemv` (kernels/tcgemv/gemv_w4a16_tc.cu).

The weights are the mma's A operand and the batch its N, so one conversion of a weight serves 8 or 16 batch rows;
the CUDA-core GEMV (`w4a16_gemv`) pays the products of every batch row on CUDA cores instead. The weights go from
global memory straight to the registers of the warp that needs them, in the layout of kernels/quant/pack_w4.py
`pack_w4a16_tc`.

`TABLE` is the one table of launch configurations: per batch bin, columns by the layer's row tiles per SM (with few,
warps split K more finely, so each SM still has enough loads in flight); measured on the H200
(docs/kernels-tc-gemv.md). `choose_config` reads it; a benchmark may override any field.
CuPy is imported inside functions only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kernels import problems
from kernels.gemv import gemv
from kernels.launch import BoundLaunchRunner, Launch, bound_problem, check_aligned, device_sms
from kernels.quant import pack_w4, quant
from kernels.registry import KernelSpec, Problem, check_batch
from kernels.toolchain import build
from models.errors import InputError
from models.kernel_terms import KernelFacts, cta_tiles_from

NAME = "w4a16_tc_gemv"
SOURCE, ENTRY = "gemv_w4a16_tc.cu", "gemv_w4a16_tc"
ROWS, CHUNK = pack_w4.TC_ROWS, pack_w4.TC_CHUNK  # channels per row tile (the mma's m), k per lane load set
M_MAX = 16
SMEM_LIMIT = 48 * 1024  # the tensor-core GEMVs' static shared memory (the cross-warp sums): the default limit


@dataclass(frozen=True)
class Config:
    nt: int  # n-tiles of 8 batch rows (M <= 8 nt)
    warps: int = 8  # per CTA, splitting the K groups of its row tiles
    u: int = 2  # groups of weights each warp loads before converting the first
    tiles: int = 1  # row tiles of 16 channels per CTA: each x fragment a warp loads serves all of them
    wscale: bool = False  # the scale multiplies the converted weights in fp16 (no per-group fp32 sums to hold)
    minb: int = 1  # __launch_bounds__ minimum CTAs per SM (caps the registers)

    def options(self, group_size: int) -> tuple[str, ...]:
        return (f"-DTCG_NT={self.nt}", f"-DTCG_WARPS={self.warps}", f"-DTCG_U={self.u}", f"-DTCG_TILES={self.tiles}",
                f"-DTCG_WSCALE={int(self.wscale)}", f"-DTCG_MINB={self.minb}", f"-DW4_GROUP={group_size}")

    def smem_bytes(self) -> int:
        return self.warps * ROWS * self.nt * 8 * 4


# Per batch bin, configurations by the layer's row tiles (N / 16) per SM: a column serves layers with at most its
# number (the last, any number). On the H200 (132 SMs, docs/kernels-tc-gemv.md): at M <= 8, 4096 channels (1.9 per
# SM) took the first column, 22016 and 28672 (10, 14 per SM) the second. At M 9-16: up to 2 per SM (4096, 2560, 1536
# channels) one row tile per CTA with 16 warps under a 64-register cap, as at M <= 8 (on an H100, 2026-12-05:
# 4096x4096 6.40 us against 7.52 with 2 row tiles, which leave 4 of 132 SMs idle; 4096x11008 12.89 against 15.12);
# up to 3 per SM (5120, 6144) one row tile, 8 warps, no cap (6144x4096 8.04 against 9.40, 5120x5120 9.29 against
# 14.34); up to 5 (8192) 8 warps, 1 group ahead and the scale in the weights on 2 row tiles (H200: 8192x8192 16.1
# against 19.9 and 21.1); beyond (12288 and wider) 4 warps with 2 CTAs per SM, which was 22-26 % faster than 4 row
# tiles per CTA on 12288x4096, 28672x8192 and 32000x4096 and 6 % slower on 22016x4096 (H200).
Columns = tuple[tuple[float, Config], ...]  # (most row tiles per SM, configuration), ascending, the last math.inf
FEW_TILES_PER_SM = 4  # the M <= 8 bin's boundary here, the M 9-16 bin's in kernels.tcgemv.tc_gemv_q8
# The M 9-16 wide columns keep the scale on the fp32 sums (no `wscale`): with the pointer walk of gemv_w4a16_tc.cu
# 251 instead of 386 instructions per main-loop iteration on the widest column (SASS, cuobjdump of the NVRTC sm_90
# cubins). The walk's pointers take 86 registers in the <= 3 column (79 before): minb=3 keeps its 3 CTAs per SM (80
# registers, no local memory); unbounded it ran 2: 5120x5120 M = 16 11.82 against 9.25 us with minb=3 (one H100).
TABLE: tuple[tuple[int, Columns], ...] = (  # (largest M, columns)
    (8, ((FEW_TILES_PER_SM, Config(nt=1, warps=16, u=1, minb=2)), (math.inf, Config(nt=1, warps=8, u=2, minb=4)))),
    (16, ((2, Config(nt=2, warps=16, u=1, minb=2)),
          (3, Config(nt=2, warps=8, u=1, minb=3)),
          (5, Config(nt=2, warps=8, u=1, tiles=2, minb=2)),
          (math.inf, Config(nt=2, warps=4, u=1, tiles=2, minb=2)))),
)


def column(columns: Columns, N: int, sms: int) -> Config:
    """The column for a layer of N channels on `sms` SMs (N = 0: the last column)."""
    per_sm = -(-N // ROWS) / sms if N > 0 else math.inf
    return next(c for top, c in columns if per_sm <= top)


def check_config(name: str, cfg: Any, M: int, smem_limit: int = SMEM_LIMIT) -> Any:
    """A tensor-core GEMV configuration (this module's, kernels.tcgemv.tc_gemv_q8's or kernels.tcgemv.tc_gemv_f16's
    Config) that can run batch M: 8 * nt >= M, 1-32 warps, u, tiles and minb >= 1, its cross-warp sums within
    `smem_limit` bytes of static shared memory. Returns it; InputError in one line otherwise."""
    if cfg.nt * 8 < M or not 1 <= cfg.warps <= 32 or min(cfg.u, cfg.tiles, cfg.minb) < 1:
        raise InputError(f"{name}: config {cfg} cannot run M={M} (needs 8 * nt >= M, 1-32 warps, u, tiles and minb "
                         ">= 1)")
    if cfg.smem_bytes() > smem_limit:
        raise InputError(f"{name}: config {cfg} needs {cfg.smem_bytes()} bytes of shared memory (limit {smem_limit})")
    return cfg


def choose_config(M: int, N: int = 0, sms: int = 132, **override: Any) -> Config:
    """The table's configuration for batch M on a layer of N channels (N = 0: the last column) on `sms` SMs."""
    if not 1 <= M <= M_MAX:
        raise InputError(f"{NAME} takes M in [1, {M_MAX}], got M={M}")
    return check_config(NAME, replace(column(next(c for top, c in TABLE if M <= top), N, sms), **override), M)


def check_shape(spec: KernelSpec, M: int, N: int, K: int, group_size: int) -> None:
    check_batch(spec, M)
    if N < 1 or K < 1:
        raise InputError(f"{spec.name}: N and K must be >= 1, got N={N}, K={K}")
    quant.check_w4_shape(N, K, group_size)
    if group_size % CHUNK:
        raise InputError(f"{spec.name}: the group size must be a multiple of {CHUNK} (a lane's k-chunk), "
                         f"got G={group_size}")


def params(group_size: int) -> problems.Params:
    return problems.Params("w4a16", "w4", "f16", group_size=group_size)


def prepare_weights(w: quant.W4) -> tuple[Any, ...]:
    import cupy as cp

    if not isinstance(w, quant.W4):
        raise InputError(f"{NAME} takes weights as kernels.quant.quant.W4, got {type(w).__name__}")
    return pack_w4.pack_w4a16_tc(quant.W4(cp.asarray(w.codes), cp.asarray(w.scales), cp.asarray(w.zeros),
                                          w.group_size), cp)


def make_launch(cfg: Config, M: int, N: int, K: int, group_size: int, xs: tuple[Any, ...], ws: tuple[Any, ...],
                out: Any) -> Launch:
    check_aligned(NAME, xs + ws)
    func = build.function(SOURCE, ENTRY, cfg.options(group_size))
    i32 = np.int32
    ntiles = -(-N // ROWS)
    args = (ws[0], ws[1], xs[0], out, i32(M), i32(N), i32(K))
    return Launch(func, -(-ntiles // cfg.tiles), cfg.warps * 32, args)


class TcGemvRunner(BoundLaunchRunner):
    def __init__(self, spec: KernelSpec, group_size: int | None = None, config: dict[str, Any] | None = None) -> None:
        self.spec = spec
        self.group_size = group_size or gemv.W4_GROUP
        self.config = dict(config or {})
        self._packed = problems.PackedCache(spec.name)

    def check(self, M: int, N: int, K: int) -> None:
        check_shape(self.spec, M, N, K, self.group_size)
        self._config(M, N)

    def compile_jobs(self, M: int, N: int, K: int) -> list[build.Job]:
        return [(SOURCE, ENTRY, build.device_arch(), self._config(M, N).options(self.group_size))]

    def _config(self, M: int, N: int) -> Config:
        return choose_config(M, N, device_sms(), **self.config)

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy as cp

        self.check(M, N, K)
        inputs, xs, ws = self._packed.make(params(self.group_size), M, N, K, seed=seed, reference=reference,
                                           pack=prepare_weights)
        out = cp.empty((M, N), dtype=cp.float16)
        launch = make_launch(self._config(M, N), M, N, K, self.group_size, xs, ws, out)
        return bound_problem(inputs, xs, ws, out, launch)


def make_runner(spec: KernelSpec, group_size: int | None = None) -> TcGemvRunner:
    return TcGemvRunner(spec, group_size=group_size)


SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(NAME, "w4a16", "nvrtc", "optimized", "kernels.tcgemv.tc_gemv:make_runner", m_max=M_MAX, source=SOURCE,
               entry=ENTRY,
               geometry="one CTA per 1-2 row tiles of 16 channels (kernels.tcgemv.tc_gemv.TABLE), warps splitting "
               "the K groups, weights straight to registers (16-byte loads in the mma's fragment order), sums across "
               "warps in shared memory",
               notes="G=128 (any multiple of 64); mma.sync m16n8k16 f16 with the weights as A and the batch as N "
               "(padded to 8 or 16); 0x6400 magic + lop3, q - z exact; the scale on the fp32 sums per group; zero "
               "point stored as 8 bits in the "
               "layout (4 counted by models.schemes)",
               facts=KernelFacts("gemv", "mma_sync_f16", "w4", tuple((m, cols[0][1].nt * 8) for m, cols in TABLE),
                                 bn=ROWS, cta_tiles=cta_tiles_from(TABLE))),
)
