"""x staged in shared memory, the arithmetic of it: the K-tile a block stages and the shared memory it needs.

Used by the kernels that stage the activations in shared memory: the chapter's reference kernels
(kernels/gemv/gemv_reference.cu, launched by kernels/gemv/gemv.py) and the W4A16 ladder rungs (kernels/gemv/ladder.py).
"""

from __future__ import annotations

from typing import Any

SMEM_BUDGET = 48 * 1024  # shared memory per block a kernel gets without the opt-in attribute
X_TILE_QUANTUM = 256  # K-tiles other than all of K are multiples of this (of 8, 32 and every w4 group size)


def x_tile(K: int, rows: int, elem_bytes: int, pad_per_32: int = 0, min_tile: int = X_TILE_QUANTUM) -> int:
    """Columns of x a block stages in shared memory per K-tile (kernels that stage x: gemv_reference.cu and the
    ladder): all of K when `rows` rows of it (with `pad_per_32` padding elements after every 32) fit in SMEM_BUDGET,
    which is the chapter's single staging at M = 1, else the largest multiple of X_TILE_QUANTUM that fits, at least
    `min_tile` (which may then need more than SMEM_BUDGET: `x_smem_bytes` says how much)."""
    if K * rows * elem_bytes * (32 + pad_per_32) <= SMEM_BUDGET * 32:
        return K
    fit = SMEM_BUDGET * 32 // (rows * elem_bytes * (32 + pad_per_32)) // X_TILE_QUANTUM * X_TILE_QUANTUM
    return min(K, max(min_tile, fit))


def x_smem_bytes(kt: int, rows: int, elem_bytes: int, pad_per_32: int = 0) -> int:
    """Dynamic shared memory of `rows` staged rows of a K-tile of kt columns (row stride kt + kt/32 * pad)."""
    return rows * (kt + kt // 32 * pad_per_32) * elem_bytes


def allow_smem(func: Any, nbytes: int) -> None:
    """Raise a kernel's dynamic shared memory limit when a launch needs more than SMEM_BUDGET."""
    if nbytes > SMEM_BUDGET and int(getattr(func, "max_dynamic_shared_size_bytes", 0)) < nbytes:
        func.max_dynamic_shared_size_bytes = nbytes
