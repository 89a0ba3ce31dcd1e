"""GEMV-class CUDA kernels (batch M = 1..16): registry entries, launch geometry, runners and a simple launcher.

Every kernel reads each weight once for all M activation rows. The optimized kernels share gemv_common.cuh and are
compiled per configuration through NVRTC -D options (cached by kernels.toolchain.build and CuPy's disk cache):
  MB    rows of x per launch, the smallest of MB_BINS >= M (rows M..MB-1 are zero-padded in registers)
  RW    weight rows per tile; U: 16-byte chunks per row in flight per thread
  XREG  one pass over K with x held in registers (when blockDim * U covers a row), else x re-read through L1
  warps per block (they split K); grid = min(tiles, resident blocks on all SMs): a persistent grid.
The chapter's reference kernels (gemv_reference.cu) and the ladder rungs (kernels/gemv/ladder.py) stage x in shared
memory in K-tiles (`x_tile`) and take the w4 group size as the compile-time W4_GROUP.
`choose_config` picks these; the benchmark (bench/bench_gemv.py) can override them to compare variants.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kernels import problems
from kernels.gemv.xstage import allow_smem, x_smem_bytes, x_tile
from kernels.launch import BoundLaunchRunner, Launch, bound_problem, check_aligned, device_sms, resident_blocks
from kernels.quant import pack_w4, quant
from kernels.registry import KernelSpec, Problem, check_batch
from kernels.toolchain import build
from models.errors import InputError
from models.kernel_terms import KernelFacts, m_tiles_from
from models.schemes import SCHEME_PARAMS

W4_GROUP: int = SCHEME_PARAMS["w4a16"]["group_size"]  # the default group size of the w4a16 scheme

MB_BINS = (1, 2, 3, 4, 8, 16)
_RUN = "kernels.gemv.gemv:make_runner"


@dataclass(frozen=True)
class KernelDef:
    source: str
    entry: str
    elems: int  # weights per 16-byte chunk (0: a reference kernel, warp per row)
    k_multiple: int  # K must be a multiple of this
    x_kind: str  # "f16", "bf16", "f32", "i8"
    out_kind: str  # "f16", "bf16", "f32"


DEFS: dict[str, KernelDef] = {
    "gemv_fp32_ref": KernelDef("gemv_reference.cu", "gemv_fp32", 0, 1, "f32", "f32"),
    "gemv_w4_ref": KernelDef("gemv_reference.cu", "gemv_w4", 0, 8, "f32", "f32"),
    "fp32_gemv": KernelDef("gemv_f16.cu", "gemv_f32", 4, 4, "f32", "f32"),
    "fp16_gemv": KernelDef("gemv_f16.cu", "gemv_f16", 8, 8, "f16", "f16"),
    "bf16_gemv": KernelDef("gemv_f16.cu", "gemv_bf16", 8, 8, "bf16", "bf16"),
    "w8a16_gemv": KernelDef("gemv_w8a16.cu", "gemv_w8a16", 16, 16, "f16", "f16"),
    "w4a16_gemv": KernelDef("gemv_w4a16.cu", "gemv_w4a16", 32, 32, "f16", "f16"),
    "w8a8_gemv": KernelDef("gemv_w8a8.cu", "gemv_w8a8", 16, 16, "i8", "f16"),
    "fp8_gemv": KernelDef("gemv_fp8.cu", "gemv_fp8", 16, 16, "f16", "f16"),
}

_GEOM = "persistent grid, block of W warps splitting K per tile of RW rows, 16-byte loads, x in registers or L1"
SPECS: tuple[KernelSpec, ...] = (
    KernelSpec("gemv_fp32_ref", "fp32", "nvrtc", "reference", _RUN, source="gemv_reference.cu", entry="gemv_fp32",
               geometry="the chapter's kernel: warp per row, 4 warps per block, lanes stride K with 4-byte loads",
               notes="the chapter's gemv_fp32, untuned (the 'before')"),
    KernelSpec("gemv_w4_ref", "w4a16", "nvrtc", "reference", _RUN, source="gemv_reference.cu", entry="gemv_w4",
               geometry="the chapter's kernel: warp per row, 4 warps per block, one 32-bit word per lane per step",
               notes="the chapter's naive gemv_w4: fp32 activations, fp32 scales and zeros, shift-and-mask dequant, "
               "reference packing (8 codes per word, low nibble first); G=128"),
    KernelSpec("fp32_gemv", "fp32", "nvrtc", "optimized", _RUN, source="gemv_f16.cu", entry="gemv_f32",
               geometry=_GEOM, notes="K % 4 == 0"),
    KernelSpec("fp16_gemv", "fp16", "nvrtc", "optimized", _RUN, source="gemv_f16.cu", entry="gemv_f16",
               geometry=_GEOM, notes="fp32 accumulation; K % 8 == 0"),
    KernelSpec("bf16_gemv", "bf16", "nvrtc", "optimized", _RUN, source="gemv_f16.cu", entry="gemv_bf16",
               geometry=_GEOM, notes="fp32 accumulation; K % 8 == 0"),
    KernelSpec("w8a16_gemv", "w8a16", "nvrtc", "optimized", _RUN, source="gemv_w8a16.cu", entry="gemv_w8a16",
               geometry=_GEOM, notes="16 int8 per 16-byte load, magic-number int8->fp32, fp16 row scale applied "
               "once per output; fp32 accumulation; K % 16 == 0"),
    KernelSpec("w4a16_gemv", "w4a16", "nvrtc", "optimized", _RUN, source="gemv_w4a16.cu", entry="gemv_w4a16",
               geometry=_GEOM, notes="G=128; 0x6400 magic + lop3, offline nibble reorder (kernels/quant/pack_w4.py), "
               "scale+zero packed in one word per group; half2 products summed per 32-weight chunk, fp32 across "
               "chunks; zero point stored as 8 bits in the layout (4 counted by models.schemes)"),
    KernelSpec("w8a8_gemv", "w8a8", "nvrtc", "optimized", _RUN, source="gemv_w8a8.cu", entry="gemv_w8a8",
               geometry=_GEOM, notes="dp4a int8 x int8 -> int32; fp16 per-row and fp32 per-token scales; K % 16 == 0"),
    KernelSpec("fp8_gemv", "fp8", "nvrtc", "optimized", _RUN, source="gemv_fp8.cu", entry="gemv_fp8",
               geometry=_GEOM, notes="weight-only: e4m3 weights (per-channel fp32 scale) -> fp16 by the hardware "
               "cvt (sm_89 on; cuda_fp8.h converts in software below), fp16 activations (models.schemes counts "
               "e4m3 activations: M*K bytes fewer); K % 16 == 0"),
)


@dataclass(frozen=True)
class Config:
    mb: int
    rw: int = 1
    u: int = 4
    xreg: bool = False
    warps: int = 4
    blocks_per_sm: int = 0  # 0: as many as fit (occupancy from the compiled kernel's registers)
    prefetch: bool = False  # x through L1: load the next step's weights before computing this one
    persistent: bool = True  # grid = resident blocks (each walks tiles grid-stride); False: one block per tile
    group: int = 0  # w4 group size compiled in as W4_GROUP (the chapter's kernel and the ladder rungs); 0: none

    def options(self) -> tuple[str, ...]:
        opts = (f"-DGEMV_MB={self.mb}", f"-DGEMV_RW={self.rw}", f"-DGEMV_U={self.u}", f"-DGEMV_XREG={int(self.xreg)}")
        opts += ("-DGEMV_PREFETCH=1",) if self.prefetch and not self.xreg else ()
        return opts + ((f"-DW4_GROUP={self.group}",) if self.group else ())


def mb_for(M: int) -> int:
    for mb in MB_BINS:
        if M <= mb:
            return mb
    raise InputError(f"GEMV kernels take M in [1, {MB_BINS[-1]}], got M={M}")


def choose_config(name: str, M: int, N: int, K: int, group_size: int = W4_GROUP, **override: Any) -> Config:
    """Default geometry: x in registers when it fits in ~64 registers and one pass covers K, else 4 warps x U."""
    d = DEFS[name]
    mb = mb_for(M)
    if d.elems == 0:
        return Config(mb=mb, rw=1, u=1, xreg=False, warps=4, group=group_size if name == "gemv_w4_ref" else 0)
    chunks = K // d.elems
    cfg = _default_config(name, d, mb, chunks)
    cfg = replace(cfg, **override)
    if cfg.xreg and cfg.warps * 32 * cfg.u < chunks:
        cfg = replace(cfg, warps=-(-chunks // (32 * cfg.u)))
    if cfg.warps > 32:
        raise InputError(f"{name}: config {cfg} needs more than 32 warps per block for K={K}")
    return cfg


def _x_regs_per_chunk(d: KernelDef) -> int:
    """32-bit registers holding x for one chunk and one row (w4a16 keeps half2, w8a8 packed int8, others fp32)."""
    if d.x_kind == "i8":
        return d.elems // 4
    return 16 if d.elems == 32 else d.elems


def _default_config(name: str, d: KernelDef, mb: int, chunks: int) -> Config:
    """Defaults from the variant sweep on the H200 (bench/bench_gemv.py, docs/kernels-gemv.md).

    M <= 2: the 16-bit and 8-bit-integer kernels keep x in registers when one pass over K fits in <= 8 warps with
    2 chunks per thread; otherwise, and for w4a16/fp8, 4 warps stream K with x read through L1, 4 rows per tile
    (fp16/bf16 with 2 chunks per thread in flight).
    M >= 3: x through L1, 4 rows per tile (x reused 4 times per load), 2 chunks per thread for 16-bit weights;
    w4a16 at MB = 4 and 8: 8 rows per tile (x reused 8 times; H200, 2026-12-03, M = 4: 38.3 vs 44.8 us on 22016x4096,
    18.6 vs 22.3 on 4096x11008, 9.3 vs 11.2 on 4096x4096, 77.2 vs 95.5 on 28672x8192; M = 8: 63.2 vs 73.7 and 31.0
    vs 36.9 on the first two).
    """
    wide = d.elems <= 8  # fp32 / fp16 / bf16 weights
    if mb <= 2 and name not in ("w4a16_gemv", "fp8_gemv"):
        warps = -(-chunks // 64)
        if warps <= 8 and _x_regs_per_chunk(d) * mb * 2 <= 64:
            return Config(mb=mb, rw=2 if wide else 4, u=2, xreg=True, warps=max(warps, 1))
    if mb <= 2:
        # fp16/bf16 keep two chunks per row in flight (4096x11008, M = 1: bf16 22.10 vs 23.55 us, fp16 22.08 vs 22.02)
        u = 2 if name in ("fp16_gemv", "bf16_gemv") else 1 if name in ("w4a16_gemv", "fp8_gemv") or wide else 2
        return Config(mb=mb, rw=4, u=u, xreg=False, warps=4)
    return Config(mb=mb, rw=8 if name == "w4a16_gemv" and mb in (4, 8) else 4, u=2 if wide else 1, xreg=False,
                  warps=4)


def check_shape(spec: KernelSpec, M: int, N: int, K: int, group_size: int = W4_GROUP) -> None:
    """Refuse, before anything is allocated or launched, a shape this kernel cannot run."""
    check_batch(spec, M)
    d = DEFS[spec.name]
    if N < 1 or K < 1:
        raise InputError(f"{spec.name}: N and K must be >= 1, got N={N}, K={K}")
    if K % d.k_multiple:
        raise InputError(f"{spec.name}: K must be a multiple of {d.k_multiple} (16-byte weight loads), got K={K}")
    if spec.scheme == "w4a16":
        quant.check_w4_shape(N, K, group_size)
        if spec.name == "w4a16_gemv" and (group_size % 32 or group_size & (group_size - 1)):
            raise InputError(f"{spec.name}: the group size must be a power of two >= 32, got G={group_size}")
    if N * K >= 2**31 * max(d.elems, 1):
        raise InputError(f"{spec.name}: N*K={N * K} is too large for 32-bit chunk indexing")


# ---------------------------------------------------------------- device arrays in each kernel's layout


def _cupy() -> Any:
    import cupy

    return cupy


def prepare_x(name: str, x: Any) -> tuple[Any, ...]:
    """Activations (float M x K, or for w8a8 also a (codes, scales) pair) as the kernel reads them, on the device."""
    cp = _cupy()
    kind = DEFS[name].x_kind
    if kind == "i8":
        if isinstance(x, tuple):
            codes, scales = x
        else:
            codes, scales = quant.quantize_act_int8(cp.asarray(x), xp=cp)
        codes = cp.ascontiguousarray(cp.asarray(codes, dtype=cp.int8))
        return codes, cp.ascontiguousarray(cp.asarray(scales, cp.float32))
    xd = cp.asarray(x)
    if kind == "bf16":
        return (cp.ascontiguousarray(xd if xd.dtype == cp.uint16 else quant.to_bf16_bits(xd, cp)),)
    return (cp.ascontiguousarray(xd.astype(cp.float16 if kind == "f16" else cp.float32)),)


def prepare_weights(name: str, w: Any) -> tuple[Any, ...]:
    """Weights in the kernel's layout, on the device, from canonical quantized weights (or float arrays)."""
    cp = _cupy()
    if name == "gemv_w4_ref":
        q = _expect(w, quant.W4, name)
        return (quant.pack_w4_reference(cp.asarray(q.codes), cp), cp.asarray(q.scales).astype(cp.float32),
                cp.asarray(q.zeros).astype(cp.float32))
    if name == "w4a16_gemv":
        q = _expect(w, quant.W4, name)
        qd = quant.W4(cp.asarray(q.codes), cp.asarray(q.scales), cp.asarray(q.zeros), q.group_size)
        return pack_w4.pack_w4a16(qd, cp)
    if name in ("w8a16_gemv", "w8a8_gemv"):
        q = _expect(w, quant.W8, name)
        return cp.ascontiguousarray(cp.asarray(q.codes, cp.int8)), cp.asarray(q.scales, cp.float16)
    if name == "fp8_gemv":
        q = _expect(w, quant.FP8, name)
        return cp.ascontiguousarray(cp.asarray(q.codes, cp.uint8)), cp.asarray(q.scales, cp.float32)
    wd = cp.asarray(w)
    if name == "bf16_gemv":
        return (cp.ascontiguousarray(wd if wd.dtype == cp.uint16 else quant.to_bf16_bits(wd, cp)),)
    dt = cp.float16 if name == "fp16_gemv" else cp.float32
    return (cp.ascontiguousarray(wd if wd.dtype == dt else wd.astype(dt)),)


