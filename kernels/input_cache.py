"""Device inputs made once and handed to every kernel and batch that reads them (kernels.problems).

A sweep measures each kernel at several batches M of one shape, and several kernels read the same weights: the
canonical weights of a (scheme parameters, N, K) draw, and a kernel's packed copies of them (the checked set and
the L2-cold rotation copies), do not depend on M. `InputCache` keeps them by `InputKey`: the same arrays for the
same key (callers only read them), a kernel layout at one shape at a time (moving to the next shape frees the one it
finished), and at most `max_bytes` in all, the least recently used dropped first, so device memory stays bounded.
Pure Python: the values are whatever `make` returns (CuPy arrays in kernels.problems, NumPy in the tests).

`scratch()` gives the calling thread private stand-ins for such process-wide caches (`scoped(name, shared, new)`):
the profiler's warm-up threads make tiny problems inside it, so that they never read, evict or fill what the
measured problems share.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

CANONICAL = ""  # the layout of kernels.problems' canonical weights (every other layout is a kernel's name)
DEFAULT_MAX_BYTES = 2 << 30


@dataclass(frozen=True)
class InputKey:
    """What one cached entry holds: weights drawn from `seed` for `params` (kernels.problems.Params, weight fields)
    at N x K, in `layout` (CANONICAL or a kernel's packing), copy number `copy` (0: the checked set's arrays; 1..:
    the distinct copies an L2-cold rotation reads), on CUDA device `device`."""

    layout: str
    params: Any
    N: int
    K: int
    seed: int
    copy: int = 0
    device: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        return self.N, self.K


def nbytes_of(value: Any) -> int:
    """Device bytes a cached value holds: arrays, or tuples / dataclasses / dicts of them (a W4 with its scales)."""
    if value is None:
        return 0
    if hasattr(value, "nbytes"):
        return int(value.nbytes)
    if isinstance(value, dict):
        return sum(nbytes_of(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return sum(nbytes_of(v) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return sum(nbytes_of(getattr(value, f)) for f in value.__dataclass_fields__)
    return 0


class InputCache:
    """Entries by InputKey, least recently used first; see the module docstring."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._items: OrderedDict[InputKey, tuple[Any, int]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        return sum(size for _, size in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: InputKey) -> bool:
        return key in self._items

    def get(self, key: InputKey, make: Callable[[], Any]) -> Any:
        """The value held for `key`, made by `make()` (and kept) when there is none."""
        if key in self._items:
            self._items.move_to_end(key)
            self.hits += 1
            return self._items[key][0]
        self.misses += 1
        if key.layout != CANONICAL:  # a kernel moved to another shape: what it held for the last one is done
            self._drop(lambda k: k.layout == key.layout and k.device == key.device and k.shape != key.shape)
        value = make()
        self._items[key] = (value, nbytes_of(value))
        self._evict()
        return value

    def clear(self) -> None:
        self._items.clear()

    def _drop(self, which: Callable[[InputKey], bool]) -> None:
        for k in [k for k in self._items if which(k)]:
            del self._items[k]

    def _evict(self) -> None:
        """Drop the least recently used entries until the rest fit in max_bytes (the newest is always kept: it is in
        use)."""
        total = self.nbytes
        while total > self.max_bytes and len(self._items) > 1:
            _, (_, size) = self._items.popitem(last=False)
            total -= size


_SCRATCH = threading.local()  # scratch()'s private caches of this thread, by name (None: the shared ones)


@contextmanager
def scratch() -> Iterator[dict[str, Any]]:
    """Inside the block, in this thread only, `scoped` hands out private caches (new, empty, dropped at the end)
    instead of the process-wide ones; yields them by name."""
    before = getattr(_SCRATCH, "caches", None)
    _SCRATCH.caches = caches = {}
    try:
        yield caches
    finally:
        _SCRATCH.caches = before


def scoped(name: str, shared: Any, new: Callable[[], Any]) -> Any:
    """`shared` (a process-wide cache), or inside `scratch()` this thread's private one of that name (`new()`)."""
    caches = getattr(_SCRATCH, "caches", None)
    if caches is None:
        return shared
    if name not in caches:
        caches[name] = new()
    return caches[name]
