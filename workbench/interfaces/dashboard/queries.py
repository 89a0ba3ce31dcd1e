"""What the controls select: the Selection, control options, and row filters over the precomputed frames.

Plain functions over `DashboardData` / `Frames`; no Dash here, so callbacks and tests share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from workbench.interfaces.dashboard.data import TIER_COLUMNS, DashboardData, Frames, RowIndex

MODEL_PREFIX = "model:"
DEFAULT_SCHEMES = ("bf16", "w8a16", "w4a16", "w8a8", "fp8")
DEFAULT_SHAPE = "22016x4096"
DEFAULT_BASELINE_KERNEL = "cublas_bf16"
COMPARE_WITH = "h100-sxm"
KERNEL_TIER = "kernel"
MAX_BATCH = 4096  # the largest batch a control accepts
DEFAULT_MAX_BATCH = 256
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class Selection:
    """The controls' values, validated: GPUs and the primary one drawn by the single-GPU views, schemes, kernels
    (empty = all), whether measured points are the best kernel per scheme or every kernel, one shape "NxK" or
    "model:<key>", batch range (batch sizes), baseline kernel or scheme, prediction tier and cache mode."""

    gpus: tuple[str, ...]
    schemes: tuple[str, ...]
    kernels: tuple[str, ...]
    shape: str
    m_lo: int
    m_hi: int
    baseline: str
    tier: str
    mode: str
    chosen_primary: str = ""
    best: bool = True

    @property
    def primary(self) -> str:
        if self.chosen_primary in self.gpus:
            return self.chosen_primary
        return self.gpus[0] if self.gpus else ""

    @property
    def model(self) -> str:
        return self.shape[len(MODEL_PREFIX) :] if self.shape.startswith(MODEL_PREFIX) else ""


@dataclass(frozen=True)
class Defaults:
    gpus: tuple[str, ...]
    schemes: tuple[str, ...]
    shape: str
    baseline: str
    tier: str
    mode: str


def shape_value(n: int, k: int) -> str:
    return f"{n}x{k}"


def default_selection(data: DashboardData) -> Defaults:
    """Start on a measured GPU if there is one (else the first in the catalogue), on the most-measured shape.
    Computed once per dataset."""
    cached = data.__dict__.get("_defaults")
    if cached is None:
        cached = data.__dict__["_defaults"] = _defaults(data)
    return cached


def _defaults(data: DashboardData) -> Defaults:
    cmp = data.comparison
    if not cmp.empty:
        counts = cmp.groupby("gpu_key", observed=True).size()
        gpus = (str(max(counts.index, key=lambda g: (counts[g], -list(data.gpus).index(g) if g in data.gpus else 0))),)
        sizes = cmp.groupby(["N", "K"]).size()
        n, k = max(sizes.index, key=lambda nk: (sizes[nk], nk[0] * nk[1]))
        shape = shape_value(int(n), int(k))
    else:
        gpus = (next(iter(data.gpus)),) if data.gpus else ()
        shape = (
            DEFAULT_SHAPE
            if any(shape_value(*s) == DEFAULT_SHAPE for s in data.shapes)
            else (shape_value(*data.shapes[0]) if data.shapes else "")
        )
    others = [g for g in data.measured_gpus if g not in gpus] + [g for g in (COMPARE_WITH, *data.gpus) if g not in gpus]
    gpus = gpus + tuple(others[:1])  # a second GPU, so the comparison view has something to compare
    kernels = {str(k) for k in cmp["kernel"].unique()} if not cmp.empty else set()
    baseline = DEFAULT_BASELINE_KERNEL if DEFAULT_BASELINE_KERNEL in kernels else "bf16"
    tier = KERNEL_TIER if tier_in_data(data, KERNEL_TIER) else "floor"
    mode = "cold" if cmp.empty or (cmp["mode"] == "cold").any() else "hot"
    return Defaults(gpus, DEFAULT_SCHEMES, shape, baseline, tier, mode)


def tier_in_data(data: DashboardData, tier: str) -> bool:
    """Whether the tier's time column is carried by the comparison or the prediction grid of this dataset."""
    col = TIER_COLUMNS.get(tier)
    return col is not None and (col in data.comparison.columns or col in data.predictions.columns)


