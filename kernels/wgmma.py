"""wgmma GEMM kernels (Hopper only, sm_90a): registry entries and their runner.

Kernels (kernels/wg_gemm.cu), y[M, N] = x[M, K] . W[N, K]^T with the weights as wgmma's A operand (64 channels per
warpgroup) and the batch as its N (16..256 per instruction):
- wg_bf16 / wg_fp16: 16-bit weights and activations (HGMMA), fp32 accumulation, output in the input's type.
- wg_w8a8: int8 x int8 (IGMMA), int32 accumulation, per-channel x per-token fp32 rescale, fp16 out.
- wg_fp8: e4m3 x e4m3 on the native FP8 tensor cores (QGMMA), fp32 accumulation, same scales, fp16 out.
The inputs, their quantization and the float64 references are those of the mma.sync kernels of the same scheme
(kernels.tensorcore), so the two families are compared on identical data. The sm_90a target runs on compute
capability 9.0 only (H100, H200, GH200), hence min_cc = max_cc = 90.

The tile per batch tile BM (16..256, the smallest holding M; M > 256 is not accepted) is `WG_TILES[bm]`:
WG warpgroups (64 * WG channels per CTA), STAGES-deep cp.async pipeline, KT bytes of K per stage.
CuPy is imported inside functions only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernels.registry import KernelSpec, check_batch
from kernels.tensorcore import _LAYOUT, TensorCoreRunner, TileConfig
from models.errors import InputError

_GEOMETRY = ("wgmma m64nBMk16/k32 with the weights as A: 64*WG channels x BM batch rows per CTA (BM = 16..256, the "
             "smallest holding M), WG warpgroups, STAGES-deep cp.async pipeline of KT-byte k-tiles in the 128-byte "
             "swizzle layout, one wgmma group in flight; persistent stream-K grid over (n-tile, k-tile), split "
             "tiles summed in a 32-bit workspace by the last CTA (kernels.wgmma.WG_TILES)")


def _spec(name: str, scheme: str, op: str, notes: str) -> KernelSpec:
    return KernelSpec(name=name, scheme=scheme, backend="nvrtc", role="optimized",
                      runner="kernels.wgmma:make_runner", m_min=1, m_max=256, prefer_from=16, min_cc=90, max_cc=90,
                      source="wg_gemm.cu", entry=op, geometry=_GEOMETRY, notes=notes)


SPECS: tuple[KernelSpec, ...] = (
    _spec("wg_bf16", "bf16", "OpBF16", "wgmma (HGMMA) bf16 -> fp32, sm_90a; W row-major as given; bf16 output"),
    _spec("wg_fp16", "fp16", "OpFP16", "wgmma (HGMMA) f16 -> fp32, sm_90a; W row-major as given; fp16 output"),
    _spec("wg_w8a8", "w8a8", "OpW8A8", "wgmma (IGMMA) s8 -> s32, sm_90a; fp32 per-channel x per-token rescale in "
          "the epilogue; fp16 output; activation quantization not timed"),
    _spec("wg_fp8", "fp8", "OpFP8", "native FP8: wgmma (QGMMA) e4m3 x e4m3 -> fp32, sm_90a; per-channel x "
          "per-token fp32 scales; fp16 output; activation quantization not timed"),
)


@dataclass(frozen=True)
class WgTile:
    warpgroups: int
    stages: int
    kt: int  # bytes of K per stage


# Batch tile -> its tile. Shared memory per CTA: stages * (64 * warpgroups + bm) * kt + 1024 bytes (<= 227 KB).
WG_TILES: dict[int, WgTile] = {
    16: WgTile(2, 6, 256), 32: WgTile(2, 5, 256), 64: WgTile(2, 4, 256), 128: WgTile(2, 6, 128),
    256: WgTile(2, 4, 128),
}
SMEM_LIMIT = 227 * 1024


def batch_tile(M: int) -> int:
    return next(b for b in sorted(WG_TILES) if M <= b) if M <= max(WG_TILES) else max(WG_TILES)


def tile_config(M: int, tile: WgTile | None = None) -> TileConfig:
    """The launch shape for batch M (pure arithmetic); `tile` overrides WG_TILES (benchmarks)."""
    bm = batch_tile(M)
    t = tile or WG_TILES[bm]
    bn = 64 * t.warpgroups
    smem = t.stages * (bn + bm) * t.kt + 1024  # + slack to align the stages to 1 KB (the swizzle's period)
    if t.stages < 3 or t.kt % 128 or smem > SMEM_LIMIT:
        raise InputError(f"wgmma tile {t} at BM={bm} needs >= 3 stages, a k-tile of whole 128-byte rows and <= "
                         f"{SMEM_LIMIT} bytes of shared memory (it asks {smem})")
    return TileConfig(bm, t.stages, -(-M // bm), smem, 128 * t.warpgroups, t.kt, "wg", bn)


class WgmmaRunner(TensorCoreRunner):
    """Runner for one wgmma kernel; `tile` forces one WgTile at every M (benchmarks), None follows WG_TILES."""

    def __init__(self, spec: KernelSpec, per_sm: int | None = None, tile: WgTile | None = None,
                 options: tuple[str, ...] = ()):
        super().__init__(spec, per_sm, None)
        self.tile = tile
        self.options = options

    def config(self, M: int, K: int) -> TileConfig:
        return tile_config(M, self.tile)

    def check(self, M: int, N: int, K: int) -> None:
        check_batch(self.spec, M)
        cfg = tile_config(M, self.tile)
        elem = _LAYOUT[self.spec.scheme][0]
        if N <= 0 or K <= 0 or N % cfg.bn or (K * elem) % cfg.kt:
            raise InputError(f"kernel {self.spec.name} needs N a multiple of {cfg.bn} and K a multiple of "
                             f"{cfg.kt // elem}, got N={N}, K={K}")

    def _kernel(self, cfg: TileConfig) -> Any:
        from kernels import build

        key = (cfg.bm, cfg.threads // 128, cfg.stages, cfg.kt)
        if key not in self._kernels:
            expr = f"wg_gemm<wg::{self.spec.entry}, {cfg.bm}, {key[1]}, {cfg.stages}, {cfg.kt}>"
            fn = build.arch_function(self.spec.source, expr, "sm_90a", self.options)
            fn.max_dynamic_shared_size_bytes = cfg.smem_bytes
            self._kernels[key] = fn
        return self._kernels[key]


def make_runner(spec: KernelSpec, per_sm: int | None = None, tile: WgTile | None = None,
                options: tuple[str, ...] = ()) -> WgmmaRunner:
    return WgmmaRunner(spec, per_sm, tile, options)
