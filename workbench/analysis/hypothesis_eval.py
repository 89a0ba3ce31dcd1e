"""Evaluating hypotheses per GPU, on measured data and separately on predictions, with a noise-aware verdict.

Verdicts: "pass", "fail", "inconclusive". A measured quantity is an interval [low, high] from the p10/p90 spread of
the times behind it (speedup: baseline p10 / kernel p90 .. baseline p90 / kernel p10; bandwidth: bytes / p90 ..
bytes / p10; model error: |predicted / t − 1| over t in [p10, p90]). Against a threshold x:
  ">= x"  pass when low >= x, fail when high < x;   "<= x"  pass when high <= x, fail when low > x;
  "within [a, b]"  pass when a <= low and high <= b, fail when high < a or low > b;
and inconclusive otherwise — so a margin inside the measured noise is never a pass or a fail. Missing data, a
throttled point or a GPU without the calibration a hypothesis needs are inconclusive too. Predictions have no
noise: their interval is the point itself.

A hypothesis spanning several batches or shapes is evaluated at each (an "instance"): it fails when any instance
fails, passes when every instance passes, and is inconclusive otherwise. The row reports the deciding instance's
numbers (the first failing one, else the first inconclusive one, else the one with the smallest margin) and lists
every instance in `evidence`.

Monotonic (non-increasing; non-decreasing mirrors it), over the measured batches in [first, last]: fail when some
step rises decisively (the later low is above the earlier high); pass when no step rises decisively and the
overall change from first to last is decisive (last high < first low, and, with min_drop, last high / first low
<= 1 − min_drop); inconclusive otherwise (e.g. a plateau within the noise). On predictions: fail on any rise, pass
otherwise (and the min_drop must hold).

Crossover: the measured crossover is the interval [crossover_low, crossover_high] of
`workbench.analysis.speedup.crossovers` (a batch not reached within the measured batches counts as +infinity); it is
tested like any interval.
Model error is a measured quantity only: it has no "predicted" row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from workbench.analysis.compare import throttled_mask
from workbench.analysis.speedup import crossovers, pair_speedups, resolve_side


@dataclass(frozen=True)
class Hypothesis:
    """One parsed claim (workbench.analysis.hypotheses parses the TOML into it; this module evaluates it)."""

    id: str
    kind: str
    file: str
    line: int
    claim: str = ""
    a: str = ""
    b: str = ""
    batches: tuple[int, ...] = ()  # speedup / bandwidth / model_error: the batches; monotonic: (first, last)
    op: str = ""
    threshold: tuple[float, ...] = ()  # one number, or (low, high) for "within"; percents stored as fractions
    gpus: tuple[str, ...] = ()
    shapes: tuple[tuple[int, int], ...] = ()
    mode: str = "cold"
    ours_only: bool = False
    tier: str = ""
    stat: str = "median"
    role: str = ""
    trend: str = "non-increasing"
    min_drop: float = 0.0
    model: str = ""  # moe_speedup: the MoE model, its expert layer(s) and routing (workbench.analysis.moe_hypotheses)
    layer: str = ""
    routing: str = ""
    field_lines: dict[str, int] = field(default_factory=dict, compare=False, hash=False)

    def where(self, name: str) -> str:
        """'file: line n' of a field (or of the table when the field is absent)."""
        return f"{self.file}: line {self.field_lines.get(name, self.line)}"

    def threshold_text(self) -> str:
        unit = "%" if self.kind in ("model_error", "bandwidth") else ""
        scale = 100.0 if unit else 1.0
        if self.op == "within":
            return f"within [{self.threshold[0] * scale:g}, {self.threshold[1] * scale:g}]{unit}"
        if self.kind == "monotonic":
            drop = f", drop >= {self.min_drop * 100:g}%" if self.min_drop else ""
            return f"{self.trend} over M {self.batches[0]}..{self.batches[1]}{drop}"
        return f"{self.op} {self.threshold[0] * scale:g}{unit}"


RESULT_COLUMNS = (
    "id", "kind", "claim", "gpu_key", "source", "verdict", "value", "low", "high", "threshold", "n", "detail",
    "evidence", "file", "line",
)  # fmt: skip


@dataclass(frozen=True)
class Instance:
    verdict: str
    value: float
    low: float
    high: float
    label: str
    margin: float = math.inf


def decide(low: float, high: float, op: str, threshold: tuple[float, ...]) -> tuple[str, float]:
    """Verdict and signed margin (> 0 on the passing side) of an interval against a threshold (module doc)."""
    if math.isnan(low) or math.isnan(high):
        return "inconclusive", float("nan")
    if op == ">=":
        x = threshold[0]
        verdict = "pass" if low >= x else "fail" if high < x else "inconclusive"
        return verdict, low - x
    if op == "<=":
        x = threshold[0]
        verdict = "pass" if high <= x else "fail" if low > x else "inconclusive"
        return verdict, x - high
    a, b = threshold
    if low >= a and high <= b:
        return "pass", min(low - a, b - high)
    if high < a or low > b:
        return "fail", -max(a - high, low - b)
    return "inconclusive", 0.0


def _fmt(x: float) -> str:
    return "inf" if np.isinf(x) else "nan" if not np.isfinite(x) else f"{x:.4g}"


def format_number(x: float, unit: str = "") -> str:
    """A verdict number for tables: 4 significant digits, "—" when missing, "∞" for no crossover in range."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if np.isinf(x):
        return "∞"
    return f"{x:.4g}{unit}"