def tier_options(data: DashboardData) -> list[dict]:
    """One radio option per tier of models.roofline.TIERS (a tier this data does not carry is shown disabled)."""
    labels = {"floor": "calibrated + floor", "kernel": "kernel-aware"}
    return [
        {"label": labels.get(t, t), "value": t, "disabled": not tier_in_data(data, t)} for t in TIER_COLUMNS
    ]


def _batch(value: Any, default: int) -> int:
    """A batch size from a control value: an int or numeric string in 1..MAX_BATCH, else the default."""
    if isinstance(value, bool):
        return default
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return default
    if isinstance(value, int | float) and np.isfinite(value) and 1 <= value <= MAX_BATCH:
        return int(round(value))
    return default


def _strings(value: Any) -> tuple[str, ...]:
    """A list of strings from a control value (anything else, or non-string items, dropped)."""
    if isinstance(value, str):
        value = [value] if value else []
    if not isinstance(value, list | tuple):
        return ()
    return tuple(dict.fromkeys(v for v in value if isinstance(v, str) and v and len(v) <= 200))


def _one(value: Any, allowed: Any, default: str) -> str:
    return value if isinstance(value, str) and value in allowed else default


def make_selection(
    data: DashboardData,
    gpus: Any,
    primary: Any,
    schemes: Any,
    kernels: Any,
    kernel_view: Any,
    shape: Any,
    batch_lo: Any,
    batch_hi: Any,
    baseline: Any,
    tier: Any,
    mode: Any,
) -> Selection:
    """A Selection from raw control values: values of the wrong type or unknown to the data fall back to defaults
    (a browser never sends them; any HTTP client can)."""
    from models.schemes import SCHEME_NAMES

    d = default_selection(data)
    lo, hi = sorted((_batch(batch_lo, 1), _batch(batch_hi, DEFAULT_MAX_BATCH)))
    gpu_list = tuple(g for g in _strings(gpus) if g in data.gpus)
    shape_text = shape if isinstance(shape, str) and shape else d.shape
    if not valid_shape(data, shape_text):
        shape_text = d.shape
    gpu_list = gpu_list or d.gpus
    return Selection(
        gpus=gpu_list,
        schemes=tuple(s for s in _strings(schemes) if s in SCHEME_NAMES),
        kernels=_strings(kernels),
        shape=shape_text,
        m_lo=lo,
        m_hi=hi,
        baseline=baseline if isinstance(baseline, str) and baseline and len(baseline) <= 200 else d.baseline,
        tier=_one(tier, TIER_COLUMNS, "datasheet"),
        mode=_one(mode, ("cold", "hot"), "cold"),
        # normalised to the GPU drawn, so equal views have equal selections (and share the figure cache)
        chosen_primary=primary if isinstance(primary, str) and primary in gpu_list else (gpu_list or ("",))[0],
        best=kernel_view != "all",
    )


def valid_shape(data: DashboardData, shape: str) -> bool:
    """An "NxK" the model accepts (positive, at most 2^20 each) or "model:<key>" of the catalogue."""
    if shape.startswith(MODEL_PREFIX):
        return shape[len(MODEL_PREFIX) :] in data.model_keys
    parts = shape.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and 0 < len(p) <= 7 for p in parts):
        return False
    return all(0 < int(p) <= 1 << 20 for p in parts)


