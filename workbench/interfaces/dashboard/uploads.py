"""Uploaded measurement files: type and size checks, value checks naming the column and row, the session registry
key's source tag, and the spreadsheet-safe CSV cell escaping used by downloads.

An upload never replaces shipped points: its kernels are renamed "<kernel> @<file>" so the views, the table and the
CSV show them beside the shipped ones, with their source named. Bytes are only decoded and parsed as Parquet/CSV.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from models.errors import InputError

MB = 1_000_000  # one MB unit everywhere on the page: 10^6 bytes
UPLOAD_LIMIT_MB = 20
UPLOAD_LIMIT_BYTES = UPLOAD_LIMIT_MB * MB
SUFFIXES = (".parquet", ".csv")
ACCEPTED = f".parquet or .csv measurement file of at most {UPLOAD_LIMIT_MB} MB"
SOURCE_MARK = " @"
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

# column -> (low exclusive, high inclusive, what the value is, unit); NaN is refused in these
REQUIRED_RANGES: dict[str, tuple[float, float, str]] = {
    "M": (0, 65536, "a batch size"),
    "N": (0, 1 << 20, "a matrix dimension"),
    "K": (0, 1 << 20, "a matrix dimension"),
    "bytes": (0, 1e13, "a byte count"),
    "flops": (0, 1e17, "a FLOP count"),
    "time_median_s": (0, 60.0, "a time in seconds"),
    "time_p10_s": (0, 60.0, "a time in seconds"),
    "time_p90_s": (0, 60.0, "a time in seconds"),
    "time_min_s": (0, 60.0, "a time in seconds"),
    "time_mean_s": (0, 60.0, "a time in seconds"),
}
# columns that may be missing (NaN: no NVML, no reference) but must otherwise be finite and within range
OPTIONAL_RANGES: dict[str, tuple[float, float, str]] = {
    "time_single_call_s": (0, 60.0, "a time in seconds"),
    "spread_rel": (-1e-12, 1e3, "a relative spread"),
    "sm_clock_min_hz": (0, 1e10, "a clock in Hz"),
    "sm_clock_median_hz": (0, 1e10, "a clock in Hz"),
    "mem_clock_median_hz": (0, 1e11, "a clock in Hz"),
    "power_median_w": (0, 1e5, "a power in W"),
    "temperature_max_c": (-100, 200, "a temperature in °C"),
    "ref_error_rel": (-1e-12, 1e6, "a relative error"),
    "quant_error_rel": (-1e-12, 1e6, "a relative error"),
}
COMPARISON_MARKERS = ("time_measured_s", "ratio_datasheet", "time_datasheet_s")


def check_name(filename: str) -> None:
    suffix = Path(filename).suffix.lower()
    if suffix not in SUFFIXES:
        shown = suffix or "no extension"
        raise InputError(f"{filename}: unsupported file type ({shown}); upload a {ACCEPTED}")


def _header(filename: str, content: bytes) -> list[str]:
    try:
        if filename.lower().endswith(".csv"):
            return content[:65536].decode("utf-8", "replace").splitlines()[0].split(",")
        import io

        import pyarrow.parquet as pq

        return list(pq.read_schema(io.BytesIO(content)).names)
    except Exception:  # noqa: BLE001 - an unreadable header just means "not an export of ours"
        return []


def read_measurements(filename: str, content: bytes) -> pd.DataFrame:
    """The measurement rows of an uploaded file, or InputError with one sentence saying what is wrong."""
    from workbench.storage.store import read_uploaded

    check_name(filename)
    if len(content) > UPLOAD_LIMIT_BYTES:
        raise InputError(f"{filename}: {len(content) / MB:.1f} MB is over the {UPLOAD_LIMIT_MB} MB upload limit")
    try:
        frame = read_uploaded(filename, content)
    except InputError as exc:
        header = {c.strip().strip('"') for c in _header(filename, content)}
        if "missing columns" in str(exc) and header & set(COMPARISON_MARKERS):
            raise InputError(
                f"{filename} is a comparison exported by this dashboard (measured times joined with predictions), "
                "not a measurement file; upload the profiler's file from data/measurements/ instead"
            ) from None
        raise
    if frame.empty:
        raise InputError(f"{filename}: the file holds no measured points")
    check_values(frame, filename)
    return frame


def _first_bad(values: np.ndarray, low: float, high: float, required: bool) -> int | None:
    with np.errstate(invalid="ignore"):
        ok = (values > low) & (values <= high)
    if not required:
        ok |= np.isnan(values)
    bad = np.flatnonzero(~ok)
    return int(bad[0]) if len(bad) else None


def check_values(frame: pd.DataFrame, filename: str) -> None:
    """Refuse non-finite, zero, negative or absurd values, naming the first offending column and data row."""
    for ranges, required in ((REQUIRED_RANGES, True), (OPTIONAL_RANGES, False)):
        for col, (low, high, what) in ranges.items():
            if col not in frame.columns:
                continue
            values = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
            row = _first_bad(values, low, high, required)
            if row is not None:
                lo = "0" if low == 0 else f"{low:g}"
                raw = frame[col].iloc[row]
                shown = str(raw) if frame[col].dtype.kind in "iu" else repr(float(values[row]))
                raise InputError(
                    f"{filename}: column {col!r}, data row {row + 1}: {shown} is not {what} "
                    f"(accepted: a finite value above {lo} and at most {high:g})"
                )
    for col in ("gpu_key", "kernel", "scheme", "mode"):
        text = frame[col].astype("string").fillna("")
        empty = np.flatnonzero((text.str.len() == 0).to_numpy(dtype=bool) | (text.str.len() > 200).to_numpy(bool))
        if len(empty):
            raise InputError(
                f"{filename}: column {col!r}, data row {int(empty[0]) + 1} is empty or longer than 200 characters"
            )


def tag_source(frame: pd.DataFrame, filename: str) -> pd.DataFrame:
    """The frame with every kernel renamed "<kernel> @<file>": uploaded points sit beside the shipped ones."""
    out = frame.copy()
    out["kernel"] = out["kernel"].astype("string") + SOURCE_MARK + Path(filename).name
    return out


@dataclass(frozen=True)
class Upload:
    filename: str
    measurements: pd.DataFrame
    comparison: pd.DataFrame


def escape_formula(series: pd.Series) -> pd.Series:
    """Text cells a spreadsheet would execute (=, +, -, @, tab, CR first) prefixed with a single quote."""
    text = series.astype("string")
    risky = text.str.startswith(FORMULA_PREFIXES).fillna(False).to_numpy(dtype=bool)
    if not risky.any():
        return text
    return text.mask(risky, "'" + text)
