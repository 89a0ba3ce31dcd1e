"""wgmma GEMM kernels (Hopper only, sm_90a): registry entries and their runners.

Kernels (kernels/wgmma/wg_gemm.cu, wg_gemm_w4a16.cu), y[M, N] = x[M, K] . W[N, K]^T with the weights as wgmma's A
operand (64 channels per warpgroup and block) and the batch as its N (16..256 per instruction):
- wg_bf16 / wg_fp16: 16-bit weights and activations (HGMMA), fp32 accumulation, output in the input's type.
- wg_w8a8: int8 x int8 (IGMMA), int32 accumulation, per-channel x per-token fp32 rescale, fp16 out.
- wg_fp8: e4m3 x e4m3 on the native FP8 tensor cores (QGMMA), fp32 accumulation, same scales, fp16 out.
- wg_w4a16: int4 weights (tc_w4a16's packed operands) dequantized into A fragments in registers, fp16 x from shared
  memory (HGMMA with register A), fp32 accumulation, fp16 out.
The inputs, their quantization and the float64 references are those of the mma.sync kernels of the same scheme
(kernels.tensorcore.tensorcore), so the two families are compared on identical data. The sm_90a target runs on compute
capability 9.0 only (H100, H200, GH200), hence min_cc = max_cc = 90.

The tile per batch tile BM (16..256, the smallest holding M; M > 256 is not accepted) is `WG_TILES[bm]` (W4_TILES for
w4a16), or on layers of at most 4096 output channels their band's table (WG_BANDS: one warpgroup, 64 channels):
WG warpgroups, STAGES-deep pipeline, KT bytes of K per stage, cp.async by every thread or TMA by a producer warp
(`tma`), MB blocks of 64 channels per warpgroup.
CuPy is imported inside functions only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kernels.registry import KernelSpec, Problem, check_batch
from kernels.tensorcore.tensorcore import _LAYOUT, W4_GROUP, TensorCoreRunner, TileConfig, device_sms, ktiles_of
from kernels.toolchain.cuda_driver import max_active_clusters, tma_map
from models.errors import InputError
from models.kernel_terms import (
    ALIGNED_GRID_MIN_USE,
    CLUSTER_GRID_MIN_USE,
    CLUSTER_PIECES_MAX,
    STREAM_K_CTAS,
    KernelFacts,
    cluster_pieces,
    m_tiles_from,
)

_GEOMETRY = ("wgmma m64nBMk16/k32 with the weights as A: 64*WG channels x BM batch rows per CTA (BM = 16..256, the "
             "smallest holding M; WG = 1 on layers of <= 4096 channels, WG_BANDS), STAGES-deep pipeline of KT-byte "
             "k-tiles (cp.async, or TMA by a producer warp) in the 128-byte swizzle layout, one wgmma group in "
             "flight; persistent grid over (n-tile, k-tile): whole tiles or evenly split ones where they keep the SMs "
             "busy, else stream-K (models.kernel_terms), a split tile's pieces summed in their cluster's distributed "
             "shared memory or through per-CTA slots (kernels.wgmma.wgmma.WG_TILES)")


_W4_GEOMETRY = ("wgmma m64nBMk16 with the dequantized weights as A from registers: 64*WG*MB channels x BM batch "
                "rows per CTA (BM = 16..128, M > 128 in 128-row m-tiles), WG math warpgroups + a producer warp (bulk "
                "copies of the packed codes and scales, a TMA box of x), STAGES-deep mbarrier pipeline of 128-deep "
                "k-tiles; persistent grid over (n-tile, k-tile) as the other wgmma kernels, split tiles summed "
                "through per-CTA slots (kernels.wgmma.wgmma.W4_TILES)")


def _spec(name: str, scheme: str, op: str, notes: str, source: str = "wg_gemm.cu",
          geometry: str = _GEOMETRY) -> KernelSpec:
    return KernelSpec(name=name, scheme=scheme, backend="nvrtc", role="optimized",
                      runner="kernels.wgmma.wgmma:make_runner", m_min=1, m_max=256, prefer_from=16, min_cc=90,
                      max_cc=90,
                      source=source, entry=op, geometry=geometry, notes=notes)


SPECS: tuple[KernelSpec, ...] = (
    _spec("wg_bf16", "bf16", "OpBF16", "wgmma (HGMMA) bf16 -> fp32, sm_90a; W row-major as given; bf16 output"),
    _spec("wg_fp16", "fp16", "OpFP16", "wgmma (HGMMA) f16 -> fp32, sm_90a; W row-major as given; fp16 output"),
    _spec("wg_w8a8", "w8a8", "OpW8A8", "wgmma (IGMMA) s8 -> s32, sm_90a; fp32 per-channel x per-token rescale in "
          "the epilogue; fp16 output; activation quantization not timed"),
    _spec("wg_fp8", "fp8", "OpFP8", "native FP8: wgmma (QGMMA) e4m3 x e4m3 -> fp32, sm_90a, the sums added into "
          "fp32 registers every 512 of K (batch tiles <= 128); per-channel x per-token fp32 scales; fp16 output; "
          "activation quantization not timed"),
    _spec("wg_w4a16", "w4a16", "w4", "wgmma (HGMMA) f16 with A from registers, sm_90a: int4 G=128 in the "
          "kernels.quant.pack_tc layout (the tc_w4a16 operands), fp16 scale + fp16 zero per group, 0x6400 dequant and "
          "one HMUL2 by the scale per pair; fp16 x and y", source="wg_gemm_w4a16.cu", geometry=_W4_GEOMETRY),
)


@dataclass(frozen=True)
class WgTile:
    warpgroups: int
    stages: int
    kt: int  # bytes of K per stage
    tma: bool = False  # a producer warp fills the stages with TMA (wg_gemm_tma) instead of every thread's cp.async
    mb: int = 1  # blocks of 64 channels per warpgroup (TMA kernel only): 2 halves the x traffic per weight byte
    bm: int = 0  # batch rows per m-tile, one of the table's (benchmarks); 0: the table's batch tile for M


def _batch_rows(M: int, tile: WgTile | None, table: dict[int, WgTile], default: int) -> int:
    if not tile or not tile.bm:
        return default
    if tile.bm not in table:
        raise InputError(f"batch tile {tile.bm} is not one of this kernel's ({', '.join(map(str, sorted(table)))})")
    return tile.bm


# Batch tile -> its tile. Shared memory per CTA: stages * (64 * warpgroups + bm) * kt + 1024 bytes (<= 227 KB).
# From the H200 tile benchmarks (docs/kernels-wgmma.md): the cp.async kernel to BM = 64 (two 64-channel blocks per
# warpgroup and 4-warpgroup 256-channel tiles were slower), the TMA kernel from BM = 128 (with the slot fix-up, bf16
# 63.2 / 38.3 us against 64.2 / 39.2 for cp.async at 128; 22016x4096 at 256: 130 us against 151 before it); 6 stages
# at BM = 128 (bf16 57.2 / 35.1 us against 60.6 / 36.4 with 4, fp8 41.1 / 26.0 against 41.9 / 26.5; at 256 the 4
# stages stay: 3 stages or 256-byte k-tiles were 6-35 % slower).
WG_TILES: dict[int, WgTile] = {
    16: WgTile(2, 6, 256), 32: WgTile(2, 5, 256), 64: WgTile(2, 4, 256), 128: WgTile(2, 6, 128, True, 1),
    256: WgTile(2, 4, 128, True, 1),
}
SMEM_LIMIT = 227 * 1024
# Narrow layers: (largest N, batch tile -> tile), ascending; wider layers take WG_TILES. Tiles of one warpgroup (64
# channels) double the tiles of a layer whose 128-channel tiles would fill at most a quarter of an H200's SMs, so its
# grid (split pieces in clusters, or whole tiles) keeps more SMs streaming; layers of 2048 channels stop at 64-row
# m-tiles (M > 64: 2 or 4 m-tiles of whole or 2-piece tiles instead of 3-piece ones). H200 (docs/kernels-wgmma.md,
# eighth pass): wg_fp8 4096x4096 M = 1 / 32 / 128 / 256 8.53 / 9.13 / 12.45 / 18.59 -> 7.51 / 8.55 / 10.65 / 15.50
# us, 2048x2048 M = 256 13.28 -> 7.67; 6144 channels and wider lose (6144x4096 M = 128 15.7 against 13.9). At
# M = 129..256, 128-row m-tiles of whole tiles were faster on 4096x4096 (13.66 us) but slower on the long-K layers
# (4096x14336 33.07 against 30.28), hence 256.
WG_BANDS: tuple[tuple[int, dict[int, WgTile]], ...] = (
    (2048, {16: WgTile(1, 8, 256), 32: WgTile(1, 8, 256), 64: WgTile(1, 8, 128, True)}),
    (4096, {16: WgTile(1, 8, 256), 32: WgTile(1, 8, 256), 64: WgTile(1, 8, 128, True),
            128: WgTile(1, 8, 128, True), 256: WgTile(1, 5, 128, True)}),
)


def tile_table(N: int | None) -> dict[int, WgTile]:
    """The batch-tile table of a layer of N output channels (None: the widest layers', WG_TILES)."""
    return next((t for n_max, t in WG_BANDS if N is not None and N <= n_max), WG_TILES)


def batch_tile(M: int, table: dict[int, WgTile] = WG_TILES) -> int:
    """The table's batch tile for M: the smallest holding M, else the largest (M beyond it runs several m-tiles)."""
    return next((b for b in sorted(table) if M <= b), max(table))


def tile_config(M: int, tile: WgTile | None = None, N: int | None = None) -> TileConfig:
    """The launch shape for batch M on a layer of N output channels (pure arithmetic; None: the widest layers'
    table); `tile` overrides the tables (benchmarks; its batch tile WG_TILES' for M unless it forces one)."""
    table = WG_TILES if tile else tile_table(N)  # a forced tile ignores the narrow bands
    bm = _batch_rows(M, tile, table, batch_tile(M, table))
    t = tile or table[bm]
    bn = 64 * t.warpgroups * t.mb
    smem = t.stages * (bn + bm) * t.kt + 1024  # + slack to align the stages to 1 KB (the swizzle's period)
    if (t.stages < (2 if t.tma else 3) or t.kt % 128 or smem > SMEM_LIMIT or (t.mb != 1 and not t.tma)
            or bn > 256 or t.mb * bm > 256):
        raise InputError(f"wgmma tile {t} at BM={bm} needs >= 3 stages (2 with TMA), a k-tile of whole 128-byte "
                         f"rows, <= {SMEM_LIMIT} bytes of shared memory (it asks {smem}), mb > 1 only with TMA, "
                         f"at most 256 channels per CTA and mb * BM <= 256 (accumulator registers)")
    threads = 128 * t.warpgroups + (32 if t.tma else 0)
    return TileConfig(bm, t.stages, -(-M // bm), smem, threads, t.kt, "wg-tma" if t.tma else "wg", bn)


# persistent_grid's choice with split tiles as clusters where the kernel declares them (the default), the same grid with
# every split tile summed through slots in global memory, or stream-K over every SM (benchmarks)
GRIDS = ("rule", "rule-slots", "stream-k")


def cluster_fits(pieces: int, tile_words: int, threads: int, stage_bytes: int) -> bool:
    """Whether the other pieces' parts of a tile of tile_words accumulators (threads math threads) fit the stages
    (finish_cluster: each CTA receives pieces - 1 rows of ceil(groups / pieces) 16-byte groups per thread)."""
    groups = tile_words // threads // 4
    return (pieces - 1) * -(-groups // pieces) * threads * 16 <= stage_bytes


class WgmmaRunner(TensorCoreRunner):
    """Runner for one wgmma kernel; `tile` forces one WgTile at every M (benchmarks), None follows WG_TILES; `grid`
    one of GRIDS."""

    def __init__(self, spec: KernelSpec, per_sm: int | None = None, tile: WgTile | None = None,
                 options: tuple[str, ...] = (), group_size: int | None = None, grid: str = "rule"):
        if grid not in GRIDS:
            raise InputError(f"unknown wgmma grid {grid!r}; known: {', '.join(GRIDS)}")
        super().__init__(spec, per_sm, None, group_size)
        self.tile = tile
        self.options = options
        self.grid = grid
        self._resident: dict[tuple[str, int], int] = {}  # (instance, cluster size) -> clusters resident at once

    def compile_jobs(self, M: int, N: int, K: int) -> list[tuple[str, str, str, tuple[str, ...]]]:
        """The tile's instance, and the cluster instances the rule may take on this device: the largest piece count
        whose clusters would all be resident if none were lost to the GPCs' sizes, and the one below (one CTA per
        SM, as in every registered tile but w4a16's at BM = 16; no GPU here: the plain instance only)."""
        cfg = self.config(M, N, K)
        configs = [cfg]
        sms, share = device_sms(), self._cluster_share()
        if sms and share:
            tiles, ktiles = N // cfg.bn, ktiles_of(self.spec.scheme, K, cfg)
            slots = sms // cfg.m_tiles
            fits = [c for c in range(2, CLUSTER_PIECES_MAX + 1)
                    if cluster_fits(c, cfg.bm * cfg.bn, self._math_threads(cfg), cfg.smem_bytes - 1024)
                    and cluster_pieces(tiles, ktiles, slots, {c: slots // c}, share) == c]
            configs += [replace(cfg, cluster=c) for c in fits[-2:]]
        return [(self.spec.source, self._expression(c), "sm_90a", self.options) for c in configs]

    @staticmethod
    def _math_threads(cfg: TileConfig) -> int:
        return cfg.threads - (32 if cfg.variant in ("wg-tma", "wg-w4") else 0)

    def config(self, M: int, N: int, K: int) -> TileConfig:
        return tile_config(M, self.tile, N)

    def check(self, M: int, N: int, K: int) -> None:
        check_batch(self.spec, M)
        cfg = tile_config(M, self.tile, N)
        elem = _LAYOUT[self.spec.scheme][0]
        if N <= 0 or K <= 0 or N % cfg.bn or (K * elem) % cfg.kt:
            raise InputError(f"kernel {self.spec.name} needs N a multiple of {cfg.bn} and K a multiple of "
                             f"{cfg.kt // elem}, got N={N}, K={K}")

    def _expression(self, cfg: TileConfig) -> str:
        """The template instance (NVRTC name expression) of this tile."""
        wgs = cfg.threads // 128
        cl = f"_cluster<wg::{self.spec.entry}" if cfg.cluster > 1 else f"<wg::{self.spec.entry}"
        tail = f", {cfg.cluster}>" if cfg.cluster > 1 else ">"
        if cfg.variant == "wg-tma":
            mb = cfg.bn // (64 * wgs)
            return f"wg_gemm_tma{cl}, {cfg.bm}, {wgs}, {mb}, {cfg.stages}, {cfg.kt}{tail}"
        return f"wg_gemm{cl}, {cfg.bm}, {wgs}, {cfg.stages}, {cfg.kt}{tail}"

    def _cluster_share(self) -> float:
        return self.spec.facts.cluster_grid if self.grid == "rule" else 0.0

    def _pieces(self, fn: Any, cfg: TileConfig, tiles_n: int, ktiles: int) -> int:
        """Pieces per tile of the clustered split the rule takes here (models.kernel_terms.cluster_pieces), with
        this device's resident clusters of each size for this kernel; 0: none (slots or stream-K)."""
        share = self._cluster_share()
        if not share:
            return 0
        sms, per_sm = self._sms_and_per_sm(fn, cfg)
        resident = {}
        for c in range(2, CLUSTER_PIECES_MAX + 1):
            if cluster_fits(c, cfg.bm * cfg.bn, self._math_threads(cfg), cfg.smem_bytes - 1024):
                key = (self._expression(cfg), c)
                if key not in self._resident:
                    try:
                        self._resident[key] = max_active_clusters(fn, cfg.threads, cfg.smem_bytes, c)
                    except RuntimeError:  # a driver that cannot say: no clusters of this size, the slot grid
                        self._resident[key] = 0
                resident[c] = self._resident[key] // cfg.m_tiles
        return cluster_pieces(tiles_n, ktiles, max(1, sms * per_sm // cfg.m_tiles), resident, share)

    def _grid(self, fn: Any, cfg: TileConfig, tiles_n: int, ktiles: int) -> int:
        s = self._pieces(fn, cfg, tiles_n, ktiles)
        return s * tiles_n if s else super()._grid(fn, cfg, tiles_n, ktiles)

    def _clustered(self, problem: Problem) -> TileConfig:
        """The problem's config with the cluster its grid takes (the pieces of each split tile), if any."""
        cfg = problem.tc_config
        tiles_n, ktiles = problem.N // cfg.bn, ktiles_of(self.spec.scheme, problem.K, cfg)
        s = self._pieces(self._kernel(cfg), cfg, tiles_n, ktiles)
        return replace(cfg, cluster=s) if s else cfg

    def _kernel(self, cfg: TileConfig) -> Any:
        from kernels.toolchain import build

        expr = self._expression(cfg)  # names the whole tile, so it is the cache key
        if expr not in self._kernels:
            fn = build.arch_function(self.spec.source, expr, "sm_90a", self.options)
            fn.max_dynamic_shared_size_bytes = cfg.smem_bytes
            self._kernels[expr] = fn
        return self._kernels[expr]

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        problem = super().make(M, N, K, seed=seed, reference=reference)
        cfg = problem.tc_config = self._clustered(problem)
        if cfg.variant == "wg-tma":
            import cupy

            a = problem.arrays
            k_bytes = K * _LAYOUT[self.spec.scheme][0]
            maps = tma_map(a["w"].data.ptr, N, k_bytes, cfg.bn) + tma_map(a["x"].data.ptr, M, k_bytes, cfg.bm)
            a["maps"] = cupy.asarray(np.frombuffer(maps, dtype=np.uint8))
        return problem

    def _aligned_share(self) -> float:
        """Whole tiles or evenly split ones where they keep the kernel's declared share of SMs busy (the rule)."""
        return self.spec.facts.aligned_grid if self.grid != "stream-k" else 0.0

    def launch(self, problem: Problem) -> None:
        if problem.tc_config.variant != "wg-tma":
            return super().launch(problem)
        a = problem.arrays
        grid, block, smem = problem.tc_launch
        k_bytes = problem.K * _LAYOUT[self.spec.scheme][0]
        args = (a["maps"], problem.out, a["ws"], a["counters"], a["sa"], a["sb"], np.int32(problem.M),
                np.int32(problem.N), np.int32(k_bytes))
        self._kernel(problem.tc_config)(grid, block, args, shared_mem=smem)


def parse_tile(text: str) -> WgTile:
    """"2x4x128" (warpgroups x stages x k-tile bytes, cp.async), "2x4x128xt" (TMA), "2x4x128xt2" (TMA, 2 blocks of
    64 channels per warpgroup); "@BM" after any of them forces the batch rows per m-tile ("1x8x128xt@128")."""
    body, at, rows = text.lower().partition("@")
    parts = body.split("x")
    try:
        wgs, stages, kt = (int(v) for v in parts[:3])
        tma = len(parts) == 4 and parts[3].startswith("t")
        mb = int(parts[3][1:] or 1) if tma else 1
        bm = int(rows) if at else 0
        if len(parts) not in (3, 4) or (len(parts) == 4 and not tma) or bm < 0 or (at and not bm):
            raise ValueError
    except ValueError:
        raise InputError(f"bad wgmma tile {text!r}; expected WGxSTAGESxKT, optionally followed by xt or xtMB, "
                         "then optionally @BM (e.g. 2x4x128xt2, 1x8x128xt@128)") from None
    return WgTile(wgs, stages, kt, tma, mb, bm)


# W4A16: batch tile -> its tile. The k-tile is 128 deep (256 bytes of x); mb = 2: each warpgroup a whole 128-channel
# block, mb = 1: two warpgroups share a block (one row block of 64 channels each), so warpgroups * mb is even.
# With 2 warpgroups of mb 2 (9 warps) ptxas caps registers at 168 per thread and spills from BM = 32.
# H200, with the slot fix-up (docs/kernels-wgmma.md, call 5): 1 warpgroup x 6 stages at BM 16 and 32 (within 1-3 %
# of 2 x 6 with mb 1), 2 warpgroups of mb 1 from BM 64 (34.7 / 22.6 us against 37.6 / 23.9 at 64), 3 stages at 128
# (48.6 / 31.1 us against 56.2 / 34.1 with 4 and 76.6 / 45.3 for 1 warpgroup x 5).
W4_TILES: dict[int, WgTile] = {16: WgTile(1, 6, 256, True, 2), 32: WgTile(1, 6, 256, True, 2),
                               64: WgTile(2, 6, 256, True, 1), 128: WgTile(2, 3, 256, True, 1)}
W4_BLOCK_BYTES = 8192 + 512  # codes and (scale, zero) pairs of one 128 x 128 block


def w4_tile_config(M: int, tile: WgTile | None = None) -> TileConfig:
    bm = _batch_rows(M, tile, W4_TILES, batch_tile(M, W4_TILES))
    t = tile or W4_TILES[bm]
    blocks = t.warpgroups * t.mb // 2
    stage = -(-(bm * 256 + blocks * W4_BLOCK_BYTES) // 1024) * 1024
    smem = t.stages * stage + 1024
    if (not (t.tma and t.mb in (1, 2) and t.kt == 256) or (t.warpgroups * t.mb) % 2 or t.stages < 2
            or smem > SMEM_LIMIT):
        raise InputError(f"w4a16 wgmma tile {t} at BM={bm}: needs the TMA form WGxSTAGESx256xtMB with MB 1 or 2 and "
                         f"WG*MB even, >= 2 stages and <= {SMEM_LIMIT} bytes of shared memory (it asks {smem})")
    return TileConfig(bm, t.stages, -(-M // bm), smem, 128 * t.warpgroups + 32, 256, "wg-w4", 128 * blocks)


class WgW4Runner(WgmmaRunner):
    """Runner for wg_w4a16: the operands of tc_w4a16 (kernels.quant.pack_tc) plus the tensor map of x."""

    def config(self, M: int, N: int, K: int) -> TileConfig:
        return w4_tile_config(M, self.tile)

    def check(self, M: int, N: int, K: int) -> None:
        check_batch(self.spec, M)
        cfg = w4_tile_config(M, self.tile)
        if N <= 0 or K <= 0 or N % cfg.bn or K % 128:
            raise InputError(f"kernel {self.spec.name} needs N a multiple of {cfg.bn} and K a multiple of 128, "
                             f"got N={N}, K={K}")
        if self.group_size != W4_GROUP:
            from kernels.quant import pack_tc

            pack_tc.check_tc_w4_shape(N, K, self.group_size)

    def _expression(self, cfg: TileConfig) -> str:
        wgs = (cfg.threads - 32) // 128
        args = f"{cfg.bm}, {wgs}, {2 * cfg.bn // (128 * wgs)}, {cfg.stages}"
        return f"wg_gemm_w4a16_cluster<{args}, {cfg.cluster}>" if cfg.cluster > 1 else f"wg_gemm_w4a16<{args}>"

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy

        problem = TensorCoreRunner.make(self, M, N, K, seed=seed, reference=reference)
        problem.tc_config = self._clustered(problem)
        a = problem.arrays
        a["maps"] = cupy.asarray(np.frombuffer(tma_map(a["x"].data.ptr, M, K * 2, problem.tc_config.bm),
                                               dtype=np.uint8))
        return problem

    def launch(self, problem: Problem) -> None:
        a = problem.arrays
        grid, block, smem = problem.tc_launch
        args = (a["maps"], a["w"], a["sz"], problem.out, a["ws"], a["counters"], np.int32(problem.M),
                np.int32(problem.N), np.int32(problem.K))
        self._kernel(problem.tc_config)(grid, block, args, shared_mem=smem)


def make_runner(spec: KernelSpec, per_sm: int | None = None, tile: WgTile | None = None,
                options: tuple[str, ...] = (), group_size: int | None = None, grid: str = "rule") -> WgmmaRunner:
    if spec.scheme == "w4a16":
        return WgW4Runner(spec, per_sm, tile, options, group_size, grid)
    return WgmmaRunner(spec, per_sm, tile, options, group_size, grid)


# What the kernel-aware model needs (models.kernel_terms): the wgmma instruction each kernel issues, the batch tile per
# M (WG_TILES, W4_TILES: M > 128 runs 128-row m-tiles), 128 channels per CTA in every wide tile, and the narrow
# layers' own tiles (WG_BANDS; one width per band).
_PATH = {"wg_bf16": "wgmma_bf16", "wg_fp16": "wgmma_f16", "wg_w8a8": "wgmma_s8", "wg_fp8": "wgmma_e4m3",
         "wg_w4a16": "wgmma_f16"}


def band_facts(bands: tuple[tuple[int, dict[int, WgTile]], ...],
               width: Callable[[int, int], int]) -> tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...]:
    """KernelFacts.bands of a kernel's narrow-layer tables: (largest N, channels per tile, batch tiles per M) per band;
    `width(M, N)` is the runner's channels per tile."""
    out = []
    for n_max, table in bands:
        widths = {width(bm, n_max) for bm in table}
        if len(widths) != 1:  # the model declares one tile width per band
            raise ValueError(f"the {n_max}-channel band mixes tile widths {sorted(widths)}")
        out.append((n_max, widths.pop(), m_tiles_from(lambda M, t=table: batch_tile(M, t))))
    return tuple(out)


def _facts(s: KernelSpec) -> KernelFacts:
    w4 = s.scheme == "w4a16"
    rows = (lambda M: batch_tile(M, W4_TILES)) if w4 else batch_tile
    return KernelFacts("wgmma", _PATH[s.name], "w4" if w4 else "none", m_tiles_from(rows), 128,
                       stream_k_ctas=STREAM_K_CTAS, aligned_grid=ALIGNED_GRID_MIN_USE["sm" if w4 else "memory"],
                       cluster_grid=CLUSTER_GRID_MIN_USE["sm" if w4 else "memory"],
                       bands=() if w4 else band_facts(WG_BANDS, lambda M, N: tile_config(M, N=N).bn))


SPECS = tuple(replace(s, facts=_facts(s)) for s in SPECS)