def _instance(low: float, value: float, high: float, h: Hypothesis, label: str, scale: float = 1.0) -> Instance:
    verdict, margin = decide(low, high, h.op, h.threshold)
    shown = (
        f"{_fmt(value * scale)}"
        if low == high
        else f"{_fmt(value * scale)} [{_fmt(low * scale)}, {_fmt(high * scale)}]"
    )
    return Instance(verdict, value, low, high, f"{label}: {shown}", margin)


def _missing(label: str, why: str) -> Instance:
    return Instance("inconclusive", float("nan"), float("nan"), float("nan"), f"{label}: {why}", float("nan"))


def _shape_label(n: int, k: int) -> str:
    return f"{int(n)}x{int(k)}" if n else "(no shape measured for both sides)"


def _scoped(comparison: pd.DataFrame, h: Hypothesis, gpu: str) -> pd.DataFrame:
    df = comparison[(comparison["gpu_key"] == gpu) & (comparison["mode"] == h.mode)]
    if h.shapes:
        keep = np.zeros(len(df), dtype=bool)
        for n, k in h.shapes:
            keep |= (df["N"].to_numpy() == n) & (df["K"].to_numpy() == k)
        df = df[keep]
    return df


def _shapes_of(table: pd.DataFrame, h: Hypothesis) -> list[tuple[int, int]]:
    present = sorted({(int(n), int(k)) for n, k in zip(table["N"], table["K"], strict=True)})
    return list(h.shapes) if h.shapes else present


# ---------------------------------------------------------------------------------------------------- per kind
def _speedup(h: Hypothesis, df: pd.DataFrame, source: str) -> list[Instance]:
    table = pair_speedups(df, h.a, h.b, ours_only=h.ours_only)
    out = []
    for n, k in _shapes_of(table, h) or [(0, 0)]:
        for m in h.batches:
            label = f"{_shape_label(n, k)} M={m}"
            row = table[(table["N"] == n) & (table["K"] == k) & (table["M"] == m)]
            if row.empty:
                out.append(_missing(label, "not measured for both sides"))
                continue
            r = row.iloc[0]
            if source == "predicted":
                v = float(r["speedup_predicted"])
                out.append(_instance(v, v, v, h, label))
            elif bool(r["throttled"]):
                out.append(_missing(label, "throttled"))
            else:
                out.append(
                    _instance(float(r["speedup_low"]), float(r["speedup_measured"]), float(r["speedup_high"]), h, label)
                )
    return out


def _monotonic(h: Hypothesis, df: pd.DataFrame, source: str) -> list[Instance]:
    table = pair_speedups(df, h.a, h.b, ours_only=h.ours_only)
    first, last = h.batches
    out = []
    for n, k in _shapes_of(table, h) or [(0, 0)]:
        label = f"{_shape_label(n, k)} M={first}..{last}"
        g = table[(table["N"] == n) & (table["K"] == k) & (table["M"] >= first) & (table["M"] <= last)]
        g = g.sort_values("M")
        if len(g) < 2 or g["M"].iloc[0] != first or g["M"].iloc[-1] != last:
            out.append(_missing(label, "first or last batch not measured for both sides"))
            continue
        if source == "measured" and bool(np.asarray(g["throttled"], dtype=bool).any()):
            out.append(_missing(label, "throttled point in range"))
            continue
        out.append(_trend_instance(h, g, source, label))
    return out


