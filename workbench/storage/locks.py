"""The profiler owns what it measures: an exclusive lock per GPU (by UUID) and per output file, and the flags of a
point that was measured while something else ran or whose spread never settled.

Locks are `fcntl.flock` on small files in one lock folder (`WORKBENCH_LOCK_DIR`, default `<tmp>/workbench-locks`),
named after the GPU UUID or a hash of the output's resolved path, so nothing is left beside the data. The kernel drops
a flock when its process dies, so a killed sweep never leaves a stale lock; the file keeps the last holder's pid, host,
command and start time, which is what a refused second sweep prints.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from models.errors import InputError

FLAG_OTHER_PROCESSES = "other_processes"  # another compute process was on the GPU during the point
FLAG_SPREAD = "spread_above_limit"  # (p90 - p10) / median stayed above the target when the budget ran out


class LockHeld(InputError):
    """A GPU or an output file is in use by another sweep (one line naming the holder)."""


def lock_dir() -> Path:
    folder = Path(os.environ.get("WORKBENCH_LOCK_DIR") or Path(tempfile.gettempdir()) / "workbench-locks")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if folder.stat().st_uid == os.getuid():
            folder.chmod(0o1777)  # shared by the users of one machine, like /tmp
    except OSError as exc:
        why = exc.strerror or exc
        raise InputError(f"cannot use the lock folder {folder}: {why}; set WORKBENCH_LOCK_DIR") from None
    return folder


def gpu_lock_path(uuid: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(uuid)) or "gpu"
    return lock_dir() / f"gpu-{safe}.lock"


def file_lock_path(path: str | Path, kind: str = "out") -> Path:
    resolved = str(Path(path).resolve())
    digest = hashlib.sha1(resolved.encode()).hexdigest()[:16]
    return lock_dir() / f"{kind}-{Path(path).name}-{digest}.lock"


def holder_info() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:300],
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def read_holder(lock_path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(lock_path).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe(holder: Mapping[str, Any]) -> str:
    if not holder.get("pid"):
        return "another process"
    return (f"pid {holder['pid']} on {holder.get('host', '?')} since {holder.get('started', '?')} "
            f"({holder.get('command', '?')})")


@contextlib.contextmanager
def exclusive(lock_path: str | Path, what: str, *, wait: bool = False,
              on_wait: Callable[[str], None] | None = None) -> Iterator[Path]:
    """Hold an exclusive flock on `lock_path` for the block; refuse at once (LockHeld naming the holder) when another
    process holds it, or block until it is free with `wait=True` (`on_wait` is told once, with the holder)."""
    lock_path = Path(lock_path)
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        fd = os.open(lock_path, os.O_RDONLY)  # another user's lock file: flock works on a read-only descriptor
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = describe(read_holder(lock_path))
            if not wait:
                raise LockHeld(f"{what} is in use by {holder}; wait for it to finish or re-run with --wait") from None
            if on_wait is not None:
                on_wait(f"waiting for {what}: in use by {holder}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        with contextlib.suppress(OSError):  # record the holder (best effort: a read-only lock file stays as it is)
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder_info()) + "\n").encode(), 0)
        yield lock_path
    finally:
        os.close(fd)  # closing the descriptor releases the flock


@contextlib.contextmanager
def sweep_locks(gpu_uuid: str, out: str | Path | None, *, wait: bool = False,
                on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """The GPU (by UUID) and the output file (if any), both exclusive for a whole sweep; the GPU first, always."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(exclusive(gpu_lock_path(gpu_uuid or "unknown"), f"GPU {gpu_uuid or '(no UUID)'}",
                                      wait=wait, on_wait=on_wait))
        if out is not None:
            stack.enter_context(exclusive(file_lock_path(out), f"output {out}", wait=wait, on_wait=on_wait))
        yield


_HELD: list[contextlib.ExitStack] = []


def hold_sweep(gpu_uuid: str, out: str | Path | None, *, wait: bool = False,
               on_wait: Callable[[str], None] | None = None) -> None:
    """Take the sweep locks until `release_all()` (the CLI's `main` calls it when a command ends) or the process
    exits, whichever comes first: one line where a command takes them, no re-indented block."""
    stack = contextlib.ExitStack()
    stack.enter_context(sweep_locks(gpu_uuid, out, wait=wait, on_wait=on_wait))
    _HELD.append(stack)


def release_all() -> None:
    while _HELD:
        _HELD.pop().close()


@contextlib.contextmanager
def store_lock(path: str | Path) -> Iterator[None]:
    """Short exclusive lock for one read-merge-write of a measurement file and its journal (always waits)."""
    with exclusive(file_lock_path(path, "store"), f"store {path}", wait=True):
        yield


# ---------------------------------------------------------------------------------------------------- point flags
def point_flags(row: Mapping[str, Any], target_spread: float) -> dict[str, Any]:
    """The `flags` column of a measured row: comma-separated reasons it is not a clean point ("" when clean).

    A spread above the target after the budget, or another process seen on the GPU (the `other_processes` column
    that `workbench.measure.nvml` fills), marks the point; it is stored, never silently as clean.
    """
    flags = []
    spread = row.get("spread_rel")
    if spread is None or spread != spread or float(spread) > float(target_spread):
        flags.append(FLAG_SPREAD)
    if str(row.get("other_processes") or "").strip():
        flags.append(FLAG_OTHER_PROCESSES)
    return {"flags": ",".join(flags)}