def control_options(data: DashboardData, frames: Frames | None = None) -> dict:
    """Dropdown options: GPUs (measured ones first, marked), schemes, kernels, shapes + models, baselines."""
    from models.schemes import SCHEME_NAMES

    cmp = frames.comparison if frames is not None else data.comparison
    measured = {str(g) for g in cmp["gpu_key"].unique()}
    gpu_opts = [
        {"label": f"{gpu.name} ({key}){' — measured' if key in measured else ''}", "value": key}
        for key, gpu in sorted(data.gpus.items(), key=lambda kv: (kv[0] not in measured, kv[0]))
    ]
    ks = cmp[["kernel", "scheme"]].drop_duplicates()
    pairs = sorted(set(zip(ks["kernel"].astype(str), ks["scheme"].astype(str), strict=True)))
    kernel_opts = [{"label": f"{k} ({s})", "value": k} for k, s in pairs]
    nk = cmp[["N", "K"]].drop_duplicates()
    shapes = set(data.shapes) | set(zip(nk["N"].astype(int), nk["K"].astype(int), strict=True))
    ordered = sorted(shapes, key=lambda s: (-(s[0] * s[1]), s))
    shape_opts = [{"label": f"{n}×{k}", "value": shape_value(n, k)} for n, k in ordered]
    shape_opts += [{"label": f"model: {m}", "value": MODEL_PREFIX + m} for m in data.model_keys]
    base_opts = [{"label": f"{k} ({s}, measured)", "value": k} for k, s in pairs]
    base_opts += [{"label": f"{s} (scheme)", "value": s} for s in SCHEME_NAMES]
    return {
        "gpus": gpu_opts,
        "schemes": [{"label": s, "value": s} for s in SCHEME_NAMES],
        "kernels": kernel_opts,
        "shapes": shape_opts,
        "baselines": base_opts,
    }


# ---------------------------------------------------------------------------------------------------- filters
def shape_pairs(data: DashboardData, sel: Selection) -> list[tuple[int, int]]:
    """(N, K) pairs of the selected shape, or of every linear layer of the selected model."""
    if sel.model:
        from models.workloads import get_model

        return sorted({(int(layer.N), int(layer.K)) for layer in get_model(sel.model).layers})
    from models.workloads import parse_shape

    n, k = parse_shape(sel.shape)
    return [(int(n), int(k))]


def _pair_mask(frame: pd.DataFrame, pairs: list[tuple[int, int]]) -> np.ndarray:
    n = frame["N"].to_numpy(dtype=np.int64)
    k = frame["K"].to_numpy(dtype=np.int64)
    key = n * (1 << 31) + k
    return np.isin(key, [a * (1 << 31) + b for a, b in pairs])


def _isin(frame: pd.DataFrame, column: str, values: tuple[str, ...]) -> np.ndarray:
    col = frame[column]
    if isinstance(col.dtype, pd.CategoricalDtype):  # compare the codes: categorical isin costs ~0.7 ms at 10⁵ rows
        codes = col.cat.categories.get_indexer(list(values))
        return np.isin(col.cat.codes.to_numpy(), codes[codes >= 0])
    return np.array(col.isin(values), dtype=bool)


def _indexed(frame: pd.DataFrame, index: RowIndex, gpus: tuple[str, ...], pairs: list[tuple[int, int]]):
    """The rows of these GPUs and shapes, in the frame's order, from its row index (data.row_index)."""
    found = [index[(g, n, k)] for g in dict.fromkeys(gpus) for n, k in pairs if (g, n, k) in index]
    return frame.iloc[np.sort(np.concatenate(found)) if found else np.empty(0, dtype=np.int64)]


def _cut(frame: pd.DataFrame, data: DashboardData, sel: Selection, gpus: tuple[str, ...], index: RowIndex | None,
         pairs: list[tuple[int, int]]) -> tuple[pd.DataFrame, np.ndarray]:
    """(rows, mask over them) of the selected GPUs and shapes: the rows from the index when there is one (the mask
    then passes them all), else every row with the mask."""
    if index is not None:
        rows = _indexed(frame, index, gpus, pairs)
        return rows, np.ones(len(rows), dtype=bool)
    return frame, _isin(frame, "gpu_key", gpus) & _pair_mask(frame, pairs)


