"""Speedup hypotheses: a small declarative TOML format (`data/hypotheses/*.toml`), its parser and validator.

Public API (stable): `load_hypotheses(paths) -> list[Hypothesis]`, `check_against_data(hypotheses, comparison)`,
`evaluate_all(hypotheses, comparison, *, sources=("measured", "predicted")) -> DataFrame`, `default_files(data_dir)`.
`Hypothesis` (the parsed claim) and the evaluation live in `workbench.analysis.hypothesis_eval`, which owns the type;
this module imports it (re-exported here), never the other way.

Format: one `[[hypothesis]]` table per claim.

    [[hypothesis]]
    id = "w4a16-small-batch"            # required, unique across the files loaded together
    claim = "W4A16 is ~3-4x faster than BF16 at batch 1 and 4"   # free text, shown in the report
    kind = "speedup"                    # speedup | monotonic | crossover | model_error | bandwidth
    a = "w4a16"                         # a scheme (its fastest measured kernel at each point) or a kernel name
    b = "bf16"                          # the baseline, same rules
    batch = [1, 4]                      # one batch or a list; every batch must have been measured
    op = "within"                       # ">=", "<=" or "within"
    value = [3.0, 4.0]                  # a number, or [low, high] for "within"
    # optional everywhere: gpu = "h200-sxm" (or a list), shape = "22016x4096" (or a list; default every shape
    # measured for both sides), mode = "cold" (default) | "hot", kernels = "all" (default) | "ours" (role != peer)

Kinds and their fields (required unless marked optional):
- speedup:     a, b, batch, op, value — speedup of a over b at each batch (and shape).
- monotonic:   a, b, batches = [first, last], optional trend = "non-increasing" (default) | "non-decreasing",
               optional min_drop (fraction, e.g. 0.25: the speedup at `last` is at most 75% of that at `first`).
- crossover:   a, b, op, value — the crossover batch (first measured M where a is no longer faster than b).
- model_error: tier = datasheet | calibrated | floor, op ("<=" or ">="), percent, optional stat = median (default) |
               p90 | max, optional a (a scheme: all its kernels, or a kernel), role, batch.
- bandwidth:   a, batch, op, percent — achieved bandwidth of a as a percentage of the calibrated read ceiling.
- moe_speedup: model, a, b, batch, op, value, optional layer, routing — a over b on an MoE model's expert layers
               (workbench.analysis.moe_hypotheses).

Each hypothesis is evaluated per GPU on measured data and, separately, on predictions (see hypothesis_eval).
Malformed files raise one-line `InputError`s: "<file>: line <n>: hypothesis '<id>': field '<f>': <what>; <accepted>".
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from models.errors import InputError
from models.roofline import TIERS
from workbench.analysis.hypothesis_eval import Hypothesis, evaluate_hypotheses

KINDS = ("speedup", "monotonic", "crossover", "model_error", "bandwidth", "moe_speedup")
OPS = (">=", "<=", "within")
STATS = ("median", "p90", "max")
TRENDS = ("non-increasing", "non-decreasing")
COMMON_FIELDS = ("id", "claim", "kind", "gpu", "shape", "mode", "kernels")
KIND_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # kind -> (required, optional)
    "speedup": (("a", "b", "batch", "op", "value"), ()),
    "monotonic": (("a", "b", "batches"), ("trend", "min_drop")),
    "crossover": (("a", "b", "op", "value"), ()),
    "model_error": (("tier", "op", "percent"), ("stat", "a", "role", "batch")),
    "bandwidth": (("a", "batch", "op", "percent"), ()),
    "moe_speedup": (("model", "a", "b", "batch", "op", "value"), ("layer", "routing")),  # moe_hypotheses
}
_HEADER = re.compile(r"^\s*\[\[\s*hypothesis\s*\]\]")


# ---------------------------------------------------------------------------------------------------- parsing
def _locate(text: str) -> list[tuple[int, dict[str, int]]]:
    """For each [[hypothesis]] table in order: its header line and the line of each `key =` inside it."""
    tables: list[tuple[int, dict[str, int]]] = []
    current: dict[str, int] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if _HEADER.match(line):
            current = {}
            tables.append((number, current))
        elif re.match(r"^\s*\[[A-Za-z\[]", line):
            current = None  # another table: its keys are not the hypothesis's
        elif current is not None and (m := re.match(r'^\s*([A-Za-z0-9_\-]+|"[^"]+")\s*=', line)):
            current.setdefault(m.group(1).strip('"'), number)
    return tables


def _fail(file: str, line: int, hid: str, name: str, what: str) -> InputError:
    ident = f"hypothesis {hid!r}: " if hid else ""
    return InputError(f"{file}: line {line}: {ident}field {name!r}: {what}")


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _parse_table(table: dict[str, Any], file: str, line: int, lines: dict[str, int]) -> Hypothesis:
    hid = str(table.get("id", "")) if isinstance(table.get("id"), str) else ""

    def fail(name: str, what: str) -> InputError:
        return _fail(file, lines.get(name, line), hid, name, what)

    if "id" not in table:
        raise fail("id", "missing; every hypothesis needs a unique id string")
    if not isinstance(table["id"], str) or not table["id"].strip():
        raise fail("id", "must be a non-empty string")
    kind = table.get("kind")
    if kind is None:
        raise fail("kind", f"missing; one of {', '.join(KINDS)}")
    if kind not in KINDS:
        raise fail("kind", f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    required, optional = KIND_FIELDS[kind]
    for name in required:
        if name not in table:
            raise fail(name, f"missing; a {kind} hypothesis needs {', '.join(required)}")
    allowed = set(COMMON_FIELDS) | set(required) | set(optional)
    for name in table:
        if name not in allowed:
            raise fail(name, f"not a field of a {kind} hypothesis; allowed: {', '.join(sorted(allowed))}")

    def text(name: str, choices: tuple[str, ...] | None = None, default: str = "") -> str:
        value = table.get(name, default)
        if not isinstance(value, str) or (name in table and not value.strip()):
            raise fail(name, "must be a non-empty string")
        if choices is not None and value not in choices:
            raise fail(name, f"{value!r} is not accepted; one of {', '.join(repr(c) for c in choices)}")
        return value

    def batches(name: str) -> tuple[int, ...]:
        values = _as_list(table[name])
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
            raise fail(name, "must be a positive integer batch or a list of them")
        return tuple(values)

    def number(name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail(name, f"{value!r} is not a number")
        return float(value)

    fields: dict[str, Any] = {"claim": text("claim") if "claim" in table else ""}
    if "op" in table:
        fields["op"] = text("op", OPS if kind != "model_error" else (">=", "<="))
    if "value" in table or "percent" in table:
        name = "value" if "value" in table else "percent"
        scale = 0.01 if name == "percent" else 1.0
        raw = table[name]
        if fields["op"] == "within":
            if not isinstance(raw, list) or len(raw) != 2:
                raise fail(name, 'with op = "within" give [low, high]')
            low, high = (number(name, v) * scale for v in raw)
            if low > high:
                raise fail(name, f"low {raw[0]} is above high {raw[1]}")
            fields["threshold"] = (low, high)
        else:
            fields["threshold"] = (number(name, raw) * scale,)
    for side in ("a", "b"):
        if side in table:
            fields[side] = text(side)
    if kind == "monotonic":
        span = batches("batches")
        if len(span) != 2 or span[0] >= span[1]:
            raise fail("batches", "give [first, last] with first < last")
        fields["batches"] = span
        fields["trend"] = text("trend", TRENDS, "non-increasing")
        if "min_drop" in table:
            drop = number("min_drop", table["min_drop"])
            if not 0.0 <= drop < 1.0:
                raise fail("min_drop", f"{drop} is outside [0, 1)")
            fields["min_drop"] = drop
    elif "batch" in table:
        fields["batches"] = batches("batch")
    if kind == "model_error":
        fields["tier"] = text("tier", TIERS)
        fields["stat"] = text("stat", STATS, "median")
        if "role" in table:
            fields["role"] = text("role", ("reference", "ladder", "optimized", "peer"))
    if "gpu" in table:
        fields["gpus"] = tuple(_gpu_keys(table["gpu"], fail))
    if "shape" in table:
        fields["shapes"] = tuple(_shapes(table["shape"], fail))
    if kind == "moe_speedup":
        from workbench.analysis.moe_hypotheses import parse_fields

        fields.update(parse_fields(table, fail))
    fields["mode"] = text("mode", ("cold", "hot"), "cold")
    fields["ours_only"] = text("kernels", ("all", "ours"), "all") == "ours"
    return Hypothesis(id=table["id"], kind=kind, file=file, line=line, field_lines=dict(lines), **fields)


def _gpu_keys(value: Any, fail: Any) -> list[str]:
    from models.hardware import load_gpus

    keys = load_gpus()
    out = []
    for v in _as_list(value):
        if not isinstance(v, str) or v not in keys:
            raise fail("gpu", f"unknown GPU {v!r}; valid: {', '.join(sorted(keys))}")
        out.append(v)
    return out


def _shapes(value: Any, fail: Any) -> list[tuple[int, int]]:
    from models.workloads import parse_shape

    out = []
    for v in _as_list(value):
        try:
            out.append(tuple(parse_shape(str(v))))
        except InputError as exc:
            raise fail("shape", str(exc)) from None
    return out


def parse_text(text: str, file: str = "<hypotheses>") -> list[Hypothesis]:
    """Hypotheses from TOML text (`file` names the source in error messages)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", message)
        line = m.group(1) if m else "?"
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", message).strip() or "invalid TOML"
        raise InputError(f"{file}: line {line}: TOML syntax error: {reason}") from None
    for key in data:
        if key != "hypothesis":
            raise InputError(f"{file}: top-level key {key!r}: not accepted; write [[hypothesis]] tables only")
    tables = data.get("hypothesis", [])
    if not isinstance(tables, list):
        raise InputError(f"{file}: 'hypothesis' must be an array of tables, written [[hypothesis]]")
    located = _locate(text)
    out = []
    for i, table in enumerate(tables):
        line, lines = located[i] if i < len(located) else (1, {})
        out.append(_parse_table(table, file, line, lines))
    return out


