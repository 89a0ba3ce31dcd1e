"""FP8 block-scaled wgmma GEMM (kernels/wgmma/wg_gemm_fp8_block.cu, sm_90a): registry entry and runner.

DeepSeek-V3 / DeepGEMM scaling: e4m3 weights with one fp32 scale per 128 x 128 block, e4m3 activations with one per
1 x 128 group of a token's K; after each 128-deep K block the QGMMA partial sums are multiplied by the two scales and
added to fp32 accumulators (the .cu's header counts the instructions this costs). The weights and activations are
quantized on the device by kernels.problems.quantize_fp8(..., "block") (bit for bit kernels.quant.quant's, the weights
once per shape in kernels.problems.INPUTS) and checked against the float64 product of the dequantized operands, like
the per-channel wg_fp8 kernel, beside which it is meant to be timed.

Scale granularity this kernel declares: weights "block" (128 x 128), activations "block" (1 x 128 per token), the
models.schemes fp8 granularity of the same name. M = 1..256; M > 128 runs as 128-row m-tiles (the promoted
accumulators and the partials share the register file). CuPy is imported inside functions only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from kernels.registry import KernelSpec, Problem, check_batch
from kernels.tensorcore.tensorcore import TensorCoreRunner, TileConfig
from kernels.wgmma.wgmma import SMEM_LIMIT, WgTile
from models.errors import InputError
from models.kernel_terms import STREAM_K_CTAS, KernelFacts, m_tiles_from
from models.schemes import FP8_BLOCK

# weights 128 x 128, activations 1 x 128: models.schemes.get_scheme("fp8", granularity="block")
SCALE_GRANULARITY = "block"

SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(name="wg_fp8_block", scheme="fp8", backend="nvrtc", role="optimized",
               runner="kernels.wgmma.wg_fp8_block:make_runner", m_min=1, m_max=256, prefer_from=None, min_cc=90,
               max_cc=90,
               source="wg_gemm_fp8_block.cu", entry="wg_gemm_fp8_block",
               geometry="wgmma m64nBMk32 e4m3 with the weights as A: 64*WG channels x BM batch rows per CTA (BM = "
               "16..128, M > 128 in 128-row m-tiles), STAGES-deep cp.async pipeline of KT-byte k-tiles, a fresh QGMMA "
               "partial per 128-deep K block promoted into fp32 by the block's scales; persistent stream-K grid, split "
               "tiles summed through per-CTA slots (kernels.wgmma.wg_fp8_block.TILES)",
               notes="native FP8 (QGMMA) with 128x128 block scales on W and 1x128 per-token group scales on x "
               "(DeepSeek-V3 / DeepGEMM), fp32 promotion per K block (wgmma.wait_group 0, 1 + BM/8 scale loads, BM/4 "
               "FMUL, BM/2 FFMA per thread and K block); fp16 output; activation quantization not timed"),
)

# Batch tile -> WgTile (cp.async form only): WG warpgroups, STAGES, KT bytes of K per stage (KT/128 K blocks).
TILES: dict[int, WgTile] = {16: WgTile(2, 6, 256), 32: WgTile(2, 5, 256), 64: WgTile(2, 4, 256),
                            128: WgTile(2, 5, 128)}


def tile_config(M: int, tile: WgTile | None = None) -> TileConfig:
    """The launch shape for batch M (pure arithmetic); `tile` overrides TILES."""
    bm = next((b for b in sorted(TILES) if M <= b), max(TILES))
    t = tile or TILES[bm]
    bn = 64 * t.warpgroups
    smem = t.stages * (bn + bm) * t.kt + 1024
    if t.tma or t.mb != 1 or t.stages < 3 or t.kt % 128 or smem > SMEM_LIMIT or bn > 256:
        raise InputError(f"fp8 block tile {t} at BM={bm} needs the cp.async form WGxSTAGESxKT with >= 3 stages, KT "
                         f"a multiple of 128, at most 4 warpgroups and <= {SMEM_LIMIT} bytes of shared memory (it "
                         f"asks {smem})")
    return TileConfig(bm, t.stages, -(-M // bm), smem, 128 * t.warpgroups, t.kt, "wg-fp8-block", bn)


def block_scaled_operands(x: Any, w: Any, xp: Any) -> tuple[Any, Any, Any, Any, Any]:
    """(x codes, W codes, sx [K/128][m_pad], sw [N/128][K/128], float64 reference of the dequantized operands' product)
    for float x (M x K) and w (N x K): the quantization the kernel is checked against."""
    from kernels import reference
    from kernels.quant import quant

    qx = quant.quantize_fp8(x, "block", xp, block=(1, FP8_BLOCK))
    qw = quant.quantize_fp8(w, "block", xp, block=(FP8_BLOCK, FP8_BLOCK))
    ref = reference.matmul_t(quant.dequantize_fp8(qx, xp), quant.dequantize_fp8(qw, xp), xp)
    return qx.codes, qw.codes, qx.scales, qw.scales, ref


class FP8BlockRunner(TensorCoreRunner):
    """Runner (kernels.registry protocol) for wg_fp8_block; `tile` forces one WgTile at every M (benchmarks)."""

    def __init__(self, spec: KernelSpec, per_sm: int | None = None, tile: WgTile | None = None):
        super().__init__(spec, per_sm, None)
        self.tile = tile
        self._checked: tuple[Any, ...] = ()  # (shape, arrays) of the last set made with a reference: the L2-cold
        # rotation sets that follow are device copies of it (no redraw, requantization or reference)

    def config(self, M: int, N: int, K: int) -> TileConfig:
        return tile_config(M, self.tile)

    def check(self, M: int, N: int, K: int) -> None:
        check_batch(self.spec, M)
        cfg = tile_config(M, self.tile)
        if N <= 0 or K <= 0 or N % max(cfg.bn, FP8_BLOCK) or K % cfg.kt:
            raise InputError(f"kernel {self.spec.name} needs N a multiple of {max(cfg.bn, FP8_BLOCK)} and K a "
                             f"multiple of {cfg.kt}, got N={N}, K={K}")

    def _kernel(self, cfg: TileConfig) -> Any:
        from kernels.toolchain import build

        expr = self._expression(cfg)
        if expr not in self._kernels:
            fn = build.arch_function(self.spec.source, expr, "sm_90a")
            fn.max_dynamic_shared_size_bytes = cfg.smem_bytes
            self._kernels[expr] = fn
        return self._kernels[expr]

    def compile_jobs(self, M: int, N: int, K: int) -> list[tuple[str, str, str, tuple[str, ...]]]:
        """(source, name expression, arch, options) of the instance batch M runs (compiled ahead of timing)."""
        cfg = self.config(M, N, K)
        return [(self.spec.source, self._expression(cfg), "sm_90a", ())]

    def _expression(self, cfg: TileConfig) -> str:
        return f"wg_gemm_fp8_block<{cfg.bm}, {cfg.threads // 128}, {cfg.stages}, {cfg.kt}>"

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy

        from kernels import problems

        self.check(M, N, K)
        cfg = self.config(M, N, K)
        fn = self._kernel(cfg)
        m_pad = cfg.m_tiles * cfg.bm
        ref, qerr = None, float("nan")
        if not reference and self._checked and self._checked[0] == (M, N, K, m_pad):  # a rotation set: copies
            arrays: dict[str, Any] = {k: a.copy() for k, a in self._checked[1].items()}
        else:
            qw = problems.input_cache().get(self._weights_key(N, K, seed), lambda: problems.quantize_fp8(
                _float_weights(N, K, seed), "block", (FP8_BLOCK, FP8_BLOCK)))  # once per shape, every M reads it
            x = problems.random_normal((M, K), 2 * seed, 1.0)
            qx = problems.quantize_fp8(x, "block", (1, FP8_BLOCK))
            sx_t = cupy.ones((K // FP8_BLOCK, m_pad), dtype=cupy.float32)  # K-block major; padded rows never stored
            sx_t[:, :M] = qx.scales.T
            arrays = {"x": qx.codes, "w": qw.codes, "sa": sx_t, "sb": qw.scales}
            if reference:
                ref = problems.dequantize(qx) @ problems.dequantize(qw).T
                exact = problems.to_float64(x) @ problems.to_float64(_float_weights(N, K, seed)).T
                norm = float(cupy.linalg.norm(exact))  # as make_inputs (0: a warm-up's stand-in kernels)
                qerr = float(cupy.linalg.norm(ref - exact)) / norm if norm else float("nan")
                self._checked = ((M, N, K, m_pad), dict(arrays))
        nbytes = sum(int(a.nbytes) for a in arrays.values())
        tiles_n, ktiles = N // cfg.bn, K // cfg.kt
        arrays["counters"] = cupy.zeros(cfg.m_tiles * tiles_n, dtype=cupy.int32)
        ctas = self._grid(fn, cfg, tiles_n, ktiles)
        arrays["ws"] = cupy.empty(cfg.m_tiles * ctas * 2 * cfg.bm * cfg.bn, dtype=cupy.uint32)
        out = cupy.empty((M, N), dtype=cupy.float16)
        problem = Problem(M, N, K, arrays, out, nbytes, ref, qerr,  # ref: float64, on the device
                          bytes=nbytes + int(out.nbytes))  # what one launch reads and writes
        problem.tc_launch = ((ctas, cfg.m_tiles), (cfg.threads,), cfg.smem_bytes)
        problem.tc_config = cfg
        problem.m_pad = m_pad
        return problem

    def _weights_key(self, N: int, K: int, seed: int) -> Any:
        import cupy

        from kernels.input_cache import InputKey

        return InputKey(self.spec.name, ("e4m3", "block", FP8_BLOCK), N, K, seed, 0, int(cupy.cuda.Device().id))

    def launch(self, problem: Problem) -> None:
        a = problem.arrays
        grid, block, smem = problem.tc_launch
        i32 = np.int32
        args = (a["x"], a["w"], problem.out, a["ws"], a["counters"], a["sa"], a["sb"], i32(problem.M),
                i32(problem.N), i32(problem.K), i32(problem.m_pad))
        self._kernel(problem.tc_config)(grid, block, args, shared_mem=smem)


def _float_weights(N: int, K: int, seed: int) -> Any:
    """The unquantized weights of seed `seed` (kernels.problems' counter-based draw: the same values each time)."""
    from kernels import problems

    return problems.random_normal((N, K), 2 * seed + 1, 0.05)


def make_runner(spec: KernelSpec, per_sm: int | None = None, tile: WgTile | None = None) -> FP8BlockRunner:
    return FP8BlockRunner(spec, per_sm, tile)


# What the kernel-aware model needs (models.kernel_terms): native e4m3 wgmma, the batch tile per M from TILES (M > 128
# in 128-row m-tiles), 128 channels per CTA, one rescale FMA per accumulator and 128-deep K block.
SPECS = tuple(replace(s, facts=KernelFacts(
    "wgmma", "wgmma_e4m3", "none", m_tiles_from(lambda M: next((b for b in sorted(TILES) if M <= b), max(TILES))),
    128, k_block_rescale=128, stream_k_ctas=STREAM_K_CTAS)) for s in SPECS)
