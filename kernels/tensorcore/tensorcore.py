"""Tensor-core GEMM kernels for batch 16-256 (mma.sync, stream-K): registry entries and their runners.

They run any M from 1 (rows past M are zero-filled in shared memory, so M < 16 costs what M = 16 does); the
dispatcher prefers them from M = 16 unless measurements say otherwise.

Kernels (kernels/tensorcore/tc_gemm_*.cu), all y[M, N] = x[M, K] . W[N, K]^T:
- tc_bf16 / tc_fp16: 16-bit weights and activations, canonical row-major W (no reorder).
- tc_w4a16: int4 weights (G = 128, fp16 scale and fp16 zero per group) reordered by kernels.quant.pack_tc, fp16 x.
- tc_w8a8: int8 W (fp32 per-channel scale) x int8 x (fp32 per-token scale), s8 mma with int32 accumulation.
- tc_fp8: e4m3 W (per channel) x e4m3 x (per token), converted to fp16 in registers for the FP16 mma: not the
  native FP8 tensor-core path (see the spec's notes).
Activations are quantized (w8a8, fp8) when the input set is made, outside the timed launch.

The geometry is chosen per M (`tile_config`): BM rows per CTA (16/32/64/128), BN = 128, a persistent grid of
(SMs x CTAs-per-SM / m-tiles) x m-tiles CTAs, each taking a contiguous range of (n-tile, k-tile) iterations.
CuPy is imported inside functions only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np

from kernels import problems
from kernels.registry import KernelSpec, Problem, check_batch
from models.errors import InputError
from models.kernel_terms import STREAM_K_CTAS, KernelFacts, m_tiles_from, persistent_grid
from models.schemes import SCHEME_PARAMS

W4_GROUP: int = SCHEME_PARAMS["w4a16"]["group_size"]  # the default group size (the only one the kernel's layout holds)
# scheme -> (weights, activations) as the kernels read them (kernels.problems.Params)
_PARAMS = {"bf16": ("bf16", "bf16"), "fp16": ("f16", "f16"), "w4a16": ("w4", "f16"), "w8a8": ("w8", "i8"),
           "fp8": ("e4m3", "e4m3")}
# scheme -> the problem's arrays that hold the packed weights (TensorCoreRunner._pack), when not just "w"
_WEIGHT_ARRAYS = {"w4a16": ("w", "sz"), "w8a8": ("w", "sb"), "fp8": ("w", "sb")}

_GEOMETRY = ("BM x 128 outputs per CTA, BM and the variant (narrow: 4 warps, 128-byte k-tiles; wide: 8 warps, "
             "256-byte k-tiles, all of M in one tile up to 256; wide-ksplit / wide-sumscale: wide with a 4th stage at "
             "BM 16/64, w4a16 with the scale on the fp32 sums, with or without the k-steps split over 2 warp groups) "
             "chosen per M by tensorcore.SELECT; "
             "{stages}-stage cp.async "
             "pipeline; persistent stream-K grid over (n-tile, k-tile) x m-tiles, split tiles summed through per-CTA "
             "slots by the CTA that completes them")


def _spec(name: str, scheme: str, source: str, entry: str, notes: str, stages: str = "3-8") -> KernelSpec:
    return KernelSpec(name=name, scheme=scheme, backend="nvrtc", role="optimized",
                      runner="kernels.tensorcore.tensorcore:make_runner", m_min=1, m_max=256, prefer_from=16, min_cc=80,
                      source=source,
                      entry=entry,
                      geometry=_GEOMETRY.format(stages=stages), notes=notes)


SPECS: tuple[KernelSpec, ...] = (
    _spec("tc_bf16", "bf16", "tc_gemm_f16.cu", "tc_gemm_bf16",
          "mma.sync m16n8k16 bf16 -> fp32; W row-major as given; bf16 output"),
    _spec("tc_fp16", "fp16", "tc_gemm_f16.cu", "tc_gemm_fp16",
          "mma.sync m16n8k16 f16 -> fp32; W row-major as given; fp16 output"),
    _spec("tc_w4a16", "w4a16", "tc_gemm_w4a16.cu", "tc_gemm_w4a16",
          "int4 G=128 reordered offline (kernels.quant.pack_tc), fp16 scale + fp16 zero per group (zero stored as "
          "fp16: 4.25 bits/weight), 0x6400 dequant in registers; no L2 evict-first hint (see the .cu); fp16 x and y; "
          "narrow: BM <= 64 (M > 64 runs several m-tiles); wide: BM up to 256 with 8 warps"),
    _spec("tc_w8a8", "w8a8", "tc_gemm_w8a8.cu", "tc_gemm_w8a8",
          "mma.sync m16n8k32 s8 -> s32; fp32 per-channel x per-token rescale in the epilogue; fp16 output; "
          "activation quantization not timed"),
    _spec("tc_fp8", "fp8", "tc_gemm_fp8.cu", "tc_gemm_fp8",
          "NOT native FP8: e4m3 weights and activations converted to fp16 in registers (exact), FP16 mma.sync "
          "m16n8k16 (sm_90 mma.sync e4m3 is emulated; wgmma not used); per-channel x per-token fp32 scales; fp16 "
          "output; activation quantization not timed"),
)

# scheme -> (element bytes of x and W as the kernel reads them, K multiple, output dtype name)
_LAYOUT: dict[str, tuple[int, int, str]] = {
    "bf16": (2, 64, "bf16"), "fp16": (2, 64, "float16"), "w4a16": (2, 128, "float16"),
    "w8a8": (1, 128, "float16"), "fp8": (1, 128, "float16"),
    "w8a16": (2, 64, "float16"),  # the wgmma W8A16 GEMMs' x (kernels.wgmma.wg_w8a16: kt = bytes of x per k-tile)
}
BN = 128


@dataclass(frozen=True)
class Tile:
    """One compiled entry <entry>_m<bm> of a variant (the .cu's TC_BYTES_ENTRIES / TC_W4_ENTRY tables)."""

    bm: int
    warps: int
    stages: int
    kt: int = 128  # bytes of K per k-tile (byte GEMMs); w4a16 k-tiles are always 128 elements


@dataclass(frozen=True)
class Variant:
    options: tuple[str, ...]  # NVRTC options selecting the variant's entries
    byte_tiles: dict[int, Tile]  # bf16 / fp16 / w8a8 / fp8 (tc_gemm_bytes.cuh)
    w4_tiles: dict[int, Tile]  # w4a16 (tc_gemm_w4a16.cu)


_DEEP_BYTES = {16: Tile(16, 8, 4, 256), 32: Tile(32, 8, 4, 256), 64: Tile(64, 8, 4, 256), 128: Tile(128, 8, 3, 256),
             256: Tile(256, 8, 4, 128)}
VARIANTS: dict[str, Variant] = {
    # the first, measured configuration: 4 warps, 128 bytes of K per barrier, w4a16 BM <= 64
    "narrow": Variant((), {16: Tile(16, 4, 4), 32: Tile(32, 4, 4), 64: Tile(64, 4, 4), 128: Tile(128, 4, 3)},
                  {16: Tile(16, 4, 4), 32: Tile(32, 4, 4), 64: Tile(64, 4, 4)}),
    # 8 warps, 256 bytes of K per barrier, M = 256 in one tile; w4a16: deeper pipelines, 8 warps from BM = 64
    "wide": Variant(("-DTC_WIDE",),
                  {16: Tile(16, 8, 3, 256), 32: Tile(32, 8, 4, 256), 64: Tile(64, 8, 3, 256),
                   128: Tile(128, 8, 3, 256), 256: Tile(256, 8, 4, 128)},
                  {16: Tile(16, 4, 8), 32: Tile(32, 4, 6), 64: Tile(64, 8, 4), 128: Tile(128, 8, 4),
                   256: Tile(256, 8, 3)}),
    # wide with one more stage at BM 16 and 64; w4a16: scale on the fp32 sums per k-tile and the k-steps split over
    # two warp groups (8 warps) at BM <= 32
    "wide-ksplit": Variant(("-DTC_WIDE_KSPLIT",), _DEEP_BYTES,
                  {16: Tile(16, 8, 6), 32: Tile(32, 8, 4), 64: Tile(64, 8, 4), 128: Tile(128, 8, 4),
                   256: Tile(256, 8, 3)}),
    # wide-ksplit's byte GEMMs; w4a16: scale on the sums without the k-split (4 warps, deeper pipelines) at BM <= 32,
    # the k-split (two groups of 4 warps over the same 64 rows) at BM = 64
    "wide-sumscale": Variant(("-DTC_WIDE_SUMSCALE",), _DEEP_BYTES,
                  {16: Tile(16, 4, 8), 32: Tile(32, 4, 6), 64: Tile(64, 8, 4), 128: Tile(128, 8, 4),
                   256: Tile(256, 8, 3)}),
}

# The selection table: scheme -> ((largest M, variant), ...) in increasing M; edited from measurements only
# (docs/kernels-tensorcore.md). A variant whose k-tile does not divide K falls back to narrow.
# (Development names, used in docs/kernels-tensorcore.md's history: v1 = narrow, v2 = wide, v3 = wide-ksplit,
# v4 = wide-sumscale.)
# H200 (bench/bench_tensorcore.py, 2026-12-02): the faster variant summed over 22016x4096 and 4096x11008; the extra
# stage wins at BM = 16 for the byte GEMMs and loses at 64; w4a16: wide below 16 rows, the k-split at 16, the scale on
# the sums at 32, wide (= the others there) to 128, narrow's four 64-row tiles at 256. fp8 was not re-measured with
# wide-ksplit (kept as before);
# fp16 shares bf16's mainloop and follows bf16's choice (unmeasured).
SELECT: dict[str, tuple[tuple[int, str], ...]] = {
    "bf16": ((16, "wide-ksplit"), (256, "wide")),
    "fp16": ((16, "wide-ksplit"), (256, "wide")),
    "w4a16": ((8, "wide"), (16, "wide-ksplit"), (32, "wide-sumscale"), (128, "wide"), (256, "narrow")),
    "w8a8": ((16, "wide-ksplit"), (128, "wide"), (256, "narrow")),
    "fp8": ((32, "narrow"), (256, "wide")),
}


@dataclass(frozen=True)
class TileConfig:
    bm: int
    stages: int
    m_tiles: int
    smem_bytes: int  # dynamic shared memory per CTA
    threads: int = 128
    kt: int = 128
    variant: str = "narrow"
    bn: int = BN  # output channels per CTA tile
    cluster: int = 1  # CTAs per cluster (wgmma: a split tile's pieces, summed in distributed shared memory)


def _k_bytes(scheme: str, K: int) -> int:
    return K * _LAYOUT[scheme][0]


def select_variant(scheme: str, M: int, K: int | None = None) -> str:
    """The variant SELECT names for batch M; narrow when the variant's k-tile does not divide K."""
    name = next((v for m_max, v in SELECT[scheme] if M <= m_max), SELECT[scheme][-1][1])
    if K is not None and scheme != "w4a16" and _k_bytes(scheme, K) % _tile(scheme, M, name).kt:
        return "narrow"
    return name


def _tile(scheme: str, M: int, variant: str) -> Tile:
    if variant not in VARIANTS:
        raise InputError(f"unknown tensor-core variant {variant!r}; known: {', '.join(VARIANTS)}")
    v = VARIANTS[variant]
    tiles = v.w4_tiles if scheme == "w4a16" else v.byte_tiles
    return tiles[next((b for b in sorted(tiles) if M <= b), max(tiles))]


def tile_config(scheme: str, M: int, variant: str | None = None, K: int | None = None) -> TileConfig:
    """The tile shape used for batch M (pure arithmetic, no GPU); variant None = the SELECT table's choice."""
    name = variant or select_variant(scheme, M, K)
    t = _tile(scheme, M, name)
    if scheme == "w4a16":
        smem = t.stages * (t.bm * 256 + BN * 64 + BN * 4)
    else:
        smem = t.stages * (t.bm + BN) * t.kt
    return TileConfig(t.bm, t.stages, math.ceil(M / t.bm), smem, 32 * t.warps, t.kt, name)


def check_shape(spec: KernelSpec, M: int, N: int, K: int, variant: str | None = None) -> None:
    check_batch(spec, M)
    _, k_mult, _ = _LAYOUT[spec.scheme]
    if variant is not None and spec.scheme != "w4a16":
        k_mult = max(k_mult, tile_config(spec.scheme, M, variant).kt // _LAYOUT[spec.scheme][0])
    if N <= 0 or K <= 0 or N % BN or K % k_mult:
        raise InputError(f"kernel {spec.name} needs N a multiple of {BN} and K a multiple of {k_mult}, "
                         f"got N={N}, K={K}")


@cache
def device_properties(device_id: int) -> dict[str, Any]:
    """cudaGetDeviceProperties of a device, read once (it costs milliseconds, and every input set needs it)."""
    import cupy

    return dict(cupy.cuda.runtime.getDeviceProperties(device_id))


def ktiles_of(scheme: str, K: int, cfg: TileConfig) -> int:
    """The k-tiles of one tile: 128-deep for w4a16, cfg.kt bytes of K otherwise."""
    return K // 128 if scheme == "w4a16" else _k_bytes(scheme, K) // cfg.kt


def device_sms() -> int:
    """The current device's SM count (the planned one's inside kernels.toolchain.build.planned_device), 0 where no GPU
    can be asked (NVRTC jobs are planned without one)."""
    from kernels.toolchain import build

    if build.planned_sms():
        return build.planned_sms()
    try:
        import cupy

        return int(device_properties(cupy.cuda.Device().id)["multiProcessorCount"])
    except (ImportError, RuntimeError):
        return 0


def grid_ctas(tiles_n: int, ktiles: int, m_tiles: int, sms: int, per_sm: int, min_use: float = 0.0) -> int:
    """CTAs per m-tile of the persistent grid over sms * per_sm slots, never more than there are iterations: stream-K
    over every slot, or persistent_grid's aligned grid where it keeps at least `min_use` of them busy (0: never)."""
    return persistent_grid(tiles_n, ktiles, max(1, (sms * per_sm) // m_tiles), min_use)


class TensorCoreRunner:
    """Runner (kernels.registry protocol) for one tensor-core kernel.

    `per_sm` overrides the CTAs per SM; `variant` forces one VARIANTS entry for every M (bench and tests), None
    follows the SELECT table.
    """

    def __init__(self, spec: KernelSpec, per_sm: int | None = None, variant: str | None = None,
                 group_size: int | None = None):
        if variant is not None and variant not in VARIANTS:
            raise InputError(f"unknown tensor-core variant {variant!r}; known: {', '.join(VARIANTS)}")
        self.spec = spec
        self.per_sm = per_sm
        self.variant = variant
        self.group_size = (group_size or W4_GROUP) if spec.scheme == "w4a16" else 0
        self._kernels: dict[object, Any] = {}  # compiled functions, keyed by what names the instance
        self._inputs = problems.PackedCache(spec.name)  # weights packed once per shape, shared by every batch

    # -- geometry
    def config(self, M: int, N: int, K: int) -> TileConfig:
        return tile_config(self.spec.scheme, M, self.variant, K)

    def _kernel(self, cfg: TileConfig) -> Any:
        from kernels.toolchain import build

        key = (cfg.variant, cfg.bm)
        if key not in self._kernels:
            fn = build.function(self.spec.source, f"{self.spec.entry}_m{cfg.bm}", VARIANTS[cfg.variant].options)
            fn.max_dynamic_shared_size_bytes = cfg.smem_bytes
            self._kernels[key] = fn
        return self._kernels[key]

    def _ctas_per_sm(self, fn: Any, cfg: TileConfig) -> int:
        import cupy

        if self.per_sm:
            return self.per_sm
        props = device_properties(cupy.cuda.Device().id)
        smem_sm = int(props.get("sharedMemPerMultiprocessor", 233472))
        regs_sm = int(props.get("regsPerMultiprocessor", 65536))
        regs = max(1, int(getattr(fn, "num_regs", 255)))
        by_regs = regs_sm // (((regs + 7) // 8) * 8 * cfg.threads)
        by_smem = smem_sm // (cfg.smem_bytes + 1024 + int(getattr(fn, "shared_size_bytes", 0)))
        return max(1, min(by_regs, by_smem, 4))

    # -- Runner protocol
    def check(self, M: int, N: int, K: int) -> None:
        check_shape(self.spec, M, N, K, self.variant)
        if self.group_size and self.group_size != W4_GROUP:
            from kernels.quant import pack_tc

            pack_tc.check_tc_w4_shape(N, K, self.group_size)

    def params(self) -> problems.Params:
        """The problem this kernel reads (kernels.problems): weights and activations per scheme, per-channel and
        per-token scales."""
        weight, act = _PARAMS[self.spec.scheme]
        return problems.Params(self.spec.scheme, weight, act, group_size=self.group_size)

    def compile_jobs(self, M: int, N: int, K: int) -> list[tuple[str, str, str, tuple[str, ...]]]:
        from kernels.toolchain import build

        cfg = self.config(M, N, K)
        if cfg.variant not in VARIANTS:  # a subclass with its own kernels (and its own compile path)
            return []
        return [(self.spec.source, f"{self.spec.entry}_m{cfg.bm}", build.device_arch(),
                 VARIANTS[cfg.variant].options)]

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy

        self.check(M, N, K)
        scheme = self.spec.scheme
        cfg = self.config(M, N, K)
        fn = self._kernel(cfg)
        inputs, xs, ws = self._inputs.make(self.params(), M, N, K, seed=seed, reference=reference, pack=self._pack)
        ref, qerr = inputs.ref, inputs.quant_error_rel
        arrays: dict[str, Any] = {"x": xs[0], **({"sa": xs[1]} if len(xs) > 1 else {})}
        arrays |= dict(zip(_WEIGHT_ARRAYS.get(scheme, ("w",)), ws, strict=True))
        nbytes = problems.bytes_read(*arrays.values())
        out_dtype = cupy.uint16 if scheme == "bf16" else cupy.float16
        out = cupy.empty((M, N), dtype=out_dtype)
        tiles_n = N // cfg.bn
        ktiles = ktiles_of(scheme, K, cfg)
        arrays["counters"] = cupy.zeros(cfg.m_tiles * tiles_n, dtype=cupy.int32)
        if "sa" not in arrays:
            arrays["sa"] = arrays["sb"] = cupy.ones(1, dtype=cupy.float32)  # unused by the kernel
        ctas = self._grid(fn, cfg, tiles_n, ktiles)
        # split-K slots (finish_tile in tc_common.cuh): two per CTA of one CTA tile's sums, twice that for w4a16,
        # whose k-split warp groups (wide-ksplit / wide-sumscale) hold a tile each; overwritten before they are read,
        # never zeroed
        slot = cfg.bm * cfg.bn * (2 if scheme == "w4a16" else 1)
        arrays["ws"] = cupy.empty(cfg.m_tiles * ctas * 2 * slot, dtype=cupy.uint32)
        problem = Problem(M, N, K, arrays, out, nbytes, ref, qerr, nbytes + problems.bytes_read(out))
        # launch geometry rides on the problem (not in `arrays`, which holds device arrays only)
        problem.tc_launch = ((ctas, cfg.m_tiles), (cfg.threads,), cfg.smem_bytes)
        problem.tc_config = cfg
        return problem

    def _pack(self, w: Any) -> tuple[Any, ...]:
        """Canonical weights (kernels.problems) as the kernel reads them: _WEIGHT_ARRAYS' arrays, in that order."""
        import cupy

        if self.spec.scheme == "w4a16":
            from kernels.quant import pack_tc

            packed = pack_tc.pack_w4(w, cupy)
            return packed.words, packed.scale_zero
        if self.spec.scheme in ("w8a8", "fp8"):
            return w.codes, w.scales if w.scales.dtype == cupy.float32 else w.scales.astype(cupy.float32)
        return (w,)

    def _grid(self, fn: Any, cfg: TileConfig, tiles_n: int, ktiles: int) -> int:
        """CTAs per m-tile of the persistent grid."""
        return grid_ctas(tiles_n, ktiles, cfg.m_tiles, *self._sms_and_per_sm(fn, cfg), self._aligned_share())

    def _aligned_share(self) -> float:
        """The share of SMs an aligned grid must keep busy to replace stream-K (0: stream-K always)."""
        return 0.0

    def _sms_and_per_sm(self, fn: Any, cfg: TileConfig) -> tuple[int, int]:
        import cupy

        sms = int(device_properties(cupy.cuda.Device().id)["multiProcessorCount"])
        return sms, self._ctas_per_sm(fn, cfg)

    def launch(self, problem: Problem) -> None:
        import numpy

        a = problem.arrays
        grid, block, smem = problem.tc_launch
        M, N, K = problem.M, problem.N, problem.K
        fn = self._kernel(problem.tc_config)
        i32 = numpy.int32
        if self.spec.scheme == "w4a16":
            args = (a["x"], a["w"], a["sz"], problem.out, a["ws"], a["counters"], i32(M), i32(N), i32(K))
        else:
            k_bytes = K * _LAYOUT[self.spec.scheme][0]
            args = (a["x"], a["w"], problem.out, a["ws"], a["counters"], a["sa"], a["sb"], i32(M), i32(N),
                    i32(k_bytes))
        fn(grid, block, args, shared_mem=smem)

    def output(self, problem: Problem) -> np.ndarray:
        import cupy

        from kernels.quant import quant

        y = cupy.asnumpy(problem.out)
        if self.spec.scheme == "bf16":
            return quant.from_bf16_bits(y).astype(np.float64)
        return y.astype(np.float64)

    def device_output(self, problem: Problem) -> Any:
        """The output as a float64 device array (fp16, or bf16 bits: kernels/problems.cu's conversions)."""
        return problems.to_float64(problem.out)


def make_runner(spec: KernelSpec, per_sm: int | None = None, variant: str | None = None,
                group_size: int | None = None) -> TensorCoreRunner:
    return TensorCoreRunner(spec, per_sm, variant, group_size)


# What the kernel-aware model needs (models.kernel_terms): the mma.sync instruction each scheme issues (fp8 and w4a16
# convert to f16 first), the batch tile per M from SELECT, BN channels per tile.
_PATH = {"bf16": ("mma_sync_bf16", "none"), "fp16": ("mma_sync_f16", "none"), "w4a16": ("mma_sync_f16", "w4"),
         "w8a8": ("mma_sync_s8", "none"), "fp8": ("mma_sync_f16", "e4m3")}
SPECS = tuple(replace(s, facts=KernelFacts("mma_sync", _PATH[s.scheme][0], _PATH[s.scheme][1],
                                           m_tiles_from(lambda M, s=s: tile_config(s.scheme, M).bm), BN,
                                           stream_k_ctas=STREAM_K_CTAS))
              for s in SPECS)
