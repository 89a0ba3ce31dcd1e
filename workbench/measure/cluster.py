"""A sweep over a Ray cluster (`workbench profile --ray ADDRESS`; Ray is the optional extra `[cluster]`).

The driver (the machine running the command) plans the points, asks Ray for the GPUs of every alive node grouped by
kind (the `accelerator_type:<kind>` resource Ray sets on GPU nodes) and submits one task per GPU (`num_gpus=1`,
pinned to its kind). Each task is a Ray streaming generator: it measures its points through the single-GPU profiler
into a scratch file on its node and yields every row as soon as it is in the journal. Only the driver writes the
store, one file per GPU (`<out stem>.gpu-<uuid8>.parquet`, as `--gpus` does), so a lost node loses at most the points
it had in flight.

- Whole plan per GPU (default): every GPU measures every point; a task skips points its GPU already has in the
  driver's store, so re-running the command resumes. A lost node's GPUs are reported with what they did not measure.
- `--split`: the unfinished points of each kind are dealt round-robin to that kind's GPUs; the unfinished points of a
  share whose task was lost (node died, worker killed) are submitted again to the same kind, up to `retries` times.

Ray is imported inside functions: nothing here is needed by the local path.
"""

from __future__ import annotations

import json
import math
import queue
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.errors import InputError
from workbench.measure.gpu_worker import Gpu, WorkerTask, calibrations_by_uuid
from workbench.measure.multigpu import key_of, row_key, split_points, worker_out
from workbench.measure.profiler import Point
from workbench.measure.timing import TimingConfig
from workbench.storage import store

KIND_PREFIX = "accelerator_type:"
POLL_S = 0.2


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs Ray: pip install -e '.[cluster]' (--gpus needs no Ray)") from None
    return ray


def check_address(address: str, timeout_s: float = 5.0) -> None:
    """Refuse a [ray://]HOST:PORT that is malformed or not listening before ray.init, which retries an unreachable
    head for minutes, logging every few seconds; `local`, `auto` and other schemes are left to Ray."""
    if address in ("local", "auto") or ("://" in address and not address.startswith("ray://")):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    host = host.strip("[]")
    if not host or not (port.isascii() and port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535):
        raise InputError(f"--ray {address!r}: give local, auto or a head's HOST:PORT (port 1..65535)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, UnicodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(f"--ray {address}: cannot reach {host}:{port} ({why}); start the head (`ray start --head`) "
                         "or give local") from None


def connect(address: str, **init_kwargs: Any) -> Any:
    """ray.init: `local` starts a head in this process's machine; anything else is a cluster address (or `auto`)."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    check_address(address)
    try:
        if address == "local":
            ray.init(include_dashboard=False, **init_kwargs)
        else:
            ray.init(address=address, **init_kwargs)
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise InputError(f"--ray {address}: cannot connect ({why}); give local, auto or a head's HOST:PORT") from None
    return ray


def gpu_kinds(nodes: Sequence[dict[str, Any]]) -> dict[str, int]:
    """GPUs per kind over the alive nodes of `ray.nodes()`; a GPU node without an accelerator type counts as ``."""
    kinds: dict[str, int] = {}
    for node in nodes:
        if not node.get("Alive", node.get("alive", False)):
            continue
        res = node.get("Resources", {})
        n = int(res.get("GPU", 0))
        if n < 1:
            continue
        types = [k[len(KIND_PREFIX):] for k in res if k.startswith(KIND_PREFIX)]
        kind = types[0] if len(types) == 1 else ""
        kinds[kind] = kinds.get(kind, 0) + n
    return kinds


def kind_matches(kind: str, gpu_name: str) -> bool:
    """Whether a row's device name belongs to a Ray accelerator kind (`H200` ~ `NVIDIA H200`); `` matches all."""
    norm = "".join(ch for ch in gpu_name.upper() if ch.isalnum())
    return not kind or "".join(ch for ch in kind.upper() if ch.isalnum()) in norm


