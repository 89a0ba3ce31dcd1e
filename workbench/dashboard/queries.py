"""What the controls select: the Selection, control options, and row filters over the precomputed frames.

Plain functions over `DashboardData` / `Frames`; no Dash here, so callbacks and tests share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from workbench.dashboard.data import TIER_COLUMNS, DashboardData, Frames

MODEL_PREFIX = "model:"
DEFAULT_SCHEMES = ("bf16", "w8a16", "w4a16", "w8a8", "fp8")
DEFAULT_SHAPE = "22016x4096"
DEFAULT_BASELINE_KERNEL = "cublas_bf16"
COMPARE_WITH = "h100-sxm"


@dataclass(frozen=True)
class Selection:
    """The controls' values, validated: GPUs (the first is the primary one), schemes, kernels (empty = all), one
    shape "NxK" or "model:<key>", batch range, baseline kernel or scheme, prediction tier and cache mode."""

    gpus: tuple[str, ...]
    schemes: tuple[str, ...]
    kernels: tuple[str, ...]
    shape: str
    m_lo: int
    m_hi: int
    baseline: str
    tier: str
    mode: str

    @property
    def primary(self) -> str:
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
    tier = "floor" if any(g in data.calibrations for g in gpus) else "datasheet"
    mode = "cold" if cmp.empty or (cmp["mode"] == "cold").any() else "hot"
    return Defaults(gpus, DEFAULT_SCHEMES, shape, baseline, tier, mode)


def _log2_range(value: Any) -> tuple[int, int]:
    if not value or len(value) != 2:
        return 1, 256
    lo, hi = sorted(int(v) for v in value)
    return 2 ** max(0, lo), 2 ** min(12, hi)


def make_selection(
    data: DashboardData,
    gpus: Any,
    schemes: Any,
    kernels: Any,
    shape: Any,
    batch: Any,
    baseline: Any,
    tier: Any,
    mode: Any,
) -> Selection:
    """A Selection from raw control values (None / empty / unknown values fall back to defaults)."""
    d = default_selection(data)
    m_lo, m_hi = _log2_range(batch)
    gpu_list = tuple(g for g in (gpus if isinstance(gpus, list | tuple) else [gpus] if gpus else []) if g)
    return Selection(
        gpus=gpu_list or d.gpus,
        schemes=tuple(schemes or ()),
        kernels=tuple(kernels or ()),
        shape=str(shape or d.shape),
        m_lo=m_lo,
        m_hi=m_hi,
        baseline=str(baseline or d.baseline),
        tier=tier if tier in TIER_COLUMNS else "datasheet",
        mode=mode if mode in ("cold", "hot") else "cold",
    )


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
    return np.array(frame[column].isin(values), dtype=bool)


def select_measured(
    frame: pd.DataFrame, data: DashboardData, sel: Selection, gpus: tuple[str, ...] | None = None
) -> pd.DataFrame:
    """Rows of a measurement or comparison frame inside the selection (GPUs default to the primary one)."""
    if frame.empty:
        return frame
    mask = _isin(frame, "gpu_key", gpus if gpus is not None else (sel.primary,))
    mask &= _isin(frame, "scheme", sel.schemes)
    if sel.kernels:
        mask &= _isin(frame, "kernel", sel.kernels)
    m = frame["M"].to_numpy()
    mask &= (m >= sel.m_lo) & (m <= sel.m_hi)
    mask &= (frame["mode"] == sel.mode).to_numpy(dtype=bool)
    mask &= _pair_mask(frame, shape_pairs(data, sel))
    return frame[mask]


def select_predicted(data: DashboardData, sel: Selection, gpu: str, schemes: tuple[str, ...] | None = None):
    """Prediction rows of one GPU for the selected schemes, shape(s) and batch range."""
    pred = data.predictions
    if pred.empty:
        return pred
    mask = np.array(pred["gpu_key"] == gpu, dtype=bool)
    mask &= _isin(pred, "scheme", schemes if schemes is not None else sel.schemes)
    m = pred["M"].to_numpy()
    mask &= (m >= sel.m_lo) & (m <= sel.m_hi)
    mask &= _pair_mask(pred, shape_pairs(data, sel))
    return pred[mask]


def effective_tier(data: DashboardData, gpu: str, tier: str) -> str:
    """The tier actually drawn: calibrated tiers fall back to the datasheet on a GPU without a calibration."""
    return tier if tier == "datasheet" or gpu in data.calibrations else "datasheet"


def gpu_label(data: DashboardData, key: str) -> str:
    gpu = data.gpus.get(key)
    return f"{gpu.name}" if gpu is not None else key


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
            n = int(counts[gpu])
            lines.append(f"{label}: {n} measured points.")
        if sel.tier != "datasheet" and gpu not in data.calibrations:
            lines.append(f"No calibration for {label}: the {sel.tier} tier falls back to the datasheet roofline.")
    if frames.uploads:
        lines.append("Uploaded this session: " + ", ".join(frames.uploads) + ".")
    lines.extend(data.notes)
    return lines