def _trend_instance(h: Hypothesis, g: pd.DataFrame, source: str, label: str) -> Instance:
    """The monotonic rule of the module docstring on one shape's speedups, sorted by batch."""
    if source == "predicted":
        mid = g["speedup_predicted"].to_numpy(dtype="float64")
        low = high = mid
    else:
        mid = g["speedup_measured"].to_numpy(dtype="float64")
        low, high = g["speedup_low"].to_numpy(dtype="float64"), g["speedup_high"].to_numpy(dtype="float64")
    if h.trend == "non-decreasing":  # mirror: a decreasing speedup is a non-increasing inverse
        mid, low, high = 1.0 / mid, 1.0 / high, 1.0 / low
    tol = 1e-9  # predictions: equal within rounding is not a rise
    rises = low[1:] > high[:-1] * (1 + tol)
    overall = bool(high[-1] < low[0]) if source == "measured" else True
    ratio = (low[-1] / high[0], mid[-1] / mid[0], high[-1] / low[0])  # best case, median, worst case of last/first
    limit = 1.0 - h.min_drop
    if rises.any() or (h.min_drop and ratio[0] > limit):
        verdict = "fail"
    elif overall and (not h.min_drop or ratio[2] <= limit):
        verdict = "pass"
    else:
        verdict = "inconclusive"
    shown = mid if h.trend == "non-increasing" else 1.0 / mid
    steps = " → ".join(_fmt(v) for v in shown)
    return Instance(verdict, ratio[1], ratio[0], ratio[2], f"{label}: {steps} (last/first {_fmt(ratio[1])})",
                    limit - ratio[2])  # fmt: skip


def _crossover(h: Hypothesis, df: pd.DataFrame, source: str) -> list[Instance]:
    table = crossovers(pair_speedups(df, h.a, h.b, ours_only=h.ours_only))
    out = []
    for n, k in _shapes_of(table, h) or [(0, 0)]:
        label = _shape_label(n, k)
        row = table[(table["N"] == n) & (table["K"] == k)]
        if row.empty:
            out.append(_missing(label, "not measured for both sides"))
            continue
        r = row.iloc[0]

        def inf(x: float) -> float:
            return math.inf if not np.isfinite(x) else float(x)

        if source == "predicted":
            v = inf(r["crossover_predicted"])
            out.append(_instance(v, v, v, h, f"{label} (batches ≤ {r['max_batch']})"))
        elif bool(r["throttled"]):
            out.append(_missing(label, "throttled point"))
        else:
            lo, mid, hi = inf(r["crossover_low"]), inf(r["crossover_measured"]), inf(r["crossover_high"])
            out.append(_instance(lo, mid, hi, h, f"{label} (batches ≤ {r['max_batch']})"))
    return out


def _bandwidth(h: Hypothesis, df: pd.DataFrame, source: str) -> list[Instance]:
    rows = resolve_side(df, h.a, ours_only=h.ours_only) if len(df) else df
    out = []
    for n, k in _shapes_of(rows, h) or [(0, 0)]:
        for m in h.batches:
            label = f"{_shape_label(n, k)} M={m}"
            row = rows[(rows["N"] == n) & (rows["K"] == k) & (rows["M"] == m)] if len(rows) else rows
            if row.empty:
                out.append(_missing(label, "not measured"))
                continue
            r = row.iloc[0]
            if r["bandwidth_ceiling_source"] != "calibrated":
                out.append(_missing(label, "no calibration for this GPU"))
                continue
            ceiling = float(r["bandwidth_ceiling_bytes_per_s"])
            if source == "predicted":
                t = next((float(r[c]) for c in ("time_floor_s", "time_calibrated_s") if np.isfinite(r[c])), math.nan)
                v = float(r["bytes"]) / t / ceiling
                out.append(_instance(v, v, v, h, label, 100.0))
            elif bool(throttled_mask(row).iloc[0]):
                out.append(_missing(label, "throttled"))
            else:
                b = float(r["bytes"]) / ceiling
                t, p10, p90 = (float(r[c]) for c in ("time_measured_s", "time_p10_s", "time_p90_s"))
                p10, p90 = (p10 if np.isfinite(p10) else t), (p90 if np.isfinite(p90) else t)
                out.append(_instance(b / p90, b / t, b / p10, h, label, 100.0))
    return out


def abs_error_interval(pred: np.ndarray, t: np.ndarray, p10: np.ndarray, p90: np.ndarray) -> tuple[np.ndarray, ...]:
    """|pred / t − 1| at the median, and its least and greatest value for a measured time in [p10, p90]."""
    p10, p90 = np.where(np.isfinite(p10), p10, t), np.where(np.isfinite(p90), p90, t)
    at10, at90 = np.abs(pred / p10 - 1.0), np.abs(pred / p90 - 1.0)
    inside = (pred >= p10) & (pred <= p90)
    return np.abs(pred / t - 1.0), np.where(inside, 0.0, np.minimum(at10, at90)), np.maximum(at10, at90)


