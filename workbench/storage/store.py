"""Reading and writing measurements (Parquet / CSV / JSONL journal) and calibration files.

Everything written here is written atomically (a temp file in the same folder, then rename), so an interrupted
write never leaves half a file. Readers validate against `workbench.storage.schema` and reject foreign files and newer
schema versions with a one-line `InputError` naming the file.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from models.errors import InputError
from workbench.storage.locks import store_lock
from workbench.storage.schema import ADDED_COLUMNS, CALIBRATION_CEILINGS, MEASUREMENT_COLUMNS, SCHEMA_VERSION

MEASUREMENT_SUFFIXES = (".parquet", ".csv")
PUBLIC_DIR = "public"  # <data dir>/public/: imported public timings (workbench.storage.public), never measurements
_INT_KINDS = "iu"
_FLOAT_KINDS = "fiu"
# What identifies one measured point (the one definition: the profiler's resume, fold_journal, scripts/run_diff.py).
POINT_KEY = ("gpu_uuid", "kernel", "scheme", "layer", "M", "N", "K", "mode", "group_size", "routing", "routing_seed")


# ---------------------------------------------------------------------------------------------------- atomic files
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` via a temp file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the mode a plain open() would
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def check_writable(path: str | Path) -> Path:
    """Raise InputError unless a file can be created at `path` (checked before any measuring)."""
    path = Path(path)
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".probe.", dir=folder)
        os.close(fd)
        Path(tmp).unlink()
    except OSError as exc:
        raise InputError(f"cannot write to {path}: {exc.strerror or exc}; choose a writable --out path") from None
    if path.exists() and path.is_dir():
        raise InputError(f"output path {path} is a directory; give a file name ending in .parquet")
    return path


# ---------------------------------------------------------------------------------------------------- frames
def empty_measurements() -> pd.DataFrame:
    """A frame with every measurement column, typed, and no rows."""
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in MEASUREMENT_COLUMNS.items()})


def _compatible(series: pd.Series, dtype: str) -> bool:
    if series.isna().all():
        return True
    kind = series.dtype.kind
    if dtype == "int64":
        if kind in _INT_KINDS:
            return True
        if kind == "f":
            values = series.dropna()
            return bool((values == values.round()).all())
        return False
    if dtype == "float64":
        return kind in _FLOAT_KINDS
    if dtype == "boolean":
        if kind == "b":
            return True
        values = series.dropna()
        if kind in _INT_KINDS or kind == "f":
            return bool(values.isin([0, 1]).all())
        return bool(values.astype(str).str.lower().isin(["true", "false", "0", "1"]).all())
    return True  # string: anything converts


def _to_boolean(series: pd.Series) -> pd.Series:
    if series.dtype.kind == "b" or str(series.dtype) == "boolean":
        return series.astype("boolean")
    if series.dtype.kind in "iuf":
        return series.astype("Float64").astype("boolean")
    mapped = series.astype("string").str.lower().map({"true": True, "false": False, "1": True, "0": False})
    return mapped.astype("boolean")


def _to_string(series: pd.Series) -> pd.Series:
    return series.astype("string").fillna("")


def validate_frame(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """Check a measurement frame against the schema and return it with canonical dtypes and column order.

    Rejects (InputError naming `source`): missing columns, a newer or unknown schema_version, values of the wrong type.
    Extra columns are kept after the schema columns (a newer writer with the same version may add some).
    """
    df = with_added_columns(df)
    missing = [c for c in MEASUREMENT_COLUMNS if c not in df.columns]
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise InputError(f"{source}: not a workbench measurement file (missing columns: {shown})")
    versions = pd.to_numeric(df["schema_version"], errors="coerce")
    if versions.isna().any():
        raise InputError(f"{source}: schema_version is not an integer in every row")
    newest = int(versions.max()) if len(versions) else SCHEMA_VERSION
    if newest > SCHEMA_VERSION:
        raise InputError(
            f"{source}: schema_version {newest} is newer than this workbench reads ({SCHEMA_VERSION}); upgrade it"
        )
    if len(versions) and int(versions.min()) < 1:
        raise InputError(f"{source}: schema_version {int(versions.min())} is not a valid version (>= 1)")
    out = {}
    for col, dtype in MEASUREMENT_COLUMNS.items():
        series = df[col]
        if not _compatible(series, dtype):
            raise InputError(f"{source}: column {col!r} has type {series.dtype}, expected {dtype}")
        try:
            if dtype == "int64":
                if series.isna().any():
                    raise InputError(f"{source}: column {col!r} has missing values; it must be an integer in every row")
                out[col] = series.astype("int64")
            elif dtype == "float64":
                out[col] = pd.to_numeric(series).astype("float64")
            elif dtype == "boolean":
                out[col] = _to_boolean(series)
            else:
                out[col] = _to_string(series)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"{source}: column {col!r} cannot be read as {dtype}: {exc}") from None
    frame = pd.DataFrame(out, index=df.index)
    extra = [c for c in df.columns if c not in MEASUREMENT_COLUMNS]
    for col in extra:
        frame[col] = df[col]
    return frame.reset_index(drop=True)


def with_added_columns(df: pd.DataFrame) -> pd.DataFrame:
    """`df` with the columns added after its writer (schema.ADDED_COLUMNS) at their dense defaults, where it has
    the columns they derive from."""
    absent = [c for c in ADDED_COLUMNS if c not in df.columns]
    if not absent or "M" not in df.columns:
        return df
    df = df.copy()
    for c in absent:
        df[c] = df["M"] if ADDED_COLUMNS[c] is None else ADDED_COLUMNS[c]
    return df


def rows_to_frame(rows: Iterable[Mapping[str, Any]], source: str = "rows") -> pd.DataFrame:
    """Rows (dicts with the measurement columns) as a validated frame."""
    rows = list(rows)
    if not rows:
        return empty_measurements()
    return validate_frame(pd.DataFrame(rows), source)


# ---------------------------------------------------------------------------------------------------- measurements
def write_points(path: str | Path, rows: Iterable[Mapping[str, Any]] | pd.DataFrame) -> Path:
    """Write measured points to a Parquet (or .csv) file atomically, replacing it."""
    path = Path(path)
    frame = rows if isinstance(rows, pd.DataFrame) else rows_to_frame(rows, str(path))
    frame = validate_frame(frame, str(path))
    if path.suffix == ".csv":
        return atomic_write_bytes(path, frame.to_csv(index=False).encode())
    if path.suffix != ".parquet":
        raise InputError(f"{path}: measurement files end in .parquet or .csv")
    return atomic_write_bytes(path, frame.to_parquet(index=False))


def _json_value(value: Any) -> Any:
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def journal_path(path: str | Path) -> Path:
    """The JSONL journal beside a Parquet output: results.parquet -> results.journal.jsonl."""
    path = Path(path)
    return path.with_name(path.stem + ".journal.jsonl")


def append_journal(path: str | Path, row: Mapping[str, Any]) -> None:
    """Append one point to a JSONL journal, flushed and fsync'ed (survives a kill right after)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({k: _json_value(v) for k, v in row.items()}, allow_nan=False)
    with store_lock(path), open(path, "a", encoding="utf-8") as fh:  # never between a fold's read and its unlink
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_journal(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a JSONL journal; a torn last line (killed mid-write) is dropped."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise InputError(f"{path}: line {i + 1} is not valid JSON") from None
    return rows


def fold_journal(path: str | Path, supersede: bool = False) -> pd.DataFrame:
    """Merge the journal beside `path` into `path` (Parquet), remove the journal, return all rows.

    Rows of the same point (POINT_KEY) keep the latest. `supersede` (`workbench profile --remeasure`): the journal's
    rows also replace the file's rows of their points measured on another GPU of the same kind (`gpu_key`; a GPU
    outside the catalogue: its UUID alone). The read-merge-write runs under the journal's store lock, so a row
    appended or written by another process is re-read, never dropped.
    """
    path = Path(path)
    jpath = journal_path(path)
    with store_lock(jpath):
        return _fold_locked(path, jpath, supersede)


def _kind_keys(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """Each row's point with its GPU kind in place of its UUID (`fold_journal(supersede=True)`)."""
    key = frame["gpu_key"].astype(str)
    kind = key.where(key != "", frame["gpu_uuid"].astype(str))
    return list(zip(kind, *(frame[c] for c in POINT_KEY[1:]), strict=True))


def _fold_locked(path: Path, jpath: Path, supersede: bool = False) -> pd.DataFrame:
    frames = []
    if path.exists():
        frames.append(read_measurement_file(path))
    journal = read_journal(jpath)
    if journal:
        new = rows_to_frame(journal, str(jpath))
        if supersede and frames:
            replaced = set(_kind_keys(new))
            frames[0] = frames[0][[k not in replaced for k in _kind_keys(frames[0])]]
        frames.append(new)
    frame = pd.concat(frames, ignore_index=True) if frames else empty_measurements()
    frame = frame.drop_duplicates(subset=list(POINT_KEY), keep="last").reset_index(drop=True)
    write_points(path, frame)
    jpath.unlink(missing_ok=True)
    return frame



def read_measurement_file(path: str | Path) -> pd.DataFrame:
    """One Parquet or CSV measurement file, validated."""
    path = Path(path)
    try:
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        elif path.suffix == ".csv":
            df = pd.read_csv(path, keep_default_na=True, dtype={"gpu_uuid": str, "git_commit": str})
        else:
            raise InputError(f"{path}: measurement files end in .parquet or .csv")
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except Exception as exc:  # pyarrow / parser errors: a foreign or corrupt file
        why = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise InputError(f"{path}: not a readable measurement file ({why})") from None
    return validate_frame(df, str(path))


def measurement_files(data_dir_or_files: str | Path | Iterable[str | Path]) -> list[Path]:
    """Files to read: a data dir (its measurements/**), a measurements folder, a file, or a list of these."""
    if isinstance(data_dir_or_files, (str, Path)):
        items = [Path(data_dir_or_files)]
    else:
        items = [Path(p) for p in data_dir_or_files]
    files: list[Path] = []
    for item in items:
        if item.is_dir():
            root = item / "measurements" if (item / "measurements").is_dir() else item
            public = item / PUBLIC_DIR  # a data dir without measurements/: its imported public rows stay out
            files += sorted(p for p in root.rglob("*") if p.suffix in MEASUREMENT_SUFFIXES and p.is_file()
                            and public not in p.parents)
        elif item.is_file():
            files.append(item)
        else:
            raise InputError(f"{item}: no such file or folder")
    return files


def load_measurements(data_dir_or_files: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """All measurement rows under a data dir (data/measurements/**/*.parquet|csv) or in the given files."""
    files = measurement_files(data_dir_or_files)
    frames = [read_measurement_file(f) for f in files]
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_measurements()
    return pd.concat(frames, ignore_index=True)


def read_uploaded(filename: str, content: bytes) -> pd.DataFrame:
    """A measurement file uploaded through the dashboard (bytes of a .parquet or .csv), validated."""
    import io

    suffix = Path(filename).suffix.lower()
    try:
        if suffix == ".parquet":
            df = pd.read_parquet(io.BytesIO(content))
        elif suffix == ".csv":
            df = pd.read_csv(io.BytesIO(content), dtype={"gpu_uuid": str, "git_commit": str})
        else:
            raise InputError(f"{filename}: upload a .parquet or .csv measurement file")
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"{filename}: not a readable measurement file ({type(exc).__name__})") from None
    return validate_frame(df, filename)


# ---------------------------------------------------------------------------------------------------- calibration
CALIBRATION_TOP_KEYS = ("schema_version", "gpu_name", "gpu_key", "gpu_uuid", "timestamp", "sm_clock_hz", "ceilings")


def validate_calibration(data: Any, source: str) -> dict[str, Any]:
    """Check a calibration document (dict) and return it."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: a calibration file holds one JSON object")
    missing = [k for k in CALIBRATION_TOP_KEYS if k not in data]
    if missing:
        raise InputError(f"{source}: not a workbench calibration file (missing keys: {', '.join(missing)})")
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(f"{source}: schema_version must be a positive integer")
    if version > SCHEMA_VERSION:
        raise InputError(
            f"{source}: schema_version {version} is newer than this workbench reads ({SCHEMA_VERSION}); upgrade it"
        )
    ceilings = data["ceilings"]
    if not isinstance(ceilings, dict):
        raise InputError(f"{source}: 'ceilings' must be an object")
    for key, value in ceilings.items():
        if key == "fp8_mma_emulated":
            if not isinstance(value, bool):
                raise InputError(f"{source}: ceilings.fp8_mma_emulated must be true or false")
        elif key in CALIBRATION_CEILINGS and value is not None and not isinstance(value, (int, float)):
            raise InputError(f"{source}: ceilings.{key} must be a number (SI units) or null")
    return data


def read_calibration(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such calibration file") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return validate_calibration(data, str(path))


def calibration_filename(data: Mapping[str, Any]) -> str:
    stem = data.get("gpu_key") or str(data.get("gpu_name", "gpu")).lower().replace(" ", "-")
    uuid = str(data.get("gpu_uuid", "")).removeprefix("GPU-")[:8] or "nouuid"
    return f"{stem}-{uuid}.json"


def write_calibration(path_or_dir: str | Path, data: Mapping[str, Any]) -> Path:
    """Write a calibration document atomically; a folder gets the conventional <gpu>-<uuid8>.json name."""
    data = validate_calibration(dict(data), "calibration")
    path = Path(path_or_dir)
    if path.suffix != ".json":
        path = path / calibration_filename(data)
    text = json.dumps({k: _json_clean(v) for k, v in data.items()}, indent=2, sort_keys=False, allow_nan=False)
    return atomic_write_bytes(path, (text + "\n").encode())


def _json_clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_clean(v) for v in value]
    return _json_value(value)


def load_calibrations(data_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Calibration documents under data_dir/calibration (or data_dir itself), keyed by gpu_key (or gpu_name).

    Where a GPU has several files, the latest timestamp wins.
    """
    root = Path(data_dir)
    folder = root / "calibration" if (root / "calibration").is_dir() else root
    if not folder.is_dir():
        return {}
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        data = read_calibration(path)
        key = data.get("gpu_key") or data["gpu_name"]
        if key not in out or str(data["timestamp"]) >= str(out[key]["timestamp"]):
            out[key] = data
    return out
