"""The MoE view (issue 33 item 6): one MoE model's expert layer(s), time and speedup vs batch, predicted against
measured, the touched experts on a second axis, one column per selected GPU.

The numbers come from `workbench.analysis.moe_curves` (the grouped kernels' kernel tier, `models.moe` for the
roofline tiers, the dataset's MoE rows through `moe_tier.measured_rows`: the functions `workbench predict --model M
--rollup` and `workbench validate` read). The view's own controls (model, layer, routing) sit on its tab and live in
the URL; the figure is built only when the tab is open. MoE rows never enter the dense views (analysis.compare leaves
them out of the comparison).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import pandas as pd

from workbench.interfaces.dashboard import fig_moe
from workbench.interfaces.dashboard.data import DashboardData, Frames
from workbench.interfaces.dashboard.queries import BATCH_SIZES, Selection, gpu_label

LAYER_LABELS = {"experts": "gate_up + down", "gate_up": "gate_up", "down": "down"}  # moe_hypotheses.LAYERS' keys
ROUTINGS = ("uniform", "zipf:0.5", "zipf:1", "zipf:1.5")  # fixed choices: never a path from the URL
DEFAULT_MODEL = "qwen3-30b-a3b"


@dataclass(frozen=True)
class MoeOptions:
    model: str
    layer: str = "experts"
    routing: str = "uniform"


@functools.cache
def moe_models() -> tuple[str, ...]:
    from workbench.analysis.moe_curves import moe_models as catalogue

    return tuple(catalogue())


def default_model() -> str:
    models = moe_models()
    return DEFAULT_MODEL if DEFAULT_MODEL in models else (models[0] if models else "")


def options(model: Any = None, layer: Any = None, routing: Any = None) -> MoeOptions:
    """Raw control values -> MoeOptions; a value of the wrong type or unknown falls back to the default."""
    return MoeOptions(model if isinstance(model, str) and model in moe_models() else default_model(),
                      layer if isinstance(layer, str) and layer in LAYER_LABELS else "experts",
                      routing if isinstance(routing, str) and routing in ROUTINGS else "uniform")


def moe_rows(data: DashboardData, frames: Frames, sel: Selection, opts: MoeOptions) -> pd.DataFrame:
    """moe_curves.curves for the selection: its GPUs, schemes (bf16, the baseline, always), batch range and tier."""
    from workbench.analysis.moe_curves import curves

    batches = [b for b in BATCH_SIZES if sel.m_lo <= b <= sel.m_hi] or [sel.m_lo]
    return curves(opts.model, opts.layer, list(sel.schemes), opts.routing, list(sel.gpus), batches,
                  frames.measurements, tier=sel.tier, calibrations=data.calibrations, table=data.params)


def moe_view(data: DashboardData, frames: Frames, sel: Selection, opts: MoeOptions):
    from models.workloads import get_model

    rows = moe_rows(data, frames, sel, opts)
    labels = {g: gpu_label(data, g) for g in sel.gpus}
    title = (f"MoE expert layers — {get_model(opts.model).name} · {LAYER_LABELS[opts.layer]} · {opts.routing} "
             "routing · each layer one grouped launch")
    return fig_moe.moe_figure(rows, list(sel.gpus), labels, title=title)