def _expect(w: Any, cls: type, name: str) -> Any:
    if not isinstance(w, cls):
        raise InputError(f"{name} takes weights as kernels.quant.quant.{cls.__name__}, got {type(w).__name__}")
    return w


def _group_size(weights: Any) -> int:
    return weights.group_size if isinstance(weights, quant.W4) else W4_GROUP


def _out_array(name: str, M: int, N: int) -> Any:
    cp = _cupy()
    dt = {"f16": cp.float16, "bf16": cp.uint16, "f32": cp.float32}[DEFS[name].out_kind]
    return cp.empty((M, N), dtype=dt)


def poison_output(out: Any) -> None:
    """Fill an output with NaN bit patterns (fp16/bf16 0xFFFF, fp32 quiet NaN) so unwritten elements show."""
    cp = _cupy()
    if out.dtype.itemsize == 2:
        out.view(cp.uint16).fill(0xFFFF)
    else:
        out.view(cp.uint32).fill(0x7FC00000)


def out_to_float64(name: str, out: Any) -> Any:
    cp = _cupy()
    if DEFS[name].out_kind == "bf16":
        return quant.from_bf16_bits(out, cp).astype(cp.float64)
    return out.astype(cp.float64)


# ---------------------------------------------------------------- compiling and launching


def kernel_function(name: str, cfg: Config) -> Any:
    d = DEFS[name]
    return build.function(d.source, d.entry, cfg.options())