# ---------------------------------------------------------------------------------------------------- the task
def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps({k: store._json_value(v) for k, v in row.items()}, allow_nan=False))


def _read_new_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Complete journal lines after byte `offset` (a line still being written waits for the next poll)."""
    if not path.exists():
        return [], offset
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n") + 1
    rows = [json.loads(line) for line in data[:end].decode().splitlines() if line.strip()]
    return rows, offset + end


def stream_share(points: list[Point], cfg: TimingConfig, backend: Any, done_by_uuid: dict[str, list[tuple]],
                 calibrations: dict[str, dict[str, Any]], calibrate: bool,
                 group_size: int | None = None) -> Iterator[dict[str, Any]]:
    """Body of one Ray task: measure `points` on the GPU Ray gave it, yielding items as they happen.

    Items: {"item": "gpu", ...Gpu fields, "host"}, then {"item": "row", "row": {...}} per measured point,
    {"item": "calibration", "doc": {...}} when the GPU was calibrated here, and {"item": "summary", ...} last.
    """
    gpu = backend.identify()
    yield {"item": "gpu", "index": gpu.index, "uuid": gpu.uuid, "name": gpu.name, "cc": gpu.cc,
           "host": socket.gethostname()}
    done = {tuple(k) for k in done_by_uuid.get(gpu.uuid, [])}
    mode = "hot" if cfg.hot else "cold"
    todo = [p for p in points if key_of(p, mode, group_size) not in done]
    with tempfile.TemporaryDirectory(prefix="workbench-ray-") as tmp:
        cal_dir = Path(tmp) / "calibration"
        cal_dir.mkdir()
        for doc in calibrations.values():
            store.write_calibration(cal_dir, doc)
        before = {p.name for p in cal_dir.glob("*.json")}
        out = Path(tmp) / "share.parquet"
        task = WorkerTask(gpu, todo, out, cfg, cal_dir, calibrate, group_size=group_size)
        box: dict[str, Any] = {}
        logs: queue.Queue[str] = queue.Queue()

        def work() -> None:
            try:
                box["summary"] = backend.sweep(task, logs.put)
            except BaseException as exc:  # re-raised in the generator, so Ray reports it as the task's error
                box["error"] = exc

        thread = threading.Thread(target=work, name="workbench-share", daemon=True)
        thread.start()
        offset, sent = 0, set()
        jpath = store.journal_path(out)
        while True:
            alive = thread.is_alive()
            rows, offset = _read_new_lines(jpath, offset)
            for row in rows:
                sent.add(row_key(row))
                yield {"item": "row", "row": row}
            while not logs.empty():
                yield {"item": "log", "text": logs.get()}
            if not alive:
                break
            time.sleep(POLL_S)
        if out.exists():  # rows folded into the file between the last poll and the end of the sweep
            for row in store.read_measurement_file(out).to_dict("records"):
                key = row_key(row)
                if key not in sent:
                    sent.add(key)
                    yield {"item": "row", "row": _jsonable(row)}
        for path in sorted(cal_dir.glob("*.json")):
            if path.name not in before:
                yield {"item": "calibration", "doc": store.read_calibration(path)}
        if "error" in box:
            raise box["error"]
        yield {"item": "summary", **box.get("summary", {})}


# ---------------------------------------------------------------------------------------------------- the driver
@dataclass
class Share:
    sid: int
    kind: str
    points: list[Point]
    attempt: int = 0
    gpu: Gpu | None = None
    host: str = ""
    received: set[tuple] = field(default_factory=set)
    summary: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    lost: bool = False  # the task died for a system reason (node or worker lost), not a bad input or a kernel
    bundle: int | None = None  # whole plan: its bundle in the kind's placement group


@dataclass
class RayResult:
    shares: list[Share]
    kinds: dict[str, int]
    split: bool
    wall_s: float
    files: dict[str, Path] = field(default_factory=dict)  # GPU UUID -> file the driver wrote
    rows_by_uuid: dict[str, int] = field(default_factory=dict)  # rows received this run
    resubmitted: int = 0
    unfinished: list[str] = field(default_factory=list)  # points no task measured, and why


def _done_by_uuid(files: Sequence[Path]) -> dict[str, set[tuple]]:
    out: dict[str, set[tuple]] = {}
    for f in files:
        frame = store.fold_journal(f)
        for r in frame[list(store.POINT_KEY)].itertuples(index=False):
            out.setdefault(str(r.gpu_uuid), set()).add(row_key(r))
    return out


def _names_by_uuid(files: Sequence[Path]) -> dict[str, str]:
    names: dict[str, str] = {}
    for f in files:
        if f.exists():
            frame = store.read_measurement_file(f)
            names.update(dict(zip(frame["gpu_uuid"].astype(str), frame["gpu_name"].astype(str), strict=True)))
    return names


def profile_ray(
    points: list[Point],
    *,
    address: str,
    split: bool,
    out: Path,
    cfg: TimingConfig,
    backend: Any,
    calibration_dir: Path | None,
    calibrate: bool = True,
    fresh: bool = False,
    retries: int = 2,
    group_size: int | None = None,
    log: Callable[[str], None] = print,
    init_kwargs: dict[str, Any] | None = None,
) -> RayResult:
    """Measure `points` on every GPU of the cluster at `address` (whole plan each, or `split` per kind)."""
    from workbench.measure.multigpu import sibling_outs

    ray = connect(address, **(init_kwargs or {}))
    t0 = time.perf_counter()
    kinds = gpu_kinds(ray.nodes())
    if not kinds:
        raise InputError(f"--ray {address}: the cluster has no GPU (ray.nodes() lists none); start nodes with GPUs")
    mode = "hot" if cfg.hot else "cold"
    if fresh:
        for f in sibling_outs(out):
            f.unlink(missing_ok=True)
            store.journal_path(f).unlink(missing_ok=True)
    files = sibling_outs(out)
    done = _done_by_uuid(files)
    names = _names_by_uuid(files)
    cal_by_uuid = calibrations_by_uuid(calibration_dir) if calibration_dir else {}

    shares: list[Share] = []
    groups: dict[str, Any] = {}  # whole plan: one placement group per kind, a bundle (a distinct GPU) per task
    for kind, n in sorted(kinds.items()):
        if split:
            kind_done = set().union(*[k for u, k in done.items() if kind_matches(kind, names.get(u, ""))] or [set()])
            for share_points in split_points(points, n, kind_done, mode, group_size):
                if share_points:
                    shares.append(Share(len(shares), kind, share_points))
        else:
            groups[kind] = _reserve(ray, kind, n)
            shares.extend(Share(len(shares), kind, list(points), bundle=i) for i in range(n))
    result = RayResult([], kinds, split, 0.0)
    remote = ray.remote(stream_share)
    events: queue.Queue[tuple[str, Share, Any]] = queue.Queue()

    def submit(share: Share) -> None:
        opts: dict[str, Any] = {"num_gpus": 1, "num_cpus": 1, "max_retries": 0}
        if share.kind:
            opts["resources"] = {KIND_PREFIX + share.kind: 0.001}
        if share.bundle is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(groups[share.kind],
                                                                           placement_group_bundle_index=share.bundle)
        snapshot = {u: sorted(k) for u, k in done.items()}
        gen = remote.options(**opts).remote(share.points, cfg, backend, snapshot, cal_by_uuid, calibrate, group_size)
        threading.Thread(target=_consume, args=(ray, gen, share, events), daemon=True).start()

    for share in shares:
        submit(share)
    running = len(shares)
    while running:
        what, share, payload = events.get()
        if what == "item":
            _on_item(share, payload, out, done, result, calibration_dir, log)
            continue
        running -= 1
        result.shares.append(share)
        if payload is None:
            continue
        share.error, share.lost = payload
        log(f"share {share.sid} ({share.kind or 'GPU'} {share.gpu.uuid if share.gpu else '?'}): {share.error}")
        left = [p for p in share.points if key_of(p, mode, group_size) not in share.received]
        if split and share.lost and left and share.attempt < retries:
            again = Share(len(shares), share.kind, left, attempt=share.attempt + 1)
            shares.append(again)
            result.resubmitted += 1
            log(f"resubmitting {len(left)} unfinished points of share {share.sid} to another {share.kind or 'GPU'}")
            submit(again)
            running += 1
        elif left:
            where = share.gpu.uuid if share.gpu else f"a {share.kind or 'GPU'}"
            result.unfinished.append(f"{len(left)} points of task {share.sid} on {where} ({share.error}); "
                                     "run the same command again to resume")
    for path in result.files.values():
        store.fold_journal(path)
    for pg in groups.values():
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(pg)
    result.shares.sort(key=lambda s: s.sid)
    result.wall_s = time.perf_counter() - t0
    return result


def _reserve(ray: Any, kind: str, n: int, timeout_s: float = 600.0) -> Any:
    """A placement group of `n` one-GPU bundles of `kind`: each whole-plan task gets a GPU of its own (without it,
    Ray may hand a finished task's GPU to the next task, and one GPU would measure the plan twice)."""
    from ray.util.placement_group import placement_group, remove_placement_group

    bundle = {"CPU": 1.0, "GPU": 1.0, **({KIND_PREFIX + kind: 0.001} if kind else {})}
    pg = placement_group([dict(bundle) for _ in range(n)], strategy="PACK")
    try:
        ray.get(pg.ready(), timeout=timeout_s)
    except Exception:
        remove_placement_group(pg)
        raise InputError(f"--ray: could not reserve {n} GPUs of kind {kind or 'GPU'} within {timeout_s:.0f} s "
                         "(busy?); use --split, or free them") from None
    return pg


def _consume(ray: Any, gen: Any, share: Share, events: queue.Queue) -> None:
    """Drain one task's stream into the driver's event queue (a thread per task)."""
    try:
        for ref in gen:
            events.put(("item", share, ray.get(ref)))
    except Exception as exc:
        from ray import exceptions as rex

        lost = not isinstance(exc, rex.RayTaskError) and isinstance(exc, rex.RayError)
        cause = exc.cause if isinstance(exc, rex.RayTaskError) and exc.cause is not None else exc
        events.put(("end", share, (f"{type(cause).__name__}: {cause}".splitlines()[0], lost)))
        return
    events.put(("end", share, None))


def _on_item(share: Share, item: dict[str, Any], out: Path, done: dict[str, set[tuple]], result: RayResult,
             calibration_dir: Path | None, log: Callable[[str], None]) -> None:
    kind = item.get("item")
    if kind == "gpu":
        share.gpu = Gpu(int(item["index"]), str(item["uuid"]), str(item["name"]), item.get("cc"))
        share.host = str(item.get("host", ""))
    elif kind == "row":
        row = item["row"]
        uuid = str(row["gpu_uuid"])
        path = result.files.setdefault(uuid, worker_out(out, uuid))
        store.append_journal(store.journal_path(path), row)
        key = row_key(row)
        share.received.add(key)
        done.setdefault(uuid, set()).add(key)
        result.rows_by_uuid[uuid] = result.rows_by_uuid.get(uuid, 0) + 1
    elif kind == "calibration" and calibration_dir is not None:
        path = store.write_calibration(calibration_dir, item["doc"])
        log(f"calibration of {item['doc'].get('gpu_uuid')} -> {path}")
    elif kind == "summary":
        share.summary = {k: v for k, v in item.items() if k != "item"}
    elif kind == "log":
        log(f"[{share.gpu.tag if share.gpu else share.sid}] {item['text']}")


def points_per_second(result: RayResult) -> float:
    n = sum(result.rows_by_uuid.values())
    return n / result.wall_s if result.wall_s > 0 else math.nan
