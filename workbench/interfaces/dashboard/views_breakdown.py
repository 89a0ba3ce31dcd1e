"""The views that split a time into parts: the whole model per layer, and the kernel-aware attribution.

Same contract as `views`: (data, session frames, selection) -> Plotly figure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from models.errors import InputError
from workbench.interfaces.dashboard import fig_breakdown, style
from workbench.interfaces.dashboard.data import TIER_COLUMNS, DashboardData, Frames
from workbench.interfaces.dashboard.queries import Selection, effective_tier, gpu_label, select_measured
from workbench.interfaces.dashboard.views import (
    DEFAULT_MODEL,
    _rollup_measured,
    _rollup_predicted,
    _title,
    measured_rows,
    shown_measured,
)


def _model_of(data: DashboardData, sel: Selection) -> tuple[str, str]:
    """The model the whole-model view draws and a note when the shape box holds a layer shape instead of a model."""
    if sel.model:
        return sel.model, ""
    model = DEFAULT_MODEL if DEFAULT_MODEL in data.model_keys else data.model_keys[0]
    return model, f"shape box holds one layer ({sel.shape}); showing {model} — pick a model there to change it"


def _layer_predictions(data: DashboardData, model: Any, gpu: str, schemes: tuple[str, ...],
                       batch: int) -> dict[str, pd.DataFrame]:
    """scheme -> models.roofline.predict of the model's layers at `batch`, for each scheme the accounting accepts:
    one call for all of them (predict is row by row, so each scheme's rows are what a call of its own gives), one
    call per scheme when a scheme is refused."""
    from models.rollup import model_points
    from models.roofline import predict

    try:
        pred = predict(model_points(model, [gpu], list(schemes), [batch]), data.calibrations or None)
        return {s: pred[pred["scheme"] == s] for s in schemes}
    except InputError:
        pass
    out = {}
    for scheme in schemes:
        try:
            out[scheme] = predict(model_points(model, [gpu], [scheme], [batch]), data.calibrations or None)
        except InputError:
            continue
    return out


def layer_parts(data: DashboardData, frames: Frames, sel: Selection, gpu: str, batch: int) -> pd.DataFrame:
    """(scheme, source, layer, time_s): count × time of each linear layer in one decode step at `batch`, predicted
    (the drawn tier) and measured (the fastest kernel of the scheme measured on that layer's shape)."""
    from models.workloads import get_model
    from workbench.analysis.model_tier import model_layers_kernel_tier

    model = get_model(sel.model)
    tier = effective_tier(data, gpu, sel.tier, data.predictions)
    rows = []
    if tier == "kernel":
        key = (sel.model, gpu, sel.schemes, batch)
        if key not in data.kernel_layers:  # ~1 s at 100k rows: once per selection and process
            if len(data.kernel_layers) >= 256:
                data.kernel_layers.clear()
            data.kernel_layers[key] = model_layers_kernel_tier(sel.model, gpu, list(sel.schemes), [batch],
                                                               data.calibrations, data.params)  # fmt: skip
        layers = data.kernel_layers[key]
        rows += [{"scheme": scheme, "source": "predicted", "layer": layer, "time_s": t}
                 for scheme, layer, t in zip(layers["scheme"], layers["layer"], layers["time_s"], strict=True)]
    predicted = _layer_predictions(data, model, gpu, sel.schemes, batch) if tier != "kernel" else {}
    for scheme, pred in predicted.items():  # one row per layer: a model's layer names are unique (models.workloads)
        times = pred[TIER_COLUMNS[tier]].to_numpy(dtype=float) * pred["instances"].to_numpy(dtype=float)
        rows += [{"scheme": scheme, "source": "predicted", "layer": str(layer), "time_s": float(t)}
                 for layer, t in zip(pred["layer"], times, strict=True)]  # fmt: skip
    pick = replace(sel, m_lo=batch, m_hi=batch, best=True)  # the fastest kernel of each scheme
    if sel.kernels:  # of the chosen kernels
        chosen = select_measured(frames.latest, data, pick, (gpu,), frames.rows("latest"))
        measured = shown_measured(chosen, replace(pick, kernels=()))
    else:
        measured = measured_rows(data, frames, pick, gpu)
    for layer in model.layers:
        if layer.experts > 1:
            continue
        hit = measured[(measured["N"] == layer.N) & (measured["K"] == layer.K)]
        rows += [{"scheme": str(scheme), "source": "measured", "layer": layer.name, "time_s": layer.count * float(t)}
                 for scheme, t in zip(hit["scheme"], hit["time_measured_s"], strict=True)]  # fmt: skip
    return pd.DataFrame(rows, columns=["scheme", "source", "layer", "time_s"])


def rollup_view(data: DashboardData, frames: Frames, sel: Selection):
    """ms per decode step and tokens/s vs batch for the model in the shape box (or the default one, saying so) on the
    primary GPU, and the per-layer parts of one step at the low end of the batch range."""
    model, note = _model_of(data, sel)
    msel = replace(sel, shape="model:" + model)
    gpu = sel.primary
    pred = _rollup_predicted(data, msel, gpu, sel.schemes)
    frames_out = [
        pd.DataFrame(
            {
                "label": pred["scheme"],
                "scheme": pred["scheme"],
                "source": "predicted",
                "M": pred["batch"],
                "time_per_token_s": pred["time_step_s"],
                "tokens_per_s": pred["tokens_per_s"],
            }
        )
    ]
    meas = _rollup_measured(data, frames, msel, gpu, sel.schemes)
    if not meas.empty:
        frames_out.append(
            pd.DataFrame(
                {
                    "label": meas["scheme"],
                    "scheme": meas["scheme"],
                    "source": "measured",
                    "M": meas["M"],
                    "time_per_token_s": meas["time_step_measured_s"],
                    "tokens_per_s": meas["tokens_per_s_measured"],
                }
            )
        )
    frame = pd.concat(frames_out, ignore_index=True)
    tier = effective_tier(data, gpu, sel.tier, data.predictions)
    parts = [f"Whole model {model} — {gpu_label(data, gpu)} · {tier} · {sel.mode}"]
    if meas.empty:
        parts.append("predicted only: not every layer measured")
    if note:
        parts.append(note)
    layers = layer_parts(data, frames, msel, gpu, sel.m_lo)
    return fig_breakdown.rollup_figure(frame, title="<br>".join(parts), layers=layers, batch=sel.m_lo)


NO_ATTRIBUTION = "no kernel-aware prediction in this data"


def attribution_view(data: DashboardData, frames: Frames, sel: Selection):
    """Stacked per-M attribution of the chosen kernels' times (one panel each), or of each scheme's best kernel."""
    gpu = sel.primary
    title = _title(data, gpu, "Time attribution (kernel-aware model)", sel)
    cmp = frames.latest
    if sel.model:
        return style.empty_figure("Attribution is per kernel call: pick an N×K shape in the shape box.", title)
    if not all(c in cmp.columns for c in fig_breakdown.ATTRIBUTION_COLUMNS):
        return style.empty_figure(f"Attribution: {NO_ATTRIBUTION}.", title)
    measured = measured_rows(data, frames, sel, gpu)
    measured = measured.dropna(subset=list(fig_breakdown.ATTRIBUTION_COLUMNS), how="all")
    if measured.empty:
        return style.empty_figure(f"Attribution: {NO_ATTRIBUTION} for this selection.", title)
    by_kernel = bool(sel.kernels) or not sel.best
    label = measured["kernel"] if by_kernel else measured["scheme"].astype(str) + " (best kernel)"
    frame = measured.assign(label=label.astype(str).to_numpy())
    return fig_breakdown.attribution_figure(frame, title=title)