def select_measured(
    frame: pd.DataFrame, data: DashboardData, sel: Selection, gpus: tuple[str, ...] | None = None,
    index: RowIndex | None = None,
) -> pd.DataFrame:
    """Rows of a measurement or comparison frame inside the selection (GPUs default to the primary one); `index`:
    the frame's row index (Frames.rows), which spares testing every row."""
    if frame.empty:
        return frame
    frame, mask = _cut(frame, data, sel, gpus if gpus is not None else (sel.primary,), index, shape_pairs(data, sel))
    mask &= _isin(frame, "scheme", sel.schemes)
    if sel.kernels:
        mask &= _isin(frame, "kernel", sel.kernels)
    m = frame["M"].to_numpy()
    mask &= (m >= sel.m_lo) & (m <= sel.m_hi)
    mask &= (frame["mode"] == sel.mode).to_numpy(dtype=bool)
    return frame[mask]


def select_predicted(data: DashboardData, sel: Selection, gpu: str, schemes: tuple[str, ...] | None = None):
    """Prediction rows of one GPU for the selected schemes, shape(s) and batch range."""
    pred = data.predictions
    if pred.empty:
        return pred
    pred, mask = _cut(pred, data, sel, (gpu,), data.prediction_rows, shape_pairs(data, sel))
    mask &= _isin(pred, "scheme", schemes if schemes is not None else sel.schemes)
    m = pred["M"].to_numpy()
    mask &= (m >= sel.m_lo) & (m <= sel.m_hi)
    return pred[mask]


def effective_tier(data: DashboardData, gpu: str, tier: str, frame: pd.DataFrame | None = None) -> str:
    """The tier actually drawn: calibrated tiers fall back to the datasheet on a GPU without a calibration; a tier
    whose column the frame (default: the prediction grid and the comparison) lacks falls back to floor, then the
    datasheet."""
    columns = set(data.predictions.columns) | set(data.comparison.columns) if frame is None else set(frame.columns)
    for candidate in (tier, "floor", "datasheet"):
        if candidate != "datasheet" and gpu not in data.calibrations and candidate in ("calibrated", "floor"):
            continue
        if candidate == "datasheet" or TIER_COLUMNS.get(candidate) in columns:
            return candidate
    return "datasheet"


def gpu_label(data: DashboardData, key: str) -> str:
    gpu = data.gpus.get(key)
    return f"{gpu.name}" if gpu is not None else key


def drift_lines(data: DashboardData, gpu: str) -> list[str]:
    """What the data directory's rows of a GPU measure (analysis.code_drift): code changed since, or code of unknown
    age (no fingerprint recorded)."""
    drift = data.code_drift
    row = drift[drift["gpu_key"] == gpu] if not drift.empty else drift
    if row.empty:
        return []
    label, changed, unrecorded = gpu_label(data, gpu), int(row["changed"].iloc[0]), int(row["unrecorded"].iloc[0])
    lines = [f"{label}: {changed:,} rows of the data directory measure kernel code changed since they were recorded "
             f"({row['changed_kernels'].iloc[0]}); `workbench stale` lists them and how to measure them "
             "again."] if changed else []
    if unrecorded:
        lines.append(f"{label}: {unrecorded:,} rows of the data directory were recorded before rows carried their "
                     "code's fingerprint; `workbench stale` checks them against git.")
    return lines


def status_lines(data: DashboardData, frames: Frames, sel: Selection) -> list[str]:
    """What the page must say: GPUs with predictions only, tier fall-backs, uploads, load notes."""
    lines = []
    counts = frames.comparison["gpu_key"].value_counts() if not frames.comparison.empty else pd.Series(dtype=int)
    measured = {str(g) for g, n in counts.items() if n}
    for gpu in sel.gpus:
        label = gpu_label(data, gpu)
        if gpu not in measured:
            lines.append(f"No measurements for {label}: showing predictions only.")
        else:
            lines.append(f"{label}: {int(counts[gpu])} measured points.")
            lines.extend(drift_lines(data, gpu))
        drawn = effective_tier(data, gpu, sel.tier)
        if drawn != sel.tier:
            why = "no calibration" if gpu not in data.calibrations else "no such column in this data"
            lines.append(f"{label}: the {sel.tier} tier is not available ({why}); drawing the {drawn} tier.")
    if frames.uploads:
        lines.append("Uploaded this session: " + ", ".join(frames.uploads) + ".")
    lines.extend(data.notes)
    return lines
