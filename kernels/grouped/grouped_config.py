"""Launch configurations of the grouped MoE kernels (kernels/grouped/grouped.py): CUDA-core `Config`, tensor-core
`TcConfig` (GEMV-class, mma.sync) and wgmma `WgConfig`, each chosen from (B, N, K, E, top-k) alone under uniform
routing, so one launch (and one CUDA graph) serves every routing; and the bytes of one expert's weights as the kernels
store them. Pure Python: no GPU needed."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kernels.grouped.grouped_data import G
from kernels.toolchain import build
from models.errors import InputError
from models.moe import expert_load

# .cu files the grouped sources include (the build cache hashes the source and the .cuh headers only)
INCLUDED = {"grouped_gemv.cu": ("gemv_f16.cu", "gemv_w4a16.cu"), "grouped_tc.cu": ("gemv_f16_tc.cu",),
            "grouped_w4_tc.cu": ("gemv_w4a16_tc.cu",), "grouped_q8_tc.cu": ("gemv_q8_tc.cu",)}
SCHEMES = ("bf16", "w4a16", "fp8")
MB_BINS = (1, 2, 4, 8, 16)
MAX_EXPERTS = 1024  # GROUPED_MAX_E: the touched-expert list each CTA keeps in shared memory


@dataclass(frozen=True)
class Config:
    mb: int  # rows of an expert per pass
    rw: int = 4  # weight rows per tile
    u: int = 2  # 16-byte chunks per row in flight per thread
    warps: int = 4

    def options(self) -> tuple[str, ...]:
        return (f"-DGEMV_MB={self.mb}", f"-DGEMV_RW={self.rw}", f"-DGEMV_U={self.u}", "-DGEMV_XREG=0",
                f"-DGROUPED_DEPS={_deps_hash('grouped_gemv.cu')}")


@dataclass(frozen=True)
class TcConfig:
    nt: int  # n-tiles of 8 rows of an expert per pass
    warps: int = 8  # splitting K (chunks of 64 for bf16, groups of 128 for W4A16)
    u: int = 1  # chunks / groups each warp loads before the first mma
    tiles: int = 1  # row tiles of 16 channels per item
    minb: int = 2
    scheme: str = "bf16"  # the source: grouped_tc.cu (TCF_ options), grouped_w4_tc.cu (TCG_), grouped_q8_tc.cu (TCQ_)
    # fp8: e4m3 fragments converted to fp16 once, f16 mma; False: the e4m3 mma.sync m16n8k32 (H100, 2026-12-05:
    # 0.95-1.45x the f16 path's time on the four models' experts, docs/moe.md)
    f16: bool = True
    silu: bool = False  # bf16: SiLU·mul in the epilogue (grouped_bf16_tc_silu)

    def smem_bytes(self) -> int:
        """Static shared memory: the warps' fp32 sums of a row tile and the touched-expert list."""
        return self.warps * 16 * self.nt * 8 * 4 + 2 * MAX_EXPERTS + 16  # + the list's count, aligned

    def options(self) -> tuple[str, ...]:
        if self.scheme == "fp8":
            return ("-DQ8_S8=0", f"-DQ8_F16={int(self.f16)}", f"-DTCQ_NT={self.nt}", f"-DTCQ_WARPS={self.warps}",
                    f"-DTCQ_U={self.u}", f"-DTCQ_TILES={self.tiles}", f"-DTCQ_MINB={self.minb}",
                    f"-DGROUPED_DEPS={_deps_hash('grouped_q8_tc.cu')}")
        if self.scheme == "w4a16":
            return (f"-DTCG_NT={self.nt}", f"-DTCG_WARPS={self.warps}", f"-DTCG_U={self.u}",
                    f"-DTCG_TILES={self.tiles}", f"-DTCG_MINB={self.minb}", f"-DW4_GROUP={G}",
                    f"-DGROUPED_DEPS={_deps_hash('grouped_w4_tc.cu')}")
        return ("-DF16_BF16=1", f"-DTCF_NT={self.nt}", f"-DTCF_WARPS={self.warps}", f"-DTCF_U={self.u}",
                f"-DTCF_TILES={self.tiles}", f"-DTCF_MINB={self.minb}", f"-DGROUPED_DEPS={_deps_hash('grouped_tc.cu')}",
                *(("-DTCF_SILU=1",) if self.silu else ()))


