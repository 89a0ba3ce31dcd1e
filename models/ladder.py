"""The W4A16 production-tricks ladder (issue 14): the order of the rungs, the registered kernels of each and the one
trick each adds to the rung before. The one place this is written: kernels/gemv/ladder.py registers rungs 1-3 from it,
the dashboard's ladder view (workbench/interfaces/dashboard), bench/anchors.py and docs/kernels-ladder.md read it.
Pure Python (models import neither kernels nor the workbench), so the dashboard reads it without the kernel registry.

Rung 0 is the chapter's `gemv_w4_ref` (kernels/gemv/gemv_reference.cu); rungs 1-3 are the `ladder_*` kernels
(kernels/gemv/gemv_w4_ladder.cu, role "ladder"); rungs 4 and 5 our production kernels.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rung:
    index: int
    kernels: tuple[str, ...]  # registered kernels of this rung; its time at a point is the fastest of them measured
    trick: str  # short label (figure axis, tables)
    adds: str  # what this rung adds to the one before, in words
    m_from: int = 1  # the rung is shown from this batch


RUNGS: tuple[Rung, ...] = (
    Rung(0, ("gemv_w4_ref",), "chapter kernel",
         "the chapter's gemv_w4 as written: warp per row, 4 warps per block, x in shared memory (fp32), one 32-bit "
         "word of packed weights per lane per step, shift-and-mask dequant, fp32 scales and zeros, fp32 FMAs"),
    Rung(1, ("ladder_w4_vec16",), "16-byte loads",
         "16-byte vector loads: one uint4 (32 weights) per lane per step; x staged and read 16 bytes at a time "
         "(padded so the shared reads are conflict-free)"),
    Rung(2, ("ladder_w4_magic",), "fast INT4→FP16",
         "0x6400 magic number + lop3: one logic op turns two nibbles into half2 (1024 + q); fp16 activations, "
         "half2 FMAs (fp32 across chunks)"),
    Rung(3, ("ladder_w4_reorder",), "offline reorder",
         "weights reordered offline (kernels/quant/pack_w4.py) so each nibble pair is two consecutive weights (x half2 "
         "used as staged, no byte permute); scale and zero point in one 32-bit word"),
    Rung(4, ("w4a16_gemv",), "our best GEMV",
         "persistent grid, tiles of several weight rows sharing each x load, K split across the warps of a block, x "
         "through L1 instead of a per-block shared copy, odd nibbles masked in place (one shift per word)"),
    Rung(5, ("w4a16_tc_gemv", "wg_w4a16", "tc_w4a16"), "tensor cores",
         "dequantize to fp16 and multiply on tensor cores: the weights as the mma's A operand and the batch as its N "
         "(w4a16_tc_gemv, mma.sync, M <= 16), so one conversion serves 8 or 16 batch rows and no product runs on CUDA "
         "cores; the GEMMs from M = 16 (wgmma on sm_90a, mma.sync elsewhere)"),
)


def rung_of(kernel: str) -> Rung | None:
    """The rung a registered kernel belongs to (None: not on the ladder)."""
    return next((r for r in RUNGS if kernel in r.kernels), None)
