"""The kernel-aware tier's inputs: what a kernel declares about itself, and what a GPU offers each term.

A kernel declares `KernelFacts` (kernels/*.py attach them to their KernelSpec): its family, the instruction path of its
products, the conversion work per weight, how it pads the batch (tile / bin table per M), the output channels per tile
and, for a library, the batches it serves with a GEMV instead (`gemv_m`, `kernel_paths`). A GPU offers `GpuTerms`: the
L2-cold read curve (time against bytes, from `workbench calibrate`), the issue rate of each conversion microbenchmark,
the FP32 FMA rate and the tensor ceiling of every instruction path. Where a GPU has no calibration (or an old one
without these microbenchmarks), each missing figure comes from the datasheet and `GpuTerms.sources` says so. Pure
Python and NumPy; nothing here touches CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from models.errors import InputError
from models.hardware import Calibration, get_gpu

FAMILIES = ("gemv", "mma_sync", "wgmma", "library")
DEQUANT = ("none", "w4", "w8", "e4m3")
# instruction path -> (calibration ceiling keys tried in order, datasheet unit): the rate of the products.
PATHS: dict[str, tuple[tuple[str, ...], str]] = {
    "cuda_core": (("fp32_flops",), "fp32"),
    "mma_sync_f16": (("fp16_mma_flops",), "fp16"),
    "mma_sync_bf16": (("bf16_mma_flops",), "bf16"),
    "mma_sync_s8": (("int8_mma_ops",), "int8"),
    "wgmma_f16": (("library_bf16_flops", "cublas_fp16_flops"), "fp16"),
    "wgmma_bf16": (("library_bf16_flops", "cublas_fp16_flops"), "bf16"),
    "wgmma_s8": (("library_int8_ops",), "int8"),
    "wgmma_e4m3": (("library_fp8_flops",), "fp8"),
    "library_fp32": (("fp32_flops",), "fp32"),
}
# Instructions per weight of each conversion microbenchmark in kernels/calib/calib.cu (dq_w4: 18 per 8 weights, dq_w8: 7
# per 4, dq_e4m3: 5 per 4), used with the FP32 lane rate when a GPU has no measured rate.
DEQUANT_INSTR_PER_WEIGHT = {"w4": 18 / 8, "w8": 7 / 4, "e4m3": 5 / 4}
# Without a measured read curve: a fixed cost per kernel plus bytes at the datasheet bandwidth. 2 us is the fixed cost
# of a graph-launched streaming read on the H200 (REFERENCE.md: 1.74 us for 1 MB); an assumption on other GPUs.
DATASHEET_FIXED_S = 2.0e-6
# Our stream-K kernels' persistent grids: the registered tiles take 74-222 KB of shared memory and 128-288 threads of
# up to 255 registers, so one CTA per SM is the rule (a few small tiles could fit two; the fitted fixup_scale absorbs).
STREAM_K_CTAS: tuple[tuple[int, int], ...] = ((1 << 30, 1),)
# The wgmma runners' grid (persistent_grid): an aligned grid when it keeps at least `min_use` of the resident CTA
# slots busy, else stream-K over every slot. Each kernel declares its share (KernelFacts.aligned_grid): a kernel whose
# main loop streams weights at the memory's pace loses little to a few idle SMs, one bound by its SMs' own work
# (wg_w4a16's dequantization) loses their share. H200 (docs/kernels-wgmma.md, sixth pass): 8- and 16-bit kernels
# 0-6 % faster than stream-K with 85 % of 132 SMs busy (28672 channels: 112 CTAs of 2 whole tiles), 2-8 % slower with
# 65 % (22016: 86 CTAs); wg_w4a16 6-11 % slower at 85 %, 0-9 % faster at 95 % (32000: 125 CTAs).
ALIGNED_GRID_MIN_USE = {"memory": 0.8, "sm": 0.9}
# Clustered split tiles (kernels that declare KernelFacts.cluster_grid): every tile cut into s pieces that run as one
# cluster and sum in distributed shared memory, where all the tiles' clusters are resident at once. H200
# (docs/kernels-wgmma.md, seventh pass): against the slot grid above, fp8 and bf16 faster with as few as 48 % of the
# SMs busy (4096x4096 in 2 pieces, 64 CTAs); 4 pieces beat 6 (2048x2048, fp8 M = 256 13.3 against 17.4 us) and 3
# beat 2 (4096x4096): at most CLUSTER_PIECES_MAX. wg_w4a16's SM-bound main loop lost 21 % with 73 % busy
# (4096x11008 M = 32), so it keeps its 0.9.
CLUSTER_PIECES_MAX = 4
CLUSTER_GRID_MIN_USE = {"memory": 0.4, "sm": 0.9}


def resident_clusters_key(size: int) -> str:
    """The calibration ceiling holding how many clusters of `size` CTAs are resident at once (workbench calibrate)."""
    return f"resident_clusters_{size}"

# Without a measured L2 read bandwidth: this multiple of the DRAM datasheet bandwidth (the H200 measured 7.2 TB/s
# against 4.8 TB/s HBM: 1.5x).
DATASHEET_L2_OVER_DRAM = 1.5


@dataclass(frozen=True)
class KernelFacts:
    """What the kernel-aware tier needs to know about one kernel."""

    family: str  # FAMILIES
    path: str  # PATHS: the instruction that computes the products
    dequant: str = "none"  # DEQUANT: conversion of each weight on CUDA cores (once per m-tile)
    m_tiles: tuple[tuple[int, int], ...] = ((1 << 30, 1),)  # ((largest M, rows computed per tile), ...) ascending
    bn: int = 0  # output channels per tile; N is padded to a multiple (0: not tiled)
    cuda_core_rows: bool = False  # the batch rows' products run on CUDA cores: that work grows with M
    k_block_rescale: int = 0  # partial sums rescaled on CUDA cores after every k_block of K (FP8 block scaling)
    # stream-K persistent grid: ((largest M, CTAs per SM), ...); empty for a kernel that does not split tiles. The
    # pieces of a split tile are summed through fp32 slots in L2 by the CTA that completes it.
    stream_k_ctas: tuple[tuple[int, int], ...] = ()
    aligned_grid: float = 0.0  # > 0: the runner takes persistent_grid's aligned grid from this share of SMs busy
    cluster_grid: float = 0.0  # > 0: split tiles as clusters (cluster_pieces) where they keep this share busy
    # layers of at most `largest N` output channels run their own tiles: ((largest N, bn, m_tiles), ...) ascending;
    # wider layers run `bn` and `m_tiles` above
    bands: tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...] = ()
    # other kernels inside one timed call, each costing the GPU's fixed cost (a library FP8 GEMM whose timing
    # includes its dynamic activation-quantization kernel: 1)
    extra_launches: int = 0
    # a GEMV whose CTAs take several n-tiles: ((largest M, ((most n-tiles per SM, n-tiles per CTA), ...)), ...), both
    # ascending, as its launcher's table picks a column by the layer's n-tiles per SM; empty: one n-tile per CTA
    cta_tiles: tuple[tuple[int, tuple[tuple[float, int], ...]], ...] = ()
    # a library that runs a GEMV up to this M (cuBLAS: a GEMM whose batch is one row is a matrix-vector product, a
    # different kernel): at those M the kernel is priced as `gemv_path()` with its own fitted parameters (key
    # `<name>@gemv`, kernel_paths); 0: one code path at every M
    gemv_m: int = 0

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise InputError(f"kernel family {self.family!r} unknown; valid: {', '.join(FAMILIES)}")
        if self.path not in PATHS:
            raise InputError(f"instruction path {self.path!r} unknown; valid: {', '.join(PATHS)}")
        if self.dequant not in DEQUANT:
            raise InputError(f"dequantization {self.dequant!r} unknown; valid: {', '.join(DEQUANT)}")
        if not _valid_table(self.m_tiles):
            raise InputError(f"m_tiles must be ((largest M, tile rows), ...) of positive integers, got {self.m_tiles}")
        if not (0 <= self.aligned_grid <= 1 and 0 <= self.cluster_grid <= 1):
            raise InputError(f"aligned_grid and cluster_grid must be shares of the SMs in [0, 1], got "
                             f"{self.aligned_grid}, {self.cluster_grid}")
        if self.bn < 0 or self.k_block_rescale < 0 or self.extra_launches < 0:
            raise InputError(f"bn, k_block_rescale and extra_launches must be >= 0, got {self.bn}, "
                             f"{self.k_block_rescale}, {self.extra_launches}")
        if self.gemv_m < 0:
            raise InputError(f"gemv_m (the largest M of a library's GEMV path; 0: none) must be >= 0, got "
                             f"{self.gemv_m}")
        widths = [b[0] for b in self.bands if len(b) == 3]
        if (len(widths) != len(self.bands) or widths != sorted(set(widths))
                or any(n <= 0 or bn <= 0 or not _valid_table(t) for n, bn, t in self.bands)):
            raise InputError(f"bands must be ((largest N, bn, m_tiles), ...), ascending in N and positive, got "
                             f"{self.bands}")
        if not all(len(e) == 2 and e[0] > 0 and _valid_table(e[1]) for e in self.cta_tiles) or [
                e[0] for e in self.cta_tiles] != sorted({e[0] for e in self.cta_tiles}):
            raise InputError(f"cta_tiles must be ((largest M, ((most n-tiles per SM, n-tiles per CTA), ...)), ...), "
                             f"ascending and positive, got {self.cta_tiles}")

    def gemv_path(self) -> KernelFacts:
        """What the kernel runs at M <= gemv_m: one pass over the weights (no tiles, no padding, no split), the
        products of every batch row on CUDA cores, the same conversion and launches."""
        return KernelFacts(self.family, "cuda_core", self.dequant, cuda_core_rows=True,
                           extra_launches=self.extra_launches)

    def _band(self, N: Any) -> np.ndarray:
        """Index into `bands` of each N's band; len(bands) for the layers wider than every band."""
        limits = np.array([n for n, _, _ in self.bands], dtype=np.float64)
        return np.searchsorted(limits, np.asarray(N, dtype=np.float64), side="left")

    def tile_rows(self, M: np.ndarray, N: Any = None) -> np.ndarray:
        """Rows per m-tile at each M (beyond a table: its last entry's tile) in the band of each N (None: m_tiles)."""
        M = np.asarray(M)
        out = _rows(self.m_tiles, M)
        if N is None or not self.bands:
            return out
        band = np.broadcast_to(self._band(N), M.shape)
        for i, (_, _, table) in enumerate(self.bands):
            out = np.where(band == i, _rows(table, M), out)
        return out

    def bn_at(self, N: Any) -> np.ndarray:
        """Output channels per tile in the band of each N (0: not tiled)."""
        widths = np.array([bn for _, bn, _ in self.bands] + [self.bn], dtype=np.float64)
        return widths[self._band(N)]

    def padded_m(self, M: np.ndarray, N: Any = None) -> np.ndarray:
        """M rounded up to whole m-tiles: the rows the kernel really computes."""
        t = self.tile_rows(M, N)
        return np.ceil(M / t) * t

    def m_passes(self, M: np.ndarray, N: Any = None) -> np.ndarray:
        """How many m-tiles (each re-reads and re-converts the weights it covers)."""
        return np.ceil(M / self.tile_rows(M, N))

    def fixup_slots(self, M: np.ndarray, N: np.ndarray, sms: int,
                    resident: dict[int, float] | None = None) -> np.ndarray:
        """Tiles' worth of partial sums one CTA reads after its main loop: the slots the busiest tile's owner sums,
        ceil(CTAs per m-tile / tiles per m-tile) (0 without stream-K or with whole tiles), or (s - 1) / s where the
        tiles' s pieces run as clusters (cluster_pieces, with `resident` clusters of each size; none: sms // size)."""
        if not self.stream_k_ctas:
            return np.zeros(np.shape(M))
        limits = np.array([m for m, _ in self.stream_k_ctas])
        per_sm = np.array([c for _, c in self.stream_k_ctas])[
            np.minimum(np.searchsorted(limits, M, side="left"), len(limits) - 1)]
        passes = self.m_passes(M, N)
        slots = np.floor(sms * per_sm / passes)
        bn = self.bn_at(N)
        tiles = np.where(bn > 0, np.ceil(N / np.maximum(bn, 1)), 1.0) * np.ones(np.shape(M))
        if not self.aligned_grid:
            return np.ceil(slots / tiles)
        ctas = persistent_grid(tiles, np.inf, slots, self.aligned_grid)
        out = np.where(np.mod(tiles, ctas) == 0, 0.0, np.ceil(ctas / tiles))  # whole tiles: nothing to sum
        if not self.cluster_grid:
            return out
        per_size = {c: (resident or {}).get(c, sms // c) for c in range(2, CLUSTER_PIECES_MAX + 1)}
        s = np.zeros(np.shape(M))
        for p in np.unique(passes):  # the clusters of every m-tile share the residency
            at = passes == p
            s[at] = cluster_pieces(tiles[at], np.inf, slots[at], {c: r // p for c, r in per_size.items()},
                                   self.cluster_grid)
        return np.where(s > 0, (s - 1) / np.maximum(s, 1), out)

    def tiles_per_cta(self, M: Any, N: Any, sms: int) -> np.ndarray:
        """n-tiles each CTA computes at each (M, N) on `sms` SMs: the `cta_tiles` column for the layer's n-tiles per
        SM in the M bin (1 without the fact, or past the table's last M)."""
        M = np.asarray(M, dtype=np.float64)
        out = np.ones(M.shape)
        if not self.cta_tiles:
            return out
        bn = self.bn_at(N)
        per_sm = np.where(bn > 0, np.ceil(np.asarray(N, dtype=np.float64) / np.maximum(bn, 1)), 1.0) / sms
        per_sm = per_sm * np.ones(M.shape)
        lo = 0
        for top, columns in self.cta_tiles:
            at = (M > lo) & (M <= top)
            out = np.where(at, _rows(columns, per_sm), out)
            lo = top
        return out

    def padded_n(self, N: np.ndarray) -> np.ndarray:
        bn = self.bn_at(N)
        return np.where(bn > 0, np.ceil(N / np.maximum(bn, 1)) * bn, np.asarray(N, dtype=np.float64))


GEMV_PATH_KEY = "@gemv"  # parameter key of a library's GEMV path: kernel name + this


def kernel_paths(name: str, facts: KernelFacts) -> tuple[tuple[str, KernelFacts, int, int], ...]:
    """(parameter key, facts, smallest M, largest M) of each code path the kernel runs: a library's GEMV up to
    gemv_m (key name + GEMV_PATH_KEY) and its declared path above; one path at every M for any other kernel."""
    if not facts.gemv_m:
        return ((name, facts, 1, 1 << 30),)
    return ((name + GEMV_PATH_KEY, facts.gemv_path(), 1, facts.gemv_m), (name, facts, facts.gemv_m + 1, 1 << 30))


def _valid_table(table: Any) -> bool:
    return bool(table) and all(len(e) == 2 and e[0] > 0 and e[1] > 0 for e in table)


def _rows(table: tuple[tuple[int, int], ...], M: np.ndarray) -> np.ndarray:
    limits = np.array([m for m, _ in table])
    rows = np.array([t for _, t in table])
    return rows[np.minimum(np.searchsorted(limits, M, side="left"), len(rows) - 1)]


def persistent_grid(tiles: Any, ktiles: Any, slots: Any, min_use: float) -> Any:
    """CTAs per m-tile of a persistent grid over tiles x ktiles iterations with `slots` resident CTAs (scalars or
    arrays): every tile cut into s = slots // tiles pieces (tiles <= slots), or every CTA w = ceil(tiles / slots)
    whole tiles (tiles a multiple of w), when that keeps at least `min_use` of the slots busy (0 < min_use <= 1; 0:
    never); else stream-K over every slot. Never more CTAs than iterations. A grid of whole tiles has no split tile to
    sum; an evenly split one no CTA with pieces of two tiles (kernels/tensorcore/splitk.cuh)."""
    tiles, ktiles, slots = (np.asarray(v, dtype=np.float64) for v in (tiles, ktiles, slots))
    s = np.minimum(np.floor(slots / tiles), ktiles)
    w = np.ceil(tiles / slots)
    on = min_use > 0
    split = on & (tiles <= slots) & (s * tiles >= min_use * slots)
    whole = on & (tiles > slots) & (np.mod(tiles, w) == 0) & (tiles >= min_use * w * slots)
    ctas = np.where(split, s * tiles, np.where(whole, tiles / w, np.minimum(slots, tiles * ktiles)))
    return ctas if ctas.ndim else int(ctas)


def cluster_pieces(tiles: Any, ktiles: Any, slots: Any, resident: dict[int, int], min_use: float) -> Any:
    """Pieces per tile of a clustered split (scalars or arrays): the largest s in 2..CLUSTER_PIECES_MAX, at most
    ktiles, with s * tiles <= slots, every tile's cluster of s resident at once (tiles <= resident[s], clusters per
    m-tile) and s * tiles >= min_use * slots; 0 where none is (or min_use is 0: the kernel has no cluster path)."""
    tiles, ktiles, slots = (np.asarray(v, dtype=np.float64) for v in (tiles, ktiles, slots))
    out = np.zeros(np.broadcast(tiles, ktiles, slots).shape)
    for s in range(2, CLUSTER_PIECES_MAX + 1) if min_use > 0 else ():
        ok = ((s <= ktiles) & (s * tiles <= slots) & (tiles <= resident.get(s, 0))
              & (s * tiles >= min_use * slots))
        out = np.where(ok, s, out)
    return out if out.ndim else int(out)


def m_tiles_from(rows_at: Any, batches: range = range(1, 257)) -> tuple[tuple[int, int], ...]:
    """Compress a kernel's own tile function (M -> rows per tile) into the m_tiles table."""
    out: list[tuple[int, int]] = []
    for M in batches:
        rows = int(rows_at(M))
        if out and out[-1][1] == rows:
            out[-1] = (M, rows)
        else:
            out.append((M, rows))
    return tuple(out)


def cta_tiles_from(table: Any) -> tuple[tuple[int, tuple[tuple[float, int], ...]], ...]:
    """A tensor-core GEMV launcher's TABLE ((largest M, ((most n-tiles per SM, config with .tiles), ...)), ...) as
    the `cta_tiles` fact (an unbounded column: 1 << 30); () where every configuration takes one n-tile per CTA."""
    out = tuple((int(m), tuple((top if top < (1 << 30) else 1 << 30, int(cfg.tiles)) for top, cfg in cols))
                for m, cols in table)
    return out if any(t > 1 for _, cols in out for _, t in cols) else ()


@dataclass(frozen=True)
class GpuTerms:
    """One GPU's figures for the kernel-aware terms (SI units) and where each came from."""

    gpu_key: str
    curve_bytes: np.ndarray
    curve_time_s: np.ndarray
    dequant_weights_per_s: dict[str, float]
    fma_per_s: float  # FP32 FMA instructions per second (lanes): FLOP/s / 2
    path_flops: dict[str, float]
    sources: dict[str, str] = field(default_factory=dict)  # term -> "calibrated" | "datasheet"
    sms: int = 132
    l2_bytes_per_s: float = float("nan")  # L2 read bandwidth (split-tile slots go through L2)
    # clusters of each size (2..CLUSTER_PIECES_MAX) resident at once with one CTA per SM; fewer than SMs / size where
    # the GPCs' SM counts are not multiples of it (H200: 66, 39, 30)
    resident_clusters: dict[int, float] = field(default_factory=dict)

    @property
    def fixed_s(self) -> float:
        """The read curve at its smallest size: a kernel's fixed cost (launch in a graph, first bytes, drain)."""
        return float(self.curve_time_s[0])

    def read_time(self, nbytes: np.ndarray) -> np.ndarray:
        """Seconds to read `nbytes` L2-cold: log-log interpolation of the curve, its last bandwidth beyond it."""
        v = np.maximum(np.asarray(nbytes, dtype=np.float64), self.curve_bytes[0])
        t = np.exp(np.interp(np.log(v), np.log(self.curve_bytes), np.log(self.curve_time_s)))
        last_bw = (self.curve_bytes[-1] - self.curve_bytes[-2]) / (self.curve_time_s[-1] - self.curve_time_s[-2])
        beyond = v > self.curve_bytes[-1]
        return np.where(beyond, self.curve_time_s[-1] + (v - self.curve_bytes[-1]) / last_bw, t)

    def asymptotic_bandwidth(self) -> float:
        return float((self.curve_bytes[-1] - self.curve_bytes[-2]) / (self.curve_time_s[-1] - self.curve_time_s[-2]))


def _curve(cal: Calibration | None) -> tuple[np.ndarray, np.ndarray] | None:
    raw = getattr(cal, "read_curve", None) if cal is not None else None
    if not raw:
        return None
    best: dict[float, float] = {}
    for b, t in zip(raw["bytes"], raw["time_s"], strict=True):
        if t > 0 and (b not in best or t < best[b]):
            best[float(b)] = float(t)
    if len(best) < 2:
        return None
    sizes = np.array(sorted(best))
    times = np.maximum.accumulate(np.array([best[s] for s in sizes]))  # more bytes never read faster
    return sizes, times


def gpu_terms(gpu_key: str, cal: Calibration | None) -> GpuTerms:
    """The kernel-aware figures of one GPU: calibrated where measured, datasheet otherwise (said in `sources`)."""
    gpu = get_gpu(gpu_key)
    sources: dict[str, str] = {}
    curve = _curve(cal)
    if curve is None:
        sizes = np.geomspace(4096.0, 4.0 * 2**30, 24)
        curve = sizes, DATASHEET_FIXED_S + sizes / gpu.bandwidth
        sources["memory"] = "datasheet"
    else:
        sources["memory"] = "calibrated"
    ceilings = cal.ceilings if cal is not None else {}

    def measured(key: str) -> float:
        v = ceilings.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else float("nan")

    fp32 = measured("fp32_flops")
    sources["fma"] = "calibrated" if np.isfinite(fp32) else "datasheet"
    fp32 = fp32 if np.isfinite(fp32) else gpu.peak("fp32")
    dq, dq_measured = {}, []
    for kind, instr in DEQUANT_INSTR_PER_WEIGHT.items():
        rate = measured(f"dequant_{kind}_weights_per_s")
        dq_measured.append(bool(np.isfinite(rate)))
        dq[kind] = rate if np.isfinite(rate) else fp32 / 2.0 / instr
    sources["alu"] = "calibrated" if all(dq_measured) else "datasheet"
    flops, tc_src = {}, {}
    for path, (keys, unit) in PATHS.items():
        value = next((measured(k) for k in keys if np.isfinite(measured(k))), float("nan"))
        tc_src[path] = "calibrated" if np.isfinite(value) else "datasheet"
        flops[path] = value if np.isfinite(value) else gpu.ceiling(unit)[1]
    sources["tensor"] = "calibrated" if all(s == "calibrated" for s in tc_src.values()) else "datasheet"
    sources.update({f"tensor:{p}": s for p, s in tc_src.items()})
    l2 = measured("l2_bytes_per_s")
    sources["l2"] = "calibrated" if np.isfinite(l2) else "datasheet"
    l2 = l2 if np.isfinite(l2) else DATASHEET_L2_OVER_DRAM * gpu.bandwidth
    resident = {c: measured(resident_clusters_key(c)) for c in range(2, CLUSTER_PIECES_MAX + 1)}
    sources["clusters"] = "calibrated" if all(np.isfinite(v) for v in resident.values()) else "datasheet"
    resident = {c: v if np.isfinite(v) else float(gpu.sms // c) for c, v in resident.items()}
    return GpuTerms(gpu.key, curve[0], curve[1], dq, fp32 / 2.0, flops, sources, gpu.sms, l2, resident)