def _deps_hash(source: str) -> str:
    h = hashlib.sha256()
    for name in INCLUDED[source]:
        h.update(build.source_path(name).read_bytes())
    return h.hexdigest()[:12]


def mean_rows(batch: int, experts: int, top_k: int) -> float:
    """Rows per touched expert under uniform routing: a host-side figure of (B, E, k) alone, so the launch (and a
    CUDA graph of it) does not depend on the routing; busier experts take more passes."""
    touched = experts * (1.0 - (1.0 - top_k / experts) ** batch)
    return batch * top_k / touched


@lru_cache(maxsize=4096)
def busiest_rows(batch: int, experts: int, top_k: int) -> float:
    """Expected rows of the busiest expert under uniform routing (models.moe): a figure of (B, E, k) alone."""
    return float(expert_load([batch], experts, top_k).busiest[0])


TC_NT_MAX = 12  # up to 96 rows of an expert per pass
STATIC_SMEM = 48 * 1024  # static __shared__ limit of a kernel


def choose_tc_config(batch: int, N: int, K: int, experts: int, top_k: int, scheme: str = "bf16",
                     l2_bytes: int = 50 << 20, **override: Any) -> TcConfig:
    """Tensor-core kernels: one pass covers the mean rows per touched expert; where an expert's weights exceed twice
    the L2 (a second pass reads them from DRAM again), the expected busiest expert's rows. Warps split K by 64-wide
    chunks (bf16, fp8) or 128-wide groups (W4A16), halved while their sums would not fit the static shared memory.
    fp8 takes bf16's warps over the same 64-wide chunks (half the bytes each), two chunks in flight per warp where
    every warp gets four or more. H200 (bench/bench_moe.py, 2026-12-04): sized to the busiest, Mixtral's
    235 MB experts at B = 128 took 704 against 964 us; Qwen3's 6 MB experts at B = 256 329 against 268 us, DeepSeek-V3's
    59 MB 4091 against 3576 us."""
    if scheme not in SCHEMES:
        raise InputError(f"no grouped tensor-core kernel for scheme {scheme!r}; valid: {', '.join(SCHEMES)}")
    big = expert_bytes(scheme, N, K) > 2 * l2_bytes
    rows = busiest_rows(batch, experts, top_k) if big else mean_rows(batch, experts, top_k)
    nt = max(1, min(TC_NT_MAX, math.ceil(rows / 8 - 1e-6)))  # 32.0000001 rows (all experts touched) is 4 n-tiles
    if scheme == "w4a16":
        groups = K // G
        warps = 8 if groups >= 16 else 4 if groups >= 4 else 2
        cfg = TcConfig(nt=nt, warps=warps, u=2 if groups >= 2 * warps and nt <= 2 else 1,
                       minb=1 if nt > 4 else 2, scheme=scheme)
    else:
        chunks = K // 64
        warps = 16 if chunks >= 64 and nt <= 2 else 8 if chunks >= 16 else 4
        u = 2 if scheme == "fp8" and chunks >= 4 * warps and nt <= 4 else 1
        cfg = TcConfig(nt=nt, warps=warps, u=u, minb=1 if nt > 4 else 2, scheme=scheme)
    while cfg.warps > 1 and cfg.smem_bytes() > STATIC_SMEM:
        cfg = TcConfig(**{**cfg.__dict__, "warps": cfg.warps // 2})
    cfg = TcConfig(**{**cfg.__dict__, **override})
    if cfg.smem_bytes() > STATIC_SMEM:
        raise InputError(f"grouped {scheme} tensor-core config {cfg.warps} warps x {cfg.nt} n-tiles needs "
                         f"{cfg.smem_bytes()} bytes of shared memory; at most {STATIC_SMEM}")
    return cfg


def choose_config(scheme: str, batch: int, K: int, experts: int, top_k: int, **override: Any) -> Config:
    """CUDA-core kernels: rows per pass from `mean_rows`, warps and rows per tile from the row length."""
    mean = mean_rows(batch, experts, top_k)
    mb = next((b for b in MB_BINS if mean <= b + 1e-6), MB_BINS[-1])
    u = 1 if scheme == "w4a16" else 2
    chunks = K // (32 if scheme == "w4a16" else 8)  # 16-byte chunks per weight row
    warps = max(1, min(4, -(-chunks // (32 * u))))  # no idle lanes on short rows (K = 768: 3 warps of bf16, 1 of W4)
    rw = 8 if warps < 4 or (scheme == "w4a16" and mb in (4, 8)) else 4
    cfg = Config(mb=mb, rw=rw, u=u, warps=warps)
    return Config(**{**cfg.__dict__, **override})


WG_SLOTS = 2048  # GWG_MAX_SLOTS: the (expert, pass) slot table each CTA keeps in shared memory
WG_SMEM = 227 * 1024 - 8 * 1024 - 1024  # dynamic shared memory beside the slot table and the stages' 1 KB alignment
WG_WIDE_ITEMS = 512  # (expert, 256-channel tile) items from which passes of 128 rows take 4 warpgroups (~4 waves)


@dataclass(frozen=True)
class WgConfig:
    """grouped_wg.cu's template: rows per pass at most (64 or 128; the wgmma width of an item is the smallest of 16,
    32, 64, 128 holding its rows), warpgroups (1, 2 or 4; 64 channels each), pipeline stages, bytes of K per stage."""

    bm_max: int
    wg: int = 2
    stages: int = 6
    kt: int = 128

    def smem_bytes(self) -> int:
        return self.stages * (64 * self.wg + self.bm_max) * self.kt + 1024

    def expression(self) -> str:
        return f"grouped_wg_bf16<{self.bm_max}, {self.wg}, {self.stages}, {self.kt}>"


def choose_wg_config(batch: int, N: int, K: int, experts: int, top_k: int, **override: Any) -> WgConfig:
    """Passes of up to 64 rows where uniform routing's busiest expert has at most 64 (one pass for almost every
    expert), with 256-byte k-tiles where K allows and 4 stages fit; else passes of 128 with 128-byte k-tiles (256-byte
    ones leave 3 stages), on 256-channel tiles (4 warpgroups: x rows read from L2 half as often) where there are
    WG_WIDE_ITEMS such items or more, else 128-channel ones (2 warpgroups; 1 where N % 128 != 0); as many stages as
    the shared memory holds, up to 8. Overrides of bm_max, wg and stages set the defaults that follow from them.
    Picked on an H100 (bench/bench_moe.py's layers, B = 64-256): 256-byte k-tiles 6-10 % faster than 128-byte ones
    at passes of 64; 4 warpgroups 5 % faster on Mixtral gate+up at B = 256 (896 items), 3 % slower on its down layer
    (128 items)."""
    bm_max = override.get("bm_max", 64 if busiest_rows(batch, experts, top_k) <= 64 else 128)
    wg = 2 if N % 128 == 0 else 1
    if bm_max == 128 and N % 256 == 0 and min(experts, batch * top_k) * (N // 256) >= WG_WIDE_ITEMS:
        wg = 4
    wg = override.get("wg", wg)
    wide_k = bm_max == 64 and K % 128 == 0 and \
        (WG_SMEM - 1024) // ((64 * wg + bm_max) * 256) >= override.get("stages", 4)
    shape = {"bm_max": bm_max, "wg": wg, "kt": override.get("kt", 256 if wide_k else 128)}
    stage = (64 * shape["wg"] + shape["bm_max"]) * shape["kt"]
    cfg = WgConfig(**{**shape, "stages": min(8, (WG_SMEM - 1024) // stage), **override})
    if cfg.bm_max not in (64, 128) or cfg.wg not in (1, 2, 4) or cfg.stages < 3 or cfg.kt % 128 \
            or cfg.smem_bytes() > WG_SMEM + 1024:
        raise InputError(f"grouped wgmma config {cfg} needs bm_max 64 or 128, 1, 2 or 4 warpgroups, >= 3 stages, a "
                         f"k-tile of whole 128-byte rows and <= {WG_SMEM + 1024} bytes of shared memory "
                         f"(it asks {cfg.smem_bytes()})")
    if N % (64 * cfg.wg) or (2 * K) % cfg.kt:
        raise InputError(f"grouped wgmma config {cfg}: N = {N} is not a multiple of its {64 * cfg.wg}-channel tiles "
                         f"or K = {K} of its {cfg.kt // 2}-element k-tiles")
    return cfg


def expert_bytes(scheme: str, N: int, K: int) -> int:
    """Bytes of one expert's weights as the kernel stores them (W4A16: codes and one scale+zero word per group; FP8:
    codes and one fp32 scale)."""
    if scheme == "fp8":
        return N * K + 4
    return N * K * 2 if scheme == "bf16" else N * K // 2 + N * (K // G) * 4
