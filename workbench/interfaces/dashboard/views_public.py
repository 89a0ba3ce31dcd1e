"""The GPU comparison's "predicted vs public" view: imported public timings per GPU against the model's prediction.

Reads only `DashboardData.public` (workbench.storage.public rows with predict_tiers' columns, built by data.py): the
measured frames and the hypotheses never see these rows.
"""

from __future__ import annotations

import pandas as pd

from workbench.interfaces.dashboard import fig_batch, fig_public, style
from workbench.interfaces.dashboard.data import TIER_COLUMNS, DashboardData
from workbench.interfaces.dashboard.queries import Selection, effective_tier, gpu_label

TITLE = "Predicted vs public timings (imported, not measured by this workbench)"


def public_rows(data: DashboardData, sel: Selection, gpu: str) -> tuple[pd.DataFrame, str]:
    """One GPU's public rows of the selected schemes and batch range, with predicted_s at the drawn tier (the tier
    falls back as everywhere: calibrated tiers need a calibration of the GPU)."""
    public = data.public
    tier = effective_tier(data, gpu, sel.tier, public)
    keep = ((public["gpu"].astype(str) == gpu) & public["scheme"].astype(str).isin(sel.schemes)
            & public["M"].between(sel.m_lo, sel.m_hi))  # fmt: skip
    rows = public[keep.to_numpy()].copy()
    rows["predicted_s"] = rows[TIER_COLUMNS[tier]].astype(float) if TIER_COLUMNS[tier] in rows else float("nan")
    return rows, tier


def _one_legend_entry_each(panels: list[style.Panel]) -> None:
    """A kernel drawn on several GPUs gets one legend entry (its first panel's); panels differ in their kernels."""
    seen: set[str] = set()
    for panel in panels:
        for trace in panel.traces:
            trace["showlegend"] = trace["name"] not in seen
            seen.add(trace["name"])


def public_view(data: DashboardData, sel: Selection):
    """One panel per selected GPU that has public rows (every such GPU when none of the selected has any)."""
    if data.public is None or data.public.empty:
        return style.empty_figure("No public timings imported: workbench import FILE --data-dir DIR.", TITLE)
    have = set(data.public["gpu"].astype(str))
    gpus = [g for g in sel.gpus if g in have]
    title = TITLE
    if not gpus:
        gpus = sorted(have)
        title += " · none for the selected GPUs: every GPU that has some"
    panels, drawn = [], 0
    for gpu in gpus:
        rows, tier = public_rows(data, sel, gpu)
        drawn += len(rows)
        err = fig_public.median_error(rows)
        label = f"{gpu_label(data, gpu)} — {len(rows):,} public rows"
        label += f", median |pred/public − 1| {err:.0%} ({tier})" if err == err else ""
        panels.append(fig_public.public_panel(rows, tier=tier, title=label, showlegend=True))
    _one_legend_entry_each(panels)
    if not drawn:
        return style.empty_figure("No public rows for the selected schemes and batch range.", title)
    return fig_batch.facet_figure(panels, title=title)