def load_hypotheses(paths: str | Path | Iterable[str | Path]) -> list[Hypothesis]:
    """Hypotheses from TOML files (ids must be unique across them)."""
    files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    out: list[Hypothesis] = []
    seen: dict[str, Hypothesis] = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"{path}: no such hypotheses file") from None
        except UnicodeDecodeError:
            raise InputError(f"{path}: not a UTF-8 text file") from None
        for h in parse_text(text, str(path)):
            if h.id in seen:
                raise _fail(h.file, h.line, h.id, "id", f"duplicate id (first at {seen[h.id].where('id')})")
            seen[h.id] = h
            out.append(h)
    return out


def default_files(data_dir: str | Path | None = None) -> list[Path]:
    """The hypothesis files of a data directory (<data_dir>/hypotheses/*.toml) when it holds any, else the shipped
    catalogue's (models.paths.catalogue_dir)."""
    from models.paths import catalogue_dir

    own = sorted((Path(data_dir) / "hypotheses").glob("*.toml")) if data_dir is not None else []
    return own or sorted((catalogue_dir() / "hypotheses").glob("*.toml"))


# ---------------------------------------------------------------------------------------------------- data checks
def known_kernels(comparison: pd.DataFrame) -> set[str]:
    """Kernel names measured in `comparison` plus every registered kernel (from the kernel catalogue)."""
    return _measured_kernels(comparison) | _registered_kernels()


