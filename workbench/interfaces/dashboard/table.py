"""The data table: comparison rows (or, for GPUs with no measurements, prediction rows) in human units, with
server-side filtering, sorting and paging, and the CSV of exactly those rows in raw SI units.

The table shows numbers scaled to the unit in the column header (µs, GB/s, TFLOP/s, MHz); filters and sorting work on
those shown values; the CSV writes the same rows, in the same order, with every raw column at full precision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.interfaces.dashboard.data import TIER_COLUMNS as TIERS
from workbench.interfaces.dashboard.data import DashboardData, Frames
from workbench.interfaces.dashboard.queries import Selection, select_measured, select_predicted

# (column id, header, source column, scale, decimals); decimals None = text / integer
Column = tuple[str, str, str, float, int | None]
_TIER_HEADERS = {"datasheet": "pred. datasheet (µs)", "calibrated": "pred. calibrated (µs)",
                 "floor": "pred. cal.+floor (µs)", "kernel": "pred. kernel-aware (µs)"}  # fmt: skip
_TIER_IDS = {"datasheet": "t_sheet_us", "calibrated": "t_cal_us", "floor": "t_floor_us"}
TIER_TIME_COLUMNS: tuple[Column, ...] = tuple(
    (_TIER_IDS.get(t, f"t_{t}_us"), _TIER_HEADERS.get(t, f"pred. {t} (µs)"), col, 1e6, 2) for t, col in TIERS.items()
)
MEASURED_COLUMNS: tuple[Column, ...] = (
    ("gpu_key", "GPU", "gpu_key", 1.0, None),
    ("kernel", "kernel", "kernel", 1.0, None),
    ("scheme", "scheme", "scheme", 1.0, None),
    ("role", "role", "role", 1.0, None),
    ("M", "M", "M", 1.0, None),
    ("N", "N", "N", 1.0, None),
    ("K", "K", "K", 1.0, None),
    ("mode", "cache", "mode", 1.0, None),
    ("t_meas_us", "measured (µs)", "time_measured_s", 1e6, 2),
    ("t_p10_us", "p10 (µs)", "time_p10_s", 1e6, 2),
    ("t_p90_us", "p90 (µs)", "time_p90_s", 1e6, 2),
    *TIER_TIME_COLUMNS,
    *(("r_" + t, f"pred/meas {t}", "ratio_" + t, 1.0, 3) for t in TIERS),
    ("bw_gbs", "achieved (GB/s)", "achieved_bytes_per_s", 1e-9, 1),
    ("tflops", "achieved (TFLOP/s)", "achieved_flops_per_s", 1e-12, 3),
    ("roof_pct", "of roofline (%)", "roofline_fraction", 100.0, 1),
    ("bound", "bound (datasheet)", "bound_datasheet", 1.0, None),
    ("sm_mhz", "SM clock (MHz)", "sm_clock_median_hz", 1e-6, 0),
    ("throttled", "throttled", "throttled", 1.0, None),
    ("ref_err", "kernel error (rel.)", "ref_error_rel", 1.0, 8),
)
PREDICTED_COLUMNS: tuple[Column, ...] = (
    ("gpu_key", "GPU", "gpu_key", 1.0, None),
    ("scheme", "scheme", "scheme", 1.0, None),
    ("M", "M", "M", 1.0, None),
    ("N", "N", "N", 1.0, None),
    ("K", "K", "K", 1.0, None),
    ("traffic_mb", "traffic (MB)", "bytes", 1e-6, 3),
    ("gflop", "work (GFLOP)", "flops", 1e-9, 4),
    ("intensity", "intensity (FLOP/B)", "intensity", 1.0, 3),
    *TIER_TIME_COLUMNS,
    ("tflops", "attainable (TFLOP/s)", "attainable_flops", 1e-12, 3),
    ("bound", "bound (datasheet)", "bound_datasheet", 1.0, None),
    ("unit", "compute unit used", "compute_unit_used", 1.0, None),
)
RAW_PREDICTED = ("gpu_key", "scheme", "M", "N", "K", "bytes", "flops", "intensity", *TIERS.values(),
                 "bound_datasheet", "bound_calibrated", "attainable_flops", "compute_unit_used", "ridge")  # fmt: skip
GRID_ROW_LIMIT = 5000  # rows sent to the browser's grid; the CSV always holds every row

_FILTER = re.compile(
    r"^\{(?P<col>[^}]+)\}\s+(?P<op>s?(?:<=|>=|!=|<|>|=)|eq|ne|lt|le|gt|ge|[is]?contains|datestartswith)\s+(?P<val>.+)$"
)
_OPS = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@dataclass(frozen=True)
class TableRows:
    """The rows the table shows (all pages), their raw SI rows in the same order, and what the columns are."""

    shown: pd.DataFrame  # display columns (ids of `columns`)
    raw: pd.DataFrame  # SI rows for the CSV
    columns: tuple[Column, ...]
    source: str  # "measured" | "predicted"
    ignored: tuple[str, ...] = ()  # filter clauses that were not understood


def _display(raw: pd.DataFrame, columns: tuple[Column, ...]) -> pd.DataFrame:
    out = {}
    for cid, _, src, scale, decimals in columns:
        if src not in raw.columns:
            out[cid] = pd.Series([None] * len(raw), index=raw.index)
        elif decimals is None:
            series = raw[src]
            out[cid] = series if series.dtype.kind in "iu" else series.astype("string").fillna("")
        else:
            out[cid] = (raw[src].astype("float64") * scale).round(decimals)
    return pd.DataFrame(out, index=raw.index)


def _value(text: str) -> str | float:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1]
    try:
        return float(text)
    except ValueError:
        return text


def apply_filter(shown: pd.DataFrame, query: str | None) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Apply a DataTable filter_query ("{col} op value && ..."); clauses not understood are returned, not applied."""
    if not query:
        return shown, ()
    mask = np.ones(len(shown), dtype=bool)
    ignored = []
    for clause in query.split(" && "):
        match = _FILTER.match(clause.strip())
        if not match or match["col"] not in shown.columns:
            ignored.append(clause.strip())
            continue
        column, op, value = shown[match["col"]], match["op"].lstrip("s"), _value(match["val"])
        op = _OPS.get(op, op)
        if op.endswith("contains") or op == "datestartswith" or (isinstance(value, str) and op in ("=", "!=")):
            text = column.astype("string").fillna("").str.lower()
            hit = text.str.contains(str(value).lower(), regex=False) if op != "=" else text == str(value).lower()
            hit = ~hit if op == "!=" else hit
            mask &= hit.to_numpy(dtype=bool)
            continue
        if isinstance(value, str) or column.dtype.kind not in "iuf":
            ignored.append(clause.strip())
            continue
        values = column.to_numpy(dtype="float64")
        with np.errstate(invalid="ignore"):
            mask &= {
                "=": values == value,
                "!=": values != value,
                "<": values < value,
                "<=": values <= value,
                ">": values > value,
                ">=": values >= value,
            }[op]
    return shown[mask], tuple(ignored)