def _stat(values: np.ndarray, stat: str) -> float:
    if stat == "median":
        return float(np.median(values))
    if stat == "p90":
        return float(np.percentile(values, 90))
    return float(values.max())


def _model_error(h: Hypothesis, df: pd.DataFrame, source: str) -> list[Instance]:
    if source != "measured":
        return []
    if h.a:
        df = df[(df["scheme"] == h.a) | (df["kernel"] == h.a)]
    if h.role:
        df = df[df["role"] == h.role]
    if h.batches:
        df = df[df["M"].isin(list(h.batches))]
    n_thr = int(throttled_mask(df).sum())
    df = df[~throttled_mask(df).to_numpy(dtype=bool)]
    pred = df[f"time_{h.tier}_s"].to_numpy(dtype="float64")
    keep = np.isfinite(pred)
    label = f"{h.stat} |error| of the {h.tier} tier over {int(keep.sum())} points ({n_thr} throttled excluded)"
    if not keep.any():
        return [_missing(label, "no predicted points (no calibration?) or no measured points")]
    mid, low, high = abs_error_interval(
        pred[keep], *(df[c].to_numpy(dtype="float64")[keep] for c in ("time_measured_s", "time_p10_s", "time_p90_s"))
    )
    return [_instance(_stat(low, h.stat), _stat(mid, h.stat), _stat(high, h.stat), h, label, 100.0)]


EVALUATORS = {
    "speedup": _speedup,
    "monotonic": _monotonic,
    "crossover": _crossover,
    "bandwidth": _bandwidth,
    "model_error": _model_error,
}


# ---------------------------------------------------------------------------------------------------- combining
def combine(instances: list[Instance]) -> tuple[str, Instance | None]:
    """Overall verdict and deciding instance: any fail fails, all pass passes, else inconclusive."""
    if not instances:
        return "inconclusive", None
    for verdict in ("fail", "inconclusive"):
        hits = [i for i in instances if i.verdict == verdict]
        if hits:
            return verdict, hits[0]
    return "pass", min(instances, key=lambda i: i.margin if np.isfinite(i.margin) else math.inf)


def _result(h: Hypothesis, gpu: str, source: str, instances: list[Instance], why: str = "") -> dict:
    verdict, deciding = combine(instances)
    scale = 100.0 if h.kind in ("model_error", "bandwidth") else 1.0
    return {
        "id": h.id,
        "kind": h.kind,
        "claim": h.claim,
        "gpu_key": gpu,
        "source": source,
        "verdict": verdict,
        "value": deciding.value * scale if deciding else math.nan,
        "low": deciding.low * scale if deciding else math.nan,
        "high": deciding.high * scale if deciding else math.nan,
        "threshold": h.threshold_text(),
        "n": len(instances),
        "detail": deciding.label if deciding else why,
        "evidence": "; ".join(i.label for i in instances) or why,
        "file": h.file,
        "line": h.line,
    }


def evaluate_hypotheses(
    hypotheses: Iterable[Hypothesis], comparison: pd.DataFrame, *, sources: tuple[str, ...] = ("measured", "predicted"),
    moe_rows: pd.DataFrame | None = None, calibrations: Any = None,
) -> pd.DataFrame:
    """One row per (hypothesis, GPU, source) with RESULT_COLUMNS; values of model_error / bandwidth in percent.
    moe_speedup hypotheses read `moe_rows` (workbench.analysis.moe_tier.measured_rows) and the kernel tier."""
    rows = []
    all_gpus = sorted(set(comparison["gpu_key"].astype(str))) if len(comparison) else []
    for h in hypotheses:
        if h.kind == "moe_speedup":
            from workbench.analysis import moe_hypotheses

            have = sorted(set(moe_rows["gpu"].astype(str))) if moe_rows is not None and len(moe_rows) else []
            for gpu in moe_hypotheses.gpus_for(h, sorted(set(all_gpus) | set(have))):
                rows += [_result(h, gpu, s, moe_hypotheses.evaluate(h, gpu, s, moe_rows, calibrations))
                         for s in sources]
            continue
        gpus = [g for g in all_gpus if not h.gpus or g in h.gpus] or list(h.gpus)
        for gpu in gpus or [""]:
            df = _scoped(comparison, h, gpu) if len(comparison) else comparison
            for source in sources:
                if h.kind == "model_error" and source != "measured":
                    continue
                if df.empty:
                    rows.append(_result(h, gpu, source, [], "no measured data for this GPU"))
                    continue
                rows.append(_result(h, gpu, source, EVALUATORS[h.kind](h, df, source)))
    return pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