def grid_for(func: Any, cfg: Config, ntiles: int) -> int:
    if not cfg.persistent:  # the hardware's block scheduler balances the tiles: no static tail
        return ntiles
    fit = resident_blocks(func, cfg.warps * 32)
    if cfg.blocks_per_sm:
        fit = min(fit, cfg.blocks_per_sm)
    return max(1, min(ntiles, fit * device_sms()))


def make_launch(name: str, cfg: Config, M: int, N: int, K: int, xs: tuple[Any, ...], ws: tuple[Any, ...],
                out: Any, group_size: int = W4_GROUP) -> Launch:
    """Bind arrays and geometry into a launch that enqueues one kernel on the current stream (no allocation)."""
    check_aligned(name, xs + ws)
    d = DEFS[name]
    func = kernel_function(name, cfg)
    if cfg.warps * 32 > int(func.max_threads_per_block):  # too many registers for this block: use the L1 variant
        cfg = replace(cfg, rw=2, u=2, xreg=False, warps=4)
        func = kernel_function(name, cfg)
    i32 = np.int32
    if d.elems == 0:  # the chapter's kernels: warp per row, x staged in shared memory in K-tiles
        grid, block = -(-N // cfg.warps), cfg.warps * 32
        kt = x_tile(K, cfg.mb, 4)
        smem = x_smem_bytes(kt, cfg.mb, 4)
        if name == "gemv_w4_ref" and M == 1 and kt == K:  # the chapter's program itself, as nvcc compiles it
            func = build.function(d.source, "gemv_w4_m1", cfg.options())
            allow_smem(func, smem)
            return Launch(func, grid, block, (ws[0], ws[1], ws[2], xs[0], out, i32(N), i32(K)), smem)
        allow_smem(func, smem)
        if name == "gemv_fp32_ref":
            args = (ws[0], xs[0], out, i32(M), i32(N), i32(K), i32(kt))
        else:
            args = (ws[0], ws[1], ws[2], xs[0], out, i32(M), i32(N), i32(K), i32(kt))
        return Launch(func, grid, block, args, smem)
    grid, block = grid_for(func, cfg, -(-N // cfg.rw)), cfg.warps * 32
    dims = (i32(M), i32(N), i32(K))
    if name in ("fp32_gemv", "fp16_gemv", "bf16_gemv"):
        args = (ws[0], xs[0], out) + dims
    elif name == "w8a16_gemv":
        args = (ws[0], ws[1], xs[0], out) + dims
    elif name == "w4a16_gemv":
        args = (ws[0], ws[1], xs[0], out) + dims + (i32((group_size // 32).bit_length() - 1),)
    elif name == "w8a8_gemv":
        args = (ws[0], ws[1], xs[0], xs[1], out) + dims
    else:  # fp8_gemv
        args = (ws[0], ws[1], xs[0], out) + dims + (i32(1 if ws[1].size > 1 else 0),)
    return Launch(func, grid, block, args)


def launch(name: str, x: Any, weights: Any, config: Config | None = None, **override: Any) -> Any:
    """Run kernel `name` once on x (M x K; NumPy or CuPy) and canonical weights; returns y (M x N) as float64,
    in the array module of x. Shapes are checked (InputError) before anything is launched."""
    if name not in DEFS:
        raise InputError(f"{name} is not a GEMV kernel of kernels.gemv.gemv; valid: {', '.join(DEFS)}")
    spec = next(s for s in SPECS if s.name == name)
    xs_shape = (x[0] if isinstance(x, tuple) else x).shape
    if len(xs_shape) != 2:
        raise InputError(f"{name}: x must be M x K, got shape {tuple(xs_shape)}")
    M, K = int(xs_shape[0]), int(xs_shape[1])
    wshape = weights.codes.shape if hasattr(weights, "codes") else np.shape(weights)
    N = int(wshape[0])
    if len(wshape) != 2 or int(wshape[1]) != K:
        raise InputError(f"{name}: weights must be N x K with K={K} (from x), got shape {tuple(wshape)}")
    G = _group_size(weights)
    check_shape(spec, M, N, K, G)
    cfg = config or choose_config(name, M, N, K, G, **override)
    xs, ws = prepare_x(name, x), prepare_weights(name, weights)
    cp = _cupy()
    out = _out_array(name, M, N)
    poison_output(out)
    make_launch(name, cfg, M, N, K, xs, ws, out, G)()
    y = out_to_float64(name, out)
    return y if type(x if not isinstance(x, tuple) else x[0]).__module__.startswith("cupy") else cp.asnumpy(y)


# ---------------------------------------------------------------- the profiler's Runner


def params(name: str, group_size: int = W4_GROUP) -> problems.Params:
    """The problem kernel `name` reads (kernels.problems): its weight and activation types, the group size."""
    d = DEFS[name]
    scheme = next(s.scheme for s in SPECS if s.name == name)
    weight = {"w4a16": "w4", "w8a16": "w8", "w8a8": "w8", "fp8": "e4m3"}.get(scheme, d.x_kind)
    return problems.Params(scheme, weight, d.x_kind, group_size=group_size if weight == "w4" else 0)


class GemvRunner(BoundLaunchRunner):
    def __init__(self, spec: KernelSpec, config: dict[str, Any] | None = None, group_size: int | None = None) -> None:
        self.spec = spec
        self.config = dict(config or {})
        self.group_size = group_size or W4_GROUP if spec.scheme == "w4a16" else 0
        self._packed = problems.PackedCache(spec.name)

    def check(self, M: int, N: int, K: int) -> None:
        check_shape(self.spec, M, N, K, self.group_size or W4_GROUP)

    def compile_jobs(self, M: int, N: int, K: int) -> list[build.Job]:
        d = DEFS[self.spec.name]
        cfg = choose_config(self.spec.name, M, N, K, self.group_size or W4_GROUP, **self.config)
        return [(d.source, d.entry, build.device_arch(), cfg.options())]

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        self.check(M, N, K)
        name = self.spec.name
        inputs, xs, ws = self._packed.make(params(name, self.group_size or W4_GROUP), M, N, K, seed=seed,
                                           reference=reference, pack=lambda w: prepare_weights(name, w))
        out = _out_array(name, M, N)
        cfg = choose_config(name, M, N, K, self.group_size or W4_GROUP, **self.config)
        return bound_problem(inputs, xs, ws, out,
                             make_launch(name, cfg, M, N, K, xs, ws, out, self.group_size or W4_GROUP))

    def output(self, problem: Problem) -> Any:  # the fp32 / bf16-bits outputs too
        return _cupy().asnumpy(out_to_float64(self.spec.name, problem.out))


def make_runner(spec: KernelSpec, group_size: int | None = None) -> GemvRunner:
    return GemvRunner(spec, group_size=group_size)


# What the kernel-aware model needs (models.kernel_terms): CUDA-core products per batch row, M padded to MB_BINS,
# the conversion each kernel runs per weight.
_DEQUANT = {"gemv_w4_ref": "w4", "w4a16_gemv": "w4", "w8a16_gemv": "w8", "fp8_gemv": "e4m3"}
# Every CUDA-core GEMV runs from compute_75 PTX (tests/test_ptx_gpu.py): min_cc 75.
SPECS = tuple(replace(s, min_cc=75, facts=KernelFacts("gemv", "cuda_core", _DEQUANT.get(s.name, "none"),
                                           m_tiles_from(mb_for, range(1, MB_BINS[-1] + 1)), cuda_core_rows=True))
              for s in SPECS)
