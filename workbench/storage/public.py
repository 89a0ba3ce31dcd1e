"""Public timings imported beside our own measurements, never mixed with them.

`workbench import FILE` reads (a) NVIDIA aiconfigurator's collected `gemm_perf.parquet` tables or (b) a plain CSV in
the layout of `../shared/public-timings/` (workbench.storage.public_layouts maps their rows to a catalogue GPU, a
scheme and a modeled kernel), checks every row, and writes `<data dir>/public/<name>.parquet`
atomically (one file per imported source file; importing it again replaces it). Every row keeps its provenance and
`origin = "public"`. Readers of our measurements (`store.load_measurements`) never look in `public/`; a caller that
wants these rows asks for them with `load_public`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from models.errors import InputError
from workbench.storage.public_layouts import (  # the kernels and dtype map are defined there, re-exported here
    GEMM_DTYPES,
    LIBRARY_PREFIX,
    PUBLIC_KERNELS,
    detect_layout,
    from_aiconfigurator,
    from_csv,
    read_table,
)
from workbench.storage.store import PUBLIC_DIR, atomic_write_bytes

__all__ = ["GEMM_DTYPES", "LIBRARY_PREFIX", "ORIGIN", "PUBLIC_COLUMNS", "PUBLIC_KERNELS", "Imported", "import_file",
           "load_public"]  # fmt: skip

ORIGIN = "public"  # the value of `origin` on every imported row: not measured by this workbench
PUBLIC_COLUMNS: dict[str, str] = {
    "origin": "string", "gpu": "string", "scheme": "string", "kernel": "string", "group_size": "int64",
    "M": "int64", "N": "int64", "K": "int64", "time_s": "float64", "act_quant_included": "boolean",
    "source": "string", "framework": "string", "framework_version": "string", "kernel_source": "string",
    "timing": "string", "notes": "string", "imported_from": "string", "imported_at": "string",
}  # fmt: skip

DECODE_MAX_BATCH = 256  # rows with a larger M (aiconfigurator's tables hold prefill GEMMs too) are left out
MAX_DECODE_TIME_S = 1.0  # above this a linear layer's time is not a decode GEMM (or is not in seconds)
ROOFLINE_SLACK = 2.0  # a time below bytes / datasheet bandwidth by more than this factor is in the wrong unit


def empty_public() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in PUBLIC_COLUMNS.items()})


def public_dir(data_dir: str | Path) -> Path:
    return Path(data_dir) / PUBLIC_DIR


def load_public(data_dir: str | Path) -> pd.DataFrame:
    """Every imported public row under <data_dir>/public/*.parquet (an empty frame with the columns when none)."""
    files = sorted(public_dir(data_dir).glob("*.parquet")) if public_dir(data_dir).is_dir() else []
    frames = []
    for path in files:
        try:
            frame = pd.read_parquet(path)
        except Exception as exc:  # pyarrow errors: a corrupt or foreign file
            raise InputError(f"{path}: not a readable public-timings file ({type(exc).__name__})") from None
        missing = [c for c in PUBLIC_COLUMNS if c not in frame.columns]
        if missing:
            raise InputError(f"{path}: not a public-timings file (missing columns: {', '.join(missing[:5])})")
        frames.append(frame[list(PUBLIC_COLUMNS)].astype(PUBLIC_COLUMNS))
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else empty_public()




def _first_bad(frame: pd.DataFrame, bad: np.ndarray, name: str, what: str, accepted: str) -> None:
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = frame.iloc[i]
        where = f"M={row.get('M')} N={row.get('N')} K={row.get('K')}"
        raise InputError(f"{name}: {int(bad.sum())} row(s) {what} (first: data row {i + 1}, {where}); {accepted}")


# ---------------------------------------------------------------------------------------------------- checks
def check_times(rows: pd.DataFrame, name: str) -> None:
    """Refuse times that cannot be right: <= 0 or not a number, above MAX_DECODE_TIME_S, or faster than the
    GPU's datasheet bandwidth could move the layer's bytes beyond its L2 by more than ROOFLINE_SLACK."""
    from models.hardware import get_gpu
    from models.schemes import SCHEME_PARAMS, get_scheme, traffic

    t = rows["time_s"].to_numpy(dtype=np.float64)
    _first_bad(rows, ~np.isfinite(t) | (t <= 0), name, "have a time <= 0 or not a number",
               "times must be positive (aiconfigurator latency in ms, CSV time_s in seconds)")
    _first_bad(rows, t > MAX_DECODE_TIME_S, name, f"take more than {MAX_DECODE_TIME_S:g} s",
               "that is not a decode GEMM time; check the unit (aiconfigurator latency is ms, CSV time_s is s)")
    floor = np.zeros(len(rows))
    for (gpu, scheme, group), part in rows.groupby(["gpu", "scheme", "group_size"], sort=False):
        params = {"group_size": int(group)} if group and "group_size" in SCHEME_PARAMS.get(scheme, {}) else {}
        try:
            moved = traffic(get_scheme(scheme, **params), part["M"].to_numpy(), part["N"].to_numpy(),
                            part["K"].to_numpy()).bytes
        except InputError as exc:
            raise InputError(f"{name}: {scheme} rows: {str(exc).splitlines()[0]}") from None
        card = get_gpu(gpu)
        # at best the L2 holds part of the bytes (tables that cycle too few weight copies): only the rest must come
        # from DRAM at no more than the datasheet bandwidth
        floor[rows.index.get_indexer(part.index)] = np.maximum(moved - card.l2_bytes, 0.0) / card.bandwidth
    _first_bad(rows, t * ROOFLINE_SLACK < floor, name,
               f"are more than {ROOFLINE_SLACK:g}x faster than the datasheet bandwidth can move their bytes",
               "the time's unit is wrong (aiconfigurator latency is ms, CSV time_s is s) or the GPU is not the one "
               "named")


@dataclass(frozen=True)
class Imported:
    path: Path  # the file written
    rows: pd.DataFrame  # what it holds (PUBLIC_COLUMNS)
    layout: str  # "aiconfigurator" or "csv"
    left_out: int  # rows above max_batch (prefill-sized GEMMs), not imported


def import_file(path: str | Path, data_dir: str | Path, *, name: str | None = None, source: str | None = None,
                max_batch: int = DECODE_MAX_BATCH) -> Imported:
    """Read, map and check every row of `path` with M <= max_batch, then write <data_dir>/public/<name>.parquet
    atomically. Nothing is written unless every such row passes."""
    path = Path(path)
    raw = read_table(path)
    if raw.empty:
        raise InputError(f"{path}: no rows to import")
    layout = detect_layout(list(raw.columns), str(path))
    raw = raw.reset_index(drop=True)
    rows = from_aiconfigurator(raw, str(path), source) if layout == "aiconfigurator" else from_csv(raw, str(path),
                                                                                                   source)
    decode = (rows["M"] <= max_batch).to_numpy()
    if not decode.any():
        raise InputError(f"{path}: no row has M <= {max_batch} (a decode batch); give --max-batch to import larger M")
    rows = rows[decode].reset_index(drop=True)
    check_times(rows, str(path))
    rows.insert(0, "origin", ORIGIN)
    rows["imported_from"] = str(path)
    rows["imported_at"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = rows[list(PUBLIC_COLUMNS)].astype(PUBLIC_COLUMNS)
    target = public_dir(data_dir) / f"{store_name(path, rows, name)}.parquet"
    atomic_write_bytes(target, rows.to_parquet(index=False))
    return Imported(target, rows, layout, int((~decode).sum()))


_NAME_RE = re.compile(r"[^A-Za-z0-9._-]+")


def store_name(path: Path, rows: pd.DataFrame, name: str | None) -> str:
    """The stored file's stem: --name, else the file's stem; aiconfigurator's tables are all `gemm_perf`, so theirs
    is gemm_perf-<gpu>-<framework>-<version> (one file per GPU, framework and version, as they are collected)."""
    if name is not None:
        stem = _NAME_RE.sub("-", str(name)).strip("-.")
        if not stem:
            raise InputError(f"--name {name!r} has no usable characters; give letters, digits, '.', '_' or '-'")
        return stem
    stem = path.stem
    if stem == "gemm_perf":
        parts = [stem] + ["+".join(sorted(rows[c].astype(str).unique())) for c in ("gpu", "framework",
                                                                                   "framework_version")]
        stem = "-".join(parts)
    return _NAME_RE.sub("-", stem).strip("-.") or "public"