def _measured_kernels(comparison: pd.DataFrame) -> set[str]:
    return set(comparison["kernel"].astype(str)) if len(comparison) else set()


def _registered_kernels() -> set[str]:
    from models.kernel_catalogue import shipped

    return set(shipped())


def check_against_data(hypotheses: Iterable[Hypothesis], comparison: pd.DataFrame) -> None:
    """Reject names that are neither a scheme nor a kernel, and batches that were never measured for a side."""
    from models.schemes import SCHEME_NAMES

    hypotheses = list(hypotheses)
    kernels = _measured_kernels(comparison)
    names = {n for h in hypotheses for n in (h.a, h.b) if n}
    if names - set(SCHEME_NAMES) - kernels:  # only then the kernel catalogue is read
        kernels |= _registered_kernels()
    for h in hypotheses:
        if h.kind == "moe_speedup":  # schemes and models checked when parsed; predicted at any batch
            continue
        for side in ("a", "b"):
            name = getattr(h, side)
            if name and name not in SCHEME_NAMES and name not in kernels:
                raise _fail(
                    h.file, h.field_lines.get(side, h.line), h.id, side,
                    f"{name!r} is neither a scheme ({', '.join(SCHEME_NAMES)}) nor a known kernel",
                )  # fmt: skip
        if not h.batches or comparison.empty:
            continue
        sides = [s for s in (h.a, h.b) if s]
        rows = comparison[comparison["scheme"].isin(sides) | comparison["kernel"].isin(sides)] if sides else comparison
        measured = set(rows["M"].astype(int))
        if not measured:
            continue  # nothing measured for these sides: evaluated as missing data (inconclusive)
        name = "batches" if h.kind == "monotonic" else "batch"
        for m in h.batches:
            if m not in measured:
                raise _fail(
                    h.file, h.field_lines.get(name, h.line), h.id, name,
                    f"batch {m} was not measured; measured batches: {', '.join(map(str, sorted(measured)))}",
                )  # fmt: skip


def evaluate_all(
    hypotheses: Iterable[Hypothesis] | None = None,
    comparison: pd.DataFrame | None = None,
    *,
    sources: Iterable[str] = ("measured", "predicted"),
    data_dir: str | Path | None = None,
    measurements: pd.DataFrame | None = None,
    calibrations: Any = None,
    moe_rows: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Check the hypotheses against the data, then evaluate each per GPU and source (see
    workbench.analysis.hypothesis_eval).

    Either pass `hypotheses` and a `comparison` (from compare_points), or let it load: `hypotheses` default to
    default_files(data_dir), and `comparison` is built from `measurements` and `calibrations`. Returns one row
    per (hypothesis, GPU, source) with `workbench.analysis.hypothesis_eval.RESULT_COLUMNS`.
    """
    if hypotheses is None:
        hypotheses = load_hypotheses(default_files(data_dir))
    if comparison is None:
        from workbench.analysis.compare import compare_points, empty_comparison

        comparison = (
            compare_points(measurements, calibrations=calibrations) if measurements is not None else empty_comparison()
        )
    hypotheses = list(hypotheses)
    check_against_data(hypotheses, comparison)
    if moe_rows is None and measurements is not None:
        from workbench.analysis.moe_tier import measured_rows

        moe_rows = measured_rows(measurements)
    return evaluate_hypotheses(hypotheses, comparison, sources=tuple(sources), moe_rows=moe_rows,
                               calibrations=calibrations)
