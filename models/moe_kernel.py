"""The kernel tier of a grouped MoE expert layer (issue 33): one launch of a grouped kernel over the touched experts.

The grouped tensor-core kernels (kernels/grouped/grouped.py, docs/moe.md) walk (touched expert, 16-channel row tile)
items on a persistent grid; each item multiplies its expert's rows in passes of R rows (R = 8 x n-tiles, at most
96). R is a figure of (B, E, k) alone under uniform routing, so one CUDA graph serves every routing: the mean rows
per touched expert, or the busiest expert's where one expert's weights exceed twice the L2 (a second pass would read
them from DRAM again). An expert with c rows takes ceil(c / R) passes. With the routing model (models.moe: each
expert's rows ~ Bin(B, q_e)) the layer's terms, for the kernel-tier's KernelParams (models.kernel_model), are:
  passes   P = Σ_e E[ceil(c_e / R)] = Σ_e Σ_{j≥0} P(c_e > j·R)          (item passes per 16-channel tile column)
  memory   the read curve of V = touched experts' weights (× passes per expert where the experts exceed 2 × L2) plus
           the B·k activation rows in and out                             (p.mem_scale)
  tensor   2 · P · R · N · K on the kernel's mma.sync path                 (p.tc_eff: the GEMV-class tile's issue rate)
  alu      W4A16: N · K · P weights converted; FP8: the same count of e4m3 → fp16 conversions (p.alu_dq)
  fixed    the read curve at its smallest size, plus p.extra_fixed_s
The wgmma GEMM (grouped_bf16_wg, `widths`) runs each pass of R = 64 or 128 rows as an item of its own on the
smallest wgmma width W(c) in {16, 32, 64, 128} holding the pass's rows: memory = the read curve of P passes' weights,
tensor = 2 · Σ_e E[Σ_passes W] · N · K, the x rows read from L2 once per 128-channel tile (the fixup term).
Time = models.kernel_model.combine. `GROUPED` holds the facts; its pass policy mirrors
kernels/grouped/grouped.py choose_tc_config (tests/test_moe_kernel.py checks they agree). Pure Python and NumPy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.errors import InputError
from models.kernel_model import KernelParams, Terms, combine
from models.kernel_terms import GpuTerms, KernelFacts
from models.moe import Routing, expert_load, inclusion, parse_routing
from models.schemes import get_scheme, traffic


@dataclass(frozen=True)
class GroupedFacts:
    """What the kernel tier knows about one grouped kernel."""

    scheme: str
    facts: KernelFacts  # family, instruction path and conversion (for KernelParams and the fit's active parameters)
    row_step: int = 8  # rows of an n-tile
    rows_max: int = 96  # n-tiles per pass at most (TC_NT_MAX = 12)
    big_over_l2: float = 2.0  # experts larger than this x L2: passes sized to the busiest expert, re-read from DRAM
    # a wgmma GEMM (grouped_bf16_wg): the instruction widths an item picks from (the smallest holding its pass's
    # rows); passes of `wide_rows` rows, or twice that where uniform routing's busiest expert has more; each pass an
    # item of its own (weights read from DRAM again), x rows read from L2 once per bn-channel tile, bn_wide channels
    # for passes of twice wide_rows where (touched expert, bn_wide tile) items number bn_wide_items or more. Empty:
    # the GEMV-class pass model above.
    widths: tuple[int, ...] = ()
    wide_rows: int = 64
    bn: int = 128
    bn_wide: int = 256
    bn_wide_items: int = 512


SPLIT_K = ((1 << 30, 1),)  # the warps of a CTA split K: their fp32 partial sums are summed (the fixup term)
GROUPED: dict[str, GroupedFacts] = {
    "grouped_bf16_tc": GroupedFacts("bf16", KernelFacts(family="gemv", path="mma_sync_bf16", cuda_core_rows=True,
                                                                   stream_k_ctas=SPLIT_K)),
    "grouped_w4a16_tc": GroupedFacts("w4a16", KernelFacts(family="gemv", path="mma_sync_f16", dequant="w4",
                                                                      stream_k_ctas=SPLIT_K)),
    # wgmma with both operands in shared memory (kernels/grouped/grouped_wg.cu): the dense wg_bf16's path; its
    # parameters are fitted where the dataset has its rows on a calibrated GPU, else its family's median
    "grouped_bf16_wg": GroupedFacts("bf16", KernelFacts(family="wgmma", path="wgmma_bf16"), widths=(16, 32, 64, 128)),
    # e4m3 fragments converted to fp16 once per pass (cvt.rn.f16x2.e4m3x2), products on the f16 mma.sync: the dense
    # fp8_tc_gemv's path and conversion (kernels/tcgemv/tc_gemv_q8.py)
    "grouped_fp8_tc": GroupedFacts("fp8", KernelFacts(family="gemv", path="mma_sync_f16", dequant="e4m3",
                                                      stream_k_ctas=SPLIT_K)),
}
# scheme -> its grouped kernels; a prediction without a named kernel takes the fastest that the GPU runs
KERNELS_OF_SCHEME: dict[str, tuple[str, ...]] = {}
for _name, _g in GROUPED.items():
    KERNELS_OF_SCHEME[_g.scheme] = (*KERNELS_OF_SCHEME.get(_g.scheme, ()), _name)
MIN_CC = {"grouped_fp8_tc": 89, "grouped_bf16_wg": 90}  # kernels/grouped/grouped.py MIN_CC / MAX_CC
MAX_CC = {"grouped_bf16_wg": 90}


def runs_on(kernel: str, cc: int) -> bool:
    """Whether a grouped kernel runs on a GPU of compute capability `cc` (90 for 9.0)."""
    return MIN_CC.get(kernel, 80) <= cc <= MAX_CC.get(kernel, cc)


GROUP = 128
GROUP_META_BYTES = 4  # W4A16: the kernel stores an fp16 scale and an fp16 zero per group of 128 (pack_w4)
EXPERT_SCALE_BYTES = 4  # FP8: one fp32 weight scale per expert (the per-token activation scales ride with the rows)


def expert_weight_bytes(scheme: str, N: int, K: int) -> float:
    """One expert's weights as the grouped kernel stores them (W4A16: 4-bit codes, a scale+zero word per group;
    FP8: e4m3 codes and one fp32 scale)."""
    t = traffic(get_scheme(scheme), 1.0, N, K)
    if scheme == "fp8":
        return float(t.weight_bytes + EXPERT_SCALE_BYTES)
    return float(t.weight_bytes + (N * (K // GROUP) * GROUP_META_BYTES if scheme == "w4a16" else t.scale_bytes))


def tile_channels(g: GroupedFacts, batch: int, N: int, experts: int, top_k: int, R: int) -> int:
    """Channels of a wgmma item's tile for passes of R rows (the x rows are read from L2 once per tile)."""
    if R > g.wide_rows and N % g.bn_wide == 0 and min(experts, batch * top_k) * (N // g.bn_wide) >= g.bn_wide_items:
        return g.bn_wide
    return g.bn


def pass_rows(g: GroupedFacts, batch: int, N: int, K: int, experts: int, top_k: int, l2_bytes: float) -> int:
    """R: rows of an expert per pass, sized on uniform routing (a figure of B, E, k, as the launch is)."""
    load = expert_load([batch], experts, top_k)
    if g.widths:
        return g.wide_rows if float(load.busiest[0]) <= g.wide_rows else 2 * g.wide_rows
    big = expert_weight_bytes(g.scheme, N, K) > g.big_over_l2 * l2_bytes
    rows = float(load.busiest[0] if big else load.tokens[0])
    tiles = max(1, min(g.rows_max // g.row_step, math.ceil(rows / g.row_step - 1e-6)))
    return tiles * g.row_step


def expected_passes(batch: int, q: np.ndarray, rows: int) -> tuple[float, float]:
    """(Σ_e E[ceil(c_e / rows)], E[touched]) with c_e ~ Bin(batch, q_e)."""
    from scipy.stats import binom

    j = np.arange(0, batch // rows + 1)[:, None] * rows
    passes = float(np.sum(binom.sf(j, batch, q[None, :])))
    touched = float(np.sum(1.0 - (1.0 - q) ** batch))
    return passes, touched


def pass_widths(counts: np.ndarray, rows: int, widths: tuple[int, ...]) -> np.ndarray:
    """Σ over an expert's passes of the wgmma width each takes, for expert row counts `counts` (passes of `rows`)."""
    c = np.asarray(counts, dtype=np.int64)
    w = np.asarray(sorted(widths), dtype=np.float64)
    rest = c % rows
    last = np.where(rest > 0, w[np.minimum(np.searchsorted(w, rest), len(w) - 1)], 0.0)
    return (c // rows) * w[np.searchsorted(w, rows)] + last


def expected_widths(batch: int, q: np.ndarray, rows: int, widths: tuple[int, ...]) -> float:
    """E[Σ_e pass_widths(c_e)] with c_e ~ Bin(batch, q_e)."""
    from scipy.stats import binom

    c = np.arange(batch + 1)
    return float(np.sum(binom.pmf(c[:, None], batch, q[None, :]) * pass_widths(c, rows, widths)[:, None]))


@dataclass(frozen=True)
class Layer:
    """One grouped expert layer at one batch: the problem the kernel tier prices."""

    kernel: str
    batch: int
    N: int
    K: int
    experts: int
    top_k: int
    routing: Routing = Routing()
    seed: int | None = None  # the routing drawn with this seed (models.moe.draw: a measured point's); None: expected


def drawn_passes(layer: Layer, rows: int) -> tuple[float, float]:
    """(Σ_e ceil(c_e / rows), touched experts) of the routing drawn with layer.seed."""
    c = np.bincount(_drawn(layer).ravel(), minlength=layer.experts)
    return float(np.sum(np.ceil(c / rows))), float(np.count_nonzero(c))


def _drawn(layer: Layer) -> np.ndarray:
    """The [B, k] expert choices drawn with layer.seed (models.moe.draw: a measured point's routing)."""
    from models.moe import draw

    return draw(layer.batch, layer.experts, layer.top_k, layer.routing, int(layer.seed))


def layer_terms(layer: Layer, gpu: GpuTerms, l2_bytes: float) -> tuple[Terms, dict[str, float]]:
    """The unscaled terms of one grouped layer and its figures (rows per pass, passes, touched, bytes, flops)."""
    g = GROUPED.get(layer.kernel)
    if g is None:
        raise InputError(f"no grouped kernel facts for {layer.kernel!r}; valid: {', '.join(GROUPED)}")
    r = parse_routing(layer.routing)
    r.check(layer.experts, layer.top_k)
    q = inclusion(r.shares(layer.experts), layer.top_k)
    R = pass_rows(g, layer.batch, layer.N, layer.K, layer.experts, layer.top_k, l2_bytes)
    P, touched = expected_passes(layer.batch, q, R) if layer.seed is None else drawn_passes(layer, R)
    w = expert_weight_bytes(g.scheme, layer.N, layer.K)
    rows = layer.batch * layer.top_k
    act = traffic(get_scheme(g.scheme), float(rows), layer.N, layer.K)
    one = np.ones(1)
    f = g.facts
    if g.widths:  # each pass an item of its own: the weights read once per pass; x rows from L2 once per tile
        V = w * P + act.act_bytes + act.out_bytes
        W = expected_widths(layer.batch, q, R, g.widths) if layer.seed is None else float(np.sum(pass_widths(
            np.bincount(_drawn(layer).ravel(), minlength=layer.experts), R, g.widths)))
        terms = Terms(fixed=one * gpu.fixed_s, memory=np.maximum(gpu.read_time(one * V) - gpu.fixed_s, 0.0),
                      dequant=one * 0.0, rows=one * 0.0,
                      tensor=one * 2.0 * W * layer.N * layer.K / gpu.path_flops[f.path],
                      fixup=one * act.act_bytes * math.ceil(layer.N / tile_channels(
                          g, layer.batch, layer.N, layer.experts, layer.top_k, R)) / gpu.l2_bytes_per_s)
        return terms, {"pass_rows": float(R), "passes": P, "touched": touched, "bytes": V,
                       "flops": 2.0 * rows * layer.N * layer.K}
    V = w * touched + act.act_bytes + act.out_bytes  # a pass re-reads its 16-channel tile at once: from L2
    weights = layer.N * layer.K * P  # weights an item's passes load into fragments
    dq = weights / gpu.dequant_weights_per_s[f.dequant] if f.dequant != "none" else 0.0
    per_pass = weights / gpu.fma_per_s if f.cuda_core_rows else 0.0
    terms = Terms(fixed=one * gpu.fixed_s, memory=np.maximum(gpu.read_time(one * V) - gpu.fixed_s, 0.0),
                  dequant=one * dq, rows=one * per_pass,
                  tensor=one * 2.0 * P * R * layer.N * layer.K / gpu.path_flops[f.path],
                  fixup=one * 4.0 * P * R * layer.N / gpu.l2_bytes_per_s)
    figures = {"pass_rows": float(R), "passes": P, "touched": touched, "bytes": V,
               "flops": 2.0 * rows * layer.N * layer.K}
    return terms, figures


def predict_layer(layer: Layer, gpu: GpuTerms, l2_bytes: float, p: KernelParams) -> dict[str, float]:
    """time_kernel_s, its attribution and the layer's figures."""
    t, figures = layer_terms(layer, gpu, l2_bytes)
    return {**{k: float(v[0]) for k, v in combine(t, p).items()}, **figures}


def stack(terms: list[Terms]) -> Terms:
    """Many one-point Terms as one (the fit's input)."""
    return Terms(*(np.concatenate([getattr(t, f) for t in terms]) for f in Terms.__dataclass_fields__))


def fit(kernel: str, terms: list[Terms], measured: Any) -> tuple[KernelParams, float]:
    """KernelParams of one grouped kernel from its layers' terms and measured times (models.kernel_fit's least
    squares on log time with its weak priors); (params, RMS log error)."""
    from models.kernel_fit import FIT_MIN_POINTS, _fit_one

    meas = np.asarray(measured, dtype=np.float64)
    if len(meas) < FIT_MIN_POINTS:
        raise InputError(f"{kernel}: {len(meas)} points, a fit needs {FIT_MIN_POINTS}")
    return _fit_one(GROUPED[kernel].facts, [(stack(terms), meas)], True)