def apply_sort(shown: pd.DataFrame, sort_by: list[dict] | None) -> pd.DataFrame:
    keys = [s for s in (sort_by or []) if s.get("column_id") in shown.columns]
    if not keys:
        return shown
    return shown.sort_values(
        [s["column_id"] for s in keys],
        ascending=[s.get("direction", "asc") == "asc" for s in keys],
        kind="stable",
        na_position="last",
    )


def table_rows(
    data: DashboardData, frames: Frames, sel: Selection, filter_query: str | None, sort_by: list[dict] | None
) -> TableRows:
    """Comparison rows of every selected GPU in the selection; prediction rows when none of them was measured."""
    raw = select_measured(frames.comparison, data, sel, sel.gpus, frames.rows("comparison"))
    columns, source = MEASURED_COLUMNS, "measured"
    if raw.empty:
        parts = [select_predicted(data, sel, gpu) for gpu in sel.gpus]
        raw = pd.concat([p for p in parts if not p.empty] or [pd.DataFrame(columns=list(RAW_PREDICTED))])
        raw = raw[[c for c in RAW_PREDICTED if c in raw.columns]]
        columns, source = PREDICTED_COLUMNS, "predicted"
    raw = raw.reset_index(drop=True)
    columns = tuple(c for c in columns if c[2] in raw.columns or c[2] in ("role", "throttled"))
    shown, ignored = apply_filter(_display(raw, columns), filter_query)
    shown = apply_sort(shown, sort_by)
    return TableRows(shown, raw.loc[shown.index], columns, source, ignored)


