"""The W4A16 production-tricks ladder (issue 14): from the chapter's kernel to tensor cores, one trick per rung.

`RUNGS` is the one place that says the order of the rungs, the registered kernels of each and the trick each adds;
docs/kernels-ladder.md, the dashboard's ladder figure (workbench/interfaces/dashboard/fig_lessons.py) and
bench/anchors.py read it. Rungs 1-3 are registered here (role "ladder", kernels/gemv/gemv_w4_ladder.cu); rung 0 is the
chapter's `gemv_w4_ref` (kernels/gemv/gemv.py), rungs 4 and 5 are our production kernels (`w4a16_gemv`;
`wg_w4a16` / `tc_w4a16`).

Role "ladder" is, for every selection, an ordinary kernel of its scheme, like "reference": `compare.best_per_scheme`
picks a rung as the best W4A16 kernel only where it measured fastest.

Launch geometry of rungs 1-3 (that of the chapter's kernel): one warp per output row, 4 warps per block, grid
ceil(N / 4); x staged in shared memory in K-tiles (`xstage.x_tile`: all of K at M = 1 when it fits in 48 KB, else tiles
of >= 1024 columns so that every lane has a 32-weight chunk per tile); the group size compiled in as W4_GROUP.
CuPy is imported inside functions only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels import problems
from kernels.gemv import gemv, xstage
from kernels.launch import BoundLaunchRunner, Launch, bound_problem, check_aligned
from kernels.quant import pack_w4, quant
from kernels.registry import KernelSpec, Problem, check_batch
from kernels.toolchain import build
from models.errors import InputError
from models.kernel_terms import KernelFacts, m_tiles_from
from models.ladder import RUNGS, Rung, rung_of

__all__ = ["DEFS", "RUNGS", "SPECS", "LadderRunner", "make_runner", "rung_of"]


SOURCE = "gemv_w4_ladder.cu"
WARPS = 4  # per block, one output row each (the chapter's geometry)
MIN_TILE = 1024  # K-tile floor: 32 lanes x 32 weights


@dataclass(frozen=True)
class LadderDef:
    entry: str
    layout: str  # "reference" (the chapter's packing, fp32 scales and zeros) or "reorder" (kernels/quant/pack_w4.py)
    x_kind: str  # "f32" or "f16": activations as read and staged
    out_kind: str  # "f32" or "f16"
    pad: int  # staged elements of padding after every 32 (conflict-free 16-byte shared reads)

    @property
    def elem_bytes(self) -> int:
        return 4 if self.x_kind == "f32" else 2


DEFS: dict[str, LadderDef] = {
    "ladder_w4_vec16": LadderDef("ladder_w4_vec16", "reference", "f32", "f32", 4),
    "ladder_w4_magic": LadderDef("ladder_w4_magic", "reference", "f16", "f16", 8),
    "ladder_w4_reorder": LadderDef("ladder_w4_reorder", "reorder", "f16", "f16", 8),
}

_RUN = "kernels.gemv.ladder:make_runner"
_GEOM = "the chapter's: warp per row, 4 warps per block, x staged in shared memory in K-tiles"
_FACTS = KernelFacts("gemv", "cuda_core", "w4", m_tiles_from(gemv.mb_for, range(1, gemv.MB_BINS[-1] + 1)),
                     cuda_core_rows=True)


def _spec(rung: Rung) -> KernelSpec:
    name = rung.kernels[0]
    return KernelSpec(name, "w4a16", "nvrtc", "ladder", _RUN, m_max=gemv.MB_BINS[-1], min_cc=75, source=SOURCE,
                      entry=DEFS[name].entry, geometry=_GEOM, facts=_FACTS,
                      notes=f"ladder rung {rung.index} ({rung.trick}): adds {rung.adds}; G=128 by default, "
                      "K % 32 == 0")


SPECS: tuple[KernelSpec, ...] = tuple(_spec(r) for r in RUNGS if r.kernels[0] in DEFS)


# ---------------------------------------------------------------- shapes, layouts, launches
def check_shape(spec: KernelSpec, M: int, N: int, K: int, group_size: int) -> None:
    check_batch(spec, M)
    if N < 1 or K < 1:
        raise InputError(f"{spec.name}: N and K must be >= 1, got N={N}, K={K}")
    if K % 32:
        raise InputError(f"{spec.name}: K must be a multiple of 32 (16-byte loads of 32 weights), got K={K}")
    quant.check_w4_shape(N, K, group_size)
    if group_size % 32:
        raise InputError(f"{spec.name}: the group size must be a multiple of 32 (one group per 32-weight load), "
                         f"got G={group_size}")


def params(name: str, group_size: int = gemv.W4_GROUP) -> problems.Params:
    return problems.Params("w4a16", "w4", DEFS[name].x_kind, group_size=group_size)


def options(mb: int, group_size: int) -> tuple[str, ...]:
    return (f"-DGEMV_MB={mb}", f"-DW4_GROUP={group_size}")


def x_tile(name: str, mb: int, K: int) -> tuple[int, int]:
    """(K-tile columns, dynamic shared memory bytes) of a launch with mb staged rows."""
    d = DEFS[name]
    kt = xstage.x_tile(K, mb, d.elem_bytes, d.pad, MIN_TILE)
    return kt, xstage.x_smem_bytes(kt, mb, d.elem_bytes, d.pad)


def prepare_weights(name: str, w: quant.W4) -> tuple[Any, ...]:
    """Canonical W4 weights in the rung's layout, on the device."""
    import cupy as cp

    if not isinstance(w, quant.W4):
        raise InputError(f"{name} takes weights as kernels.quant.quant.W4, got {type(w).__name__}")
    qd = quant.W4(cp.asarray(w.codes), cp.asarray(w.scales), cp.asarray(w.zeros), w.group_size)
    if DEFS[name].layout == "reorder":
        return pack_w4.pack_w4a16(qd, cp)
    return (quant.pack_w4_reference(qd.codes, cp), qd.scales.astype(cp.float32), qd.zeros.astype(cp.float32))


