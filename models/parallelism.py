"""How a kernel's grid fills a GPU's SMs, from the kernel's declared facts (models.kernel_terms.KernelFacts) and the
GPU's SM count, so that the same kernel on a GPU with 108, 132 or 142 SMs gets its own waves.

A kernel's grid, from its facts:
- a persistent grid (`stream_k_ctas`): per m-tile, the CTAs `persistent_grid` / `cluster_pieces` pick from the
  resident slots (sms x CTAs per SM / m-tiles), as the runners do; each CTA does the same share of the work;
- a GEMV with tiled channels (`bn` > 0: the tensor-core GEMVs): one CTA per `cta_tiles` n-tiles (the launcher's
  TABLE column for the layer's n-tiles per SM: 2-4 at M >= 9 for w4a16_tc_gemv and w8a16_tc_gemv), m-tiles x
  ceil(ceil(N / bn) / tiles per CTA) CTAs of equal work;
- anything else (the CUDA-core GEMVs), or a vendor library (cuBLAS, CUTLASS: split-K and tiles picked by heuristics at
  run time): the grid is not declared, and the kernel is taken to fill the GPU.

The busiest SM sets the time. With C CTAs of equal work spread over S SMs it runs ceil(C / S) of them, while the
kernel tier's terms are whole-GPU rates that assume every SM carries C / S:
  sm_load = ceil(C / S) x S / C   (>= 1; S / C when C < S; a persistent grid: S x CTAs per SM / C)
What the kernel tier applies (`idle_stretch`, in models.kernel_model.raw_terms): a tensor-core GEMV with fewer CTAs
than SMs runs its per-SM work (the conversion, the batch rows' CUDA-core products, the mma issue: the alu and tensor
terms) on C SMs, so those terms take S / C; its reads are a global resource and are not stretched (bf16/fp16 GEMVs
on 56 CTAs of 132 SMs read at the full-GPU rate: H100, 896x4864). With C >= S every SM works; the uneven ceil(C / S)
is not charged (these kernels keep 2-4 CTAs resident per SM, so a second CTA on an SM is concurrent, not a wave).
Tried and not applied (docs/model.md, "Parallelism"): sm_load on the persistent grids' tensor and ALU terms, and on
the GEMVs' reads. `bench/tail_points.py` lists the worst points with their grid.
Pure NumPy; nothing here touches CUDA.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models.kernel_terms import CLUSTER_PIECES_MAX, KernelFacts, cluster_pieces, persistent_grid


def _per_sm(facts: KernelFacts, M: np.ndarray) -> np.ndarray:
    limits = np.array([m for m, _ in facts.stream_k_ctas])
    per = np.array([c for _, c in facts.stream_k_ctas])
    return per[np.minimum(np.searchsorted(limits, M, side="left"), len(limits) - 1)]


def n_tiles(facts: KernelFacts, N: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Output-channel tiles per m-tile: ceil(N / bn) in each N's band (1 where the kernel does not tile N)."""
    bn = facts.bn_at(N)
    return np.where(bn > 0, np.ceil(np.asarray(N, dtype=np.float64) / np.maximum(bn, 1)), 1.0) * np.ones(shape)


def declares_grid(facts: KernelFacts) -> bool:
    """Whether the kernel's facts say how many CTAs it launches (module doc)."""
    if facts.family == "library":
        return False
    return bool(facts.stream_k_ctas) or (facts.family == "gemv" and facts.bn > 0)


def grid_ctas(facts: KernelFacts, M: Any, N: Any, sms: int, resident: dict[int, float] | None = None) -> np.ndarray:
    """CTAs the kernel launches at each (M, N) on a GPU of `sms` SMs (NaN where its facts declare no grid)."""
    M = np.asarray(M, dtype=np.float64)
    passes = facts.m_passes(M, N)
    tiles = n_tiles(facts, N, M.shape)
    if not declares_grid(facts):
        return np.full(M.shape, np.nan)
    if not facts.stream_k_ctas:
        return passes * np.ceil(tiles / facts.tiles_per_cta(M, N, sms))
    slots = np.floor(sms * _per_sm(facts, M) / passes)
    per_mtile = (persistent_grid(tiles, np.inf, slots, facts.aligned_grid) if facts.aligned_grid else slots)
    per_mtile = np.asarray(per_mtile, dtype=np.float64) * np.ones(M.shape)
    if facts.cluster_grid:
        per_size = {c: (resident or {}).get(c, sms // c) for c in range(2, CLUSTER_PIECES_MAX + 1)}
        for p in np.unique(passes):  # the clusters of every m-tile share the residency
            at = passes == p
            s = np.asarray(cluster_pieces(tiles[at], np.inf, slots[at], {c: r // p for c, r in per_size.items()},
                                          facts.cluster_grid), dtype=np.float64)
            per_mtile[at] = np.where(s > 0, s * tiles[at], per_mtile[at])
    return per_mtile * passes


def sm_load(facts: KernelFacts, M: Any, N: Any, sms: int, resident: dict[int, float] | None = None) -> np.ndarray:
    """The busiest SM's work over the average SM's (>= 1; 1 where the grid is not declared): module doc."""
    M = np.asarray(M, dtype=np.float64)
    ctas = grid_ctas(facts, M, N, sms, resident)
    if facts.stream_k_ctas:  # equal shares of the work over the persistent CTAs, CTAs per SM of them on each SM
        slots = sms * _per_sm(facts, M)
        load = slots / np.maximum(ctas, 1.0)
    else:
        load = np.ceil(ctas / sms) * sms / ctas
    return np.where(np.isfinite(load), np.maximum(load, 1.0), 1.0)


def idle_stretch(facts: KernelFacts, M: Any, N: Any, sms: int) -> np.ndarray:
    """S / C for a tensor-core GEMV (one CTA per `cta_tiles` n-tiles, module doc) launching C < S CTAs on S SMs; 1
    where C >= S or for any other kernel: the factor on its per-SM (alu, tensor) terms."""
    M = np.asarray(M, dtype=np.float64)
    if facts.family != "gemv" or facts.stream_k_ctas or not declares_grid(facts):
        return np.ones(M.shape)
    return np.maximum(sms / np.maximum(grid_ctas(facts, M, N, sms), 1.0), 1.0)


def waves(facts: KernelFacts, M: Any, N: Any, sms: int, resident_ctas: int = 1) -> np.ndarray:
    """ceil(CTAs / (SMs x resident CTAs per SM)): how many rounds of the grid the GPU runs (NaN: no grid)."""
    return np.ceil(grid_ctas(facts, M, N, sms) / (sms * resident_ctas))
