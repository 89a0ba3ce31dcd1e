"""The W8A16 wgmma GEMMs (kernels/wgmma/wg_gemm_w8a16.cu, sm_90a): `wg_w8a16` (fp16 activations, the W8A16 scheme's)
and `wg_w8a16_bf16` (bf16 activations), one template instantiated per activation type.

int8 per-channel weights (kernels/quant/quant.py W8: one scale per output channel) are wgmma's A operand from
registers, converted exactly to fp16 / bf16 (the W8A16 GEMVs' magic-number conversions), the activations its B from
shared memory (TMA), the batch its N. The scale factors out of the K sum, so it multiplies each fp32 sum once in the
epilogue. The weights are packed offline by kernels.quant.pack_q8.pack_w8a16_wg (64 x 64 blocks in the A-fragment
order), the fp16 scales widened to fp32 (exact). Why: at M >= 33 no W8A16 kernel ran on the tensor cores, and the
tensor-core GEMVs fall to 1.0-1.3x cuBLAS bf16 at M = 32 (issue 34).

`W8_TILES`: batch tile -> WgTile (warpgroups, stages, bytes of x per k-tile (128: 64 deep, 256: 128 deep), TMA, MB
blocks of 64 channels per warpgroup), every tile 128 channels wide; `W8_BANDS`: the narrow layers' own tables (one
warpgroup of 64 channels). M > 256 is not accepted. CuPy is imported inside functions only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels import problems
from kernels.registry import KernelSpec, Problem, check_batch
from kernels.tensorcore.tensorcore import TileConfig
from kernels.toolchain.cuda_driver import tma_map
from kernels.wgmma.wgmma import SMEM_LIMIT, WgmmaRunner, WgTile, _batch_rows, band_facts, batch_tile
from models.errors import InputError
from models.kernel_terms import (
    ALIGNED_GRID_MIN_USE,
    CLUSTER_GRID_MIN_USE,
    STREAM_K_CTAS,
    KernelFacts,
    m_tiles_from,
)

SOURCE = "wg_gemm_w8a16.cu"


@dataclass(frozen=True)
class Kind:
    act: str  # activations and output, as kernels.problems names them
    op: str  # the .cu's epilogue Op (and operand type)
    path: str  # models.kernel_terms PATHS: the wgmma the kernel issues


KINDS: dict[str, Kind] = {
    "wg_w8a16": Kind("f16", "OpW8F16", "wgmma_f16"),
    "wg_w8a16_bf16": Kind("bf16", "OpW8BF16", "wgmma_bf16"),
}

# Batch tile -> tile. Shared memory per stage: BM * KT + 128 * KT / 2 bytes (x tile and 128 channels of codes).
# Two math warpgroups come with a producer warpgroup whose registers go to them (setmaxnreg), one with a producer warp.
# ptxas (CUDA 13.0) serializes the wgmmas of some instances (warning C7513: e.g. 2 x mb 1 with 4, 5, 7 or 8 stages
# at BM = 128 and 256, 4 at BM = 64), which the table avoids.
# H100 (no H200 was lent; bench/bench_tensorcore.py --kernels wg_w8a16 --wg-tiles=..., 22016x4096 / 4096x11008, cuBLAS
# bf16 in the same process): M = 16 1 x 6 stages 38.8 / 23.0 us against 40.9 / 23.6 with 8, 43.6 / 25.1 for 2 x mb 1
# x 4 x 128 B; M = 32 40.6 / 24.0 against 43.2 / 25.0; M = 64 2 x 6 x 256 B 42.0 / 25.3 (1 x mb 2: 44.3 / 26.9);
# M = 128 2 x 6 x 128 B 48.8 / 28.6 (the serialized 2 x 4 x 128 B: 60.4 / 34.2); M = 256 2 x 3 x 128 B 81.8 / 46.2
# (two 128-row m-tiles: 85.8 / 43.4, the serialized 4 stages 88.8 / 46.8, 2 x 256 B 94.2 / 49.9).
# BM 16 and 32 since 2026-12-07 (H100 GPU-c256b8fe, every tile forced beside cuBLAS in one process; the CSV is quoted
# in docs/kernels-wgmma.md): two warpgroups of 64 channels x 6 stages x 128 B, 0.93-0.97x the time of one warpgroup
# of 2 blocks at M = 32 on 22016x4096, 4096x11008, 4096^2, 12288x4096 (held out: 8192^2, 5120^2, 4096x14336
# 0.93-0.98x), 0.93-0.97x at M = 16 (held out 0.95-0.99x).
W8_TILES: dict[int, WgTile] = {
    16: WgTile(2, 6, 128, True, 1), 32: WgTile(2, 6, 128, True, 1), 64: WgTile(2, 6, 256, True, 1),
    128: WgTile(2, 6, 128, True, 1), 256: WgTile(2, 3, 128, True, 1),
}


# Narrow layers: (largest N, batch tile -> tile), ascending; wider layers take W8_TILES. One warpgroup of 64 channels
# doubles the tiles of a layer of at most 2048 channels (16 128-channel tiles fill an eighth of the SMs), and M > 64
# runs 64-row m-tiles. H100 (docs/kernels-wgmma.md): 2048x2048 M = 16 / 64 / 256 7.90 / 9.98 / 10.94 us against
# 8.44 / 10.83 / 20.79; H200 (stop 48): 896x4864 M = 256 14.8 against 30.4. On 4096 channels 64-channel tiles win at
# M = 32-64 only, and a band has one tile width (KernelFacts.bands), so 4096 keeps 128-channel tiles, but stops at
# 128-row m-tiles: M = 129-256 as two of them (H100 GPU-c256b8fe, M = 256: 4096^2 20.46 against 25.40 us, 4096x11008
# 42.74 against 46.53; held out, not in the band: 5120^2 0.90x, 4096x14336 1.01x; wider layers 1.02-1.06x).
W8_BANDS: tuple[tuple[int, dict[int, WgTile]], ...] = (
    (2048, {16: WgTile(1, 8, 256, True, 1), 32: WgTile(1, 8, 256, True, 1), 64: WgTile(1, 8, 128, True, 1)}),
    (4096, {bm: W8_TILES[bm] for bm in (16, 32, 64, 128)}),
)


def w8_table(N: int | None) -> dict[int, WgTile]:
    """The batch-tile table of a layer of N output channels (None: the widest layers', W8_TILES)."""
    return next((t for n_max, t in W8_BANDS if N is not None and N <= n_max), W8_TILES)


def threads_of(warpgroups: int) -> int:
    """Threads per CTA (the .cu's w8_threads): math warpgroups and a producer warp, or a producer warpgroup with 2."""
    return 128 * warpgroups + (128 if warpgroups == 2 else 32)


def w8_tile_config(M: int, tile: WgTile | None = None, N: int | None = None) -> TileConfig:
    """The launch shape for batch M on a layer of N output channels (pure arithmetic; None: the widest layers'
    table); `tile` overrides the tables (its batch tile W8_TILES' unless it forces one; the bands are ignored)."""
    table = W8_TILES if tile else w8_table(N)
    bm = _batch_rows(M, tile, table, batch_tile(M, table))
    t = tile or table[bm]
    bn = 64 * t.warpgroups * t.mb
    stage = -(-(bm * t.kt + bn * t.kt // 2) // 1024) * 1024
    smem = t.stages * stage + 1024
    if (not t.tma or t.kt not in (128, 256) or t.warpgroups not in (1, 2) or t.mb not in (1, 2) or t.mb * bm > 256
            or t.stages < 2 or smem > SMEM_LIMIT):
        raise InputError(f"w8a16 wgmma tile {t} at BM={bm}: needs the TMA form WGxSTAGESxKTxtMB with WG 1 or 2, MB 1 "
                         f"or 2, KT 128 or 256 bytes of x, MB * BM <= 256, >= 2 stages and <= {SMEM_LIMIT} bytes of "
                         f"shared memory (it asks {smem})")
    return TileConfig(bm, t.stages, -(-M // bm), smem, threads_of(t.warpgroups), t.kt, "wg-w8", bn)


def prepare_weights(w: Any) -> tuple[Any, Any]:
    """(packed codes, fp32 channel scales) on the device from a quant.W8."""
    import cupy as cp

    from kernels.quant import pack_q8, quant

    if not isinstance(w, quant.W8):
        raise InputError(f"the W8A16 wgmma GEMM takes weights as kernels.quant.quant.W8, got {type(w).__name__}")
    return pack_q8.pack_w8a16_wg(cp.asarray(w.codes), cp), cp.asarray(w.scales).astype(cp.float32)


class WgW8Runner(WgmmaRunner):
    """Runner for the W8A16 wgmma GEMMs; `tile` forces one WgTile at every M (benchmarks), `grid` one of
    kernels.wgmma.wgmma.GRIDS."""

    def __init__(self, spec: KernelSpec, per_sm: int | None = None, tile: WgTile | None = None,
                 options: tuple[str, ...] = (), grid: str = "rule"):
        super().__init__(spec, per_sm, tile, options, None, grid)
        self._cache = problems.PackedCache(spec.name)  # weights packed once per shape, shared by every batch

    def config(self, M: int, N: int, K: int) -> TileConfig:
        return w8_tile_config(M, self.tile, N)

    def check(self, M: int, N: int, K: int) -> None:
        check_batch(self.spec, M)
        cfg = w8_tile_config(M, self.tile, N)
        if N <= 0 or K <= 0 or N % cfg.bn or K % (cfg.kt // 2):
            raise InputError(f"kernel {self.spec.name} needs N a multiple of {cfg.bn} and K a multiple of "
                             f"{cfg.kt // 2}, got N={N}, K={K}")

    @staticmethod
    def _math_threads(cfg: TileConfig) -> int:
        return 128 if cfg.threads == threads_of(1) else 256

    def _expression(self, cfg: TileConfig) -> str:
        wgs = self._math_threads(cfg) // 128
        args = (f"wg::{KINDS[self.spec.name].op}, {cfg.bm}, {wgs}, {cfg.bn // (64 * wgs)}, {cfg.stages}, "
                f"{cfg.kt // 2}")
        return f"wg_gemm_w8a16_cluster<{args}, {cfg.cluster}>" if cfg.cluster > 1 else f"wg_gemm_w8a16<{args}>"

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy as cp

        self.check(M, N, K)
        cfg = self.config(M, N, K)
        fn = self._kernel(cfg)
        params = problems.Params("w8a16", "w8", KINDS[self.spec.name].act)
        inputs, xs, ws = self._cache.make(params, M, N, K, seed=seed, reference=reference, pack=prepare_weights)
        arrays: dict[str, Any] = {"x": xs[0], "w": ws[0], "sb": ws[1]}
        nbytes = problems.bytes_read(*arrays.values())
        out = cp.empty((M, N), dtype=cp.uint16 if KINDS[self.spec.name].act == "bf16" else cp.float16)
        tiles_n, ktiles = N // cfg.bn, 2 * K // cfg.kt
        arrays["counters"] = cp.zeros(cfg.m_tiles * tiles_n, dtype=cp.int32)
        ctas = self._grid(fn, cfg, tiles_n, ktiles)
        arrays["ws"] = cp.empty(cfg.m_tiles * ctas * 2 * cfg.bm * cfg.bn, dtype=cp.uint32)  # split-K slots
        problem = Problem(M, N, K, arrays, out, nbytes, inputs.ref, inputs.quant_error_rel,
                          nbytes + problems.bytes_read(out))
        problem.tc_launch = ((ctas, cfg.m_tiles), (cfg.threads,), cfg.smem_bytes)
        problem.tc_config = cfg
        problem.tc_config = cfg = self._clustered(problem)
        arrays["maps"] = cp.asarray(np.frombuffer(tma_map(xs[0].data.ptr, M, K * 2, cfg.bm), dtype=np.uint8))
        return problem

    def launch(self, problem: Problem) -> None:
        a = problem.arrays
        grid, block, smem = problem.tc_launch
        args = (a["maps"], a["w"], a["sb"], problem.out, a["ws"], a["counters"], np.int32(problem.M),
                np.int32(problem.N), np.int32(problem.K))
        self._kernel(problem.tc_config)(grid, block, args, shared_mem=smem)

    def output(self, problem: Problem) -> np.ndarray:
        import cupy as cp

        from kernels.quant import quant

        y = cp.asnumpy(problem.out)
        return (quant.from_bf16_bits(y) if KINDS[self.spec.name].act == "bf16" else y).astype(np.float64)


def make_runner(spec: KernelSpec, per_sm: int | None = None, tile: WgTile | None = None,
                options: tuple[str, ...] = (), grid: str = "rule", group_size: int | None = None) -> WgW8Runner:
    return WgW8Runner(spec, per_sm, tile, options, grid)


_GEOMETRY = ("wgmma m64nBMk16 with the int8 weights converted to 16 bits as A from registers: 128 channels x BM batch "
             "rows per CTA (BM = 16..256, the smallest holding M), 1 math warpgroup of two 64-channel blocks or 2 of "
             "one (+ a producer warp / warpgroup: bulk copies of the packed codes, a TMA box of x per 64 of K), "
             "STAGES-deep mbarrier pipeline of 64- or 128-deep k-tiles (narrow layers: 64 channels per CTA, "
             "W8_BANDS); persistent grid over (n-tile, k-tile) as the "
             "other wgmma kernels, split tiles summed in clusters or through per-CTA slots "
             "(kernels.wgmma.wg_w8a16.W8_TILES)")


def _spec(name: str, notes: str) -> KernelSpec:
    facts = KernelFacts("wgmma", KINDS[name].path, "w8", m_tiles_from(lambda M: batch_tile(M, W8_TILES)), 128,
                        stream_k_ctas=STREAM_K_CTAS, aligned_grid=ALIGNED_GRID_MIN_USE["sm"],
                        cluster_grid=CLUSTER_GRID_MIN_USE["sm"],
                        bands=band_facts(W8_BANDS, lambda M, N: w8_tile_config(M, N=N).bn))
    return KernelSpec(name, "w8a16", "nvrtc", "optimized", "kernels.wgmma.wg_w8a16:make_runner", m_min=1, m_max=256,
                      prefer_from=16, min_cc=90, max_cc=90, source=SOURCE, entry=KINDS[name].op, geometry=_GEOMETRY,
                      notes=notes, facts=facts)


SPECS: tuple[KernelSpec, ...] = (
    _spec("wg_w8a16", "wgmma (HGMMA) f16 with A from registers, sm_90a: int8 per-channel weights (kernels.quant."
          "pack_q8.pack_w8a16_wg layout, q + 128) converted exactly (prmt into 0x64uu, hsub2), the fp32 channel "
          "scale on the fp32 sums; fp16 x and y"),
    _spec("wg_w8a16_bf16", "wgmma (HGMMA) bf16 with A from registers, sm_90a: int8 per-channel weights (pack_w8a16_wg "
          "layout) converted exactly (prmt into fp32 2^23 + u, FADD, upper halves), the fp32 channel scale on the "
          "fp32 sums; bf16 x and y"),
)