def make_launch(name: str, M: int, N: int, K: int, group_size: int, xs: tuple[Any, ...], ws: tuple[Any, ...],
                out: Any) -> Launch:
    mb = gemv.mb_for(M)
    func = build.function(SOURCE, DEFS[name].entry, options(mb, group_size))
    kt, smem = x_tile(name, mb, K)
    xstage.allow_smem(func, smem)
    check_aligned(name, xs + ws)
    i32 = np.int32
    args = ws + (xs[0], out, i32(M), i32(N), i32(K), i32(kt))
    return Launch(func, -(-N // WARPS), WARPS * 32, args, smem)


class LadderRunner(BoundLaunchRunner):
    def __init__(self, spec: KernelSpec, group_size: int | None = None) -> None:
        self.spec = spec
        self.group_size = group_size or gemv.W4_GROUP
        self._packed = problems.PackedCache(spec.name)

    def check(self, M: int, N: int, K: int) -> None:
        check_shape(self.spec, M, N, K, self.group_size)

    def compile_jobs(self, M: int, N: int, K: int) -> list[build.Job]:
        return [(SOURCE, DEFS[self.spec.name].entry, build.device_arch(), options(gemv.mb_for(M), self.group_size))]

    def make(self, M: int, N: int, K: int, *, seed: int, reference: bool) -> Problem:
        import cupy as cp

        self.check(M, N, K)
        name, G = self.spec.name, self.group_size
        inputs, xs, ws = self._packed.make(params(name, G), M, N, K, seed=seed, reference=reference,
                                           pack=lambda w: prepare_weights(name, w))
        out = cp.empty((M, N), dtype=cp.float32 if DEFS[name].out_kind == "f32" else cp.float16)
        return bound_problem(inputs, xs, ws, out, make_launch(name, M, N, K, G, xs, ws, out))


def make_runner(spec: KernelSpec, group_size: int | None = None) -> LadderRunner:
    return LadderRunner(spec, group_size=group_size)