def grid_columns(columns: tuple[Column, ...]) -> list[dict]:
    """AG Grid column definitions: numeric columns right-aligned with a number filter, headers carry the unit."""
    specs = []
    for cid, header, _, _, decimals in columns:
        numeric = decimals is not None or cid in ("M", "N", "K")
        kind = "agNumberColumnFilter" if numeric else "agTextColumnFilter"
        spec = {"field": cid, "headerName": header, "filter": kind}
        if numeric:
            spec["type"] = "rightAligned"
        if cid in ("gpu_key", "kernel"):
            spec["pinned"] = "left"
        specs.append(spec)
    return specs


def hypothesis_columns(names: list[str]) -> list[dict]:
    """Column definitions of the hypotheses grid: the claim and detail wrap, the verdict is coloured."""
    verdict_style = {"styleConditions": [
        {"condition": f"params.value == '{v}'", "style": {"backgroundColor": c}}
        for v, c in (("pass", "#dcfce7"), ("fail", "#fee2e2"), ("inconclusive", "#fef9c3"))
    ]}  # fmt: skip
    specs = []
    for name in names:
        spec: dict = {"field": name, "headerName": name}
        if name in ("claim", "detail"):
            spec.update(wrapText=True, autoHeight=True, minWidth=320, flex=1)
        if name == "verdict":
            spec["cellStyle"] = verdict_style
        specs.append(spec)
    return specs


def records(rows: TableRows, limit: int = GRID_ROW_LIMIT) -> list[dict]:
    """The grid's rows (display values, None for missing), at most `limit`."""
    part = rows.shown.iloc[:limit]
    return part.astype(object).where(part.notna(), None).to_dict("records")


_AG_OPS = {"equals": "=", "notEqual": "!=", "lessThan": "<", "lessThanOrEqual": "<=", "greaterThan": ">",
           "greaterThanOrEqual": ">=", "contains": "contains"}  # fmt: skip


def grid_filter(model: object) -> tuple[str, tuple[str, ...]]:
    """An AG Grid filterModel as this module's filter query ("{col} op value && ..."); conditions it cannot express
    (combined conditions, blanks, ranges) are returned as ignored."""
    if not isinstance(model, dict):
        return "", ()
    clauses, ignored = [], []
    for col, spec in model.items():
        if not isinstance(col, str) or not isinstance(spec, dict) or not re.fullmatch(r"[A-Za-z0-9_]{1,40}", col):
            ignored.append(str(col)[:40])
            continue
        op, value = _AG_OPS.get(spec.get("type")), spec.get("filter")
        if op is None or isinstance(value, bool) or not isinstance(value, str | int | float):
            ignored.append(col)
            continue
        text = f'"{value}"' if isinstance(value, str) and op in ("=", "!=") else str(value)
        clauses.append(f"{{{col}}} {op} {text}")
    return " && ".join(clauses), tuple(ignored)


def grid_sort(column_state: object) -> list[dict]:
    """AG Grid columnState (sort, sortIndex per column) as [{column_id, direction}] in sort order."""
    if not isinstance(column_state, list):
        return []
    keyed = [c for c in column_state if isinstance(c, dict) and c.get("sort") in ("asc", "desc")
             and isinstance(c.get("colId"), str)]  # fmt: skip
    keyed.sort(key=lambda c: c.get("sortIndex") if isinstance(c.get("sortIndex"), int) else 0)
    return [{"column_id": c["colId"], "direction": c["sort"]} for c in keyed]


def to_csv(rows: TableRows) -> str:
    """The raw SI rows of the table (all pages, table order); floats written as their shortest round-trip repr;
    text cells that start like a spreadsheet formula (=, +, -, @) are prefixed with a single quote.

    Written with pyarrow's CSV writer (~8× faster than pandas at 10⁴ rows, the same values on reading back).
    """
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    from workbench.interfaces.dashboard.uploads import escape_formula

    raw = rows.raw.copy()
    for col in raw.columns:
        if isinstance(raw[col].dtype, pd.CategoricalDtype) or raw[col].dtype in (object, "string"):
            raw[col] = escape_formula(raw[col])  # text a spreadsheet would execute starts with a quote
    buffer = io.BytesIO()
    options = pacsv.WriteOptions(quoting_style="needed", include_header=False)
    pacsv.write_csv(pa.Table.from_pandas(raw, preserve_index=False), buffer, options)
    return ",".join(raw.columns) + "\n" + buffer.getvalue().decode()  # schema column names need no quoting
