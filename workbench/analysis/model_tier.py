"""The kernel tier of a whole model's decode step: each linear layer's fastest registered kernel (analysis.kernel_tier)
times its instances, and an MoE model's expert layers as one grouped launch each (analysis.moe_tier). The dashboard's
roll-up and breakdown and `export --rollup` read it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError
from models.hardware import Calibration
from models.kernel_model import ParamTable
from workbench.analysis import moe_tier
from workbench.analysis.kernel_tier import best_kernel_tier


def model_layers_kernel_tier(model: str, gpu: str, schemes: list[str], batches: list[int],
                             calibrations: Mapping[str, Calibration] | None = None,
                             table: ParamTable | None = None) -> pd.DataFrame:
    """(scheme, batch, layer, time_s, bytes) per linear layer of one decode step of `model` on `gpu`: the layer's
    instances × the kernel-tier time of the fastest registered kernel of the scheme (the whole-model roll-up of the
    kernel tier); an MoE expert layer as one grouped launch where the scheme has a grouped kernel
    (models.moe_kernel.GROUPED). A scheme whose quantization does not fit the model's shapes is left out."""
    from models.rollup import model_points
    from models.roofline import predict
    from models.workloads import get_model

    m = get_model(model)
    points = []
    for scheme in schemes:  # one scheme at a time only to leave out those that do not fit
        try:
            points.append(model_points(m, [gpu], [scheme], batches))
        except InputError:
            continue
    if not points:
        return pd.DataFrame({"scheme": [], "batch": [], "layer": [], "time_s": [], "bytes": []})
    pred = best_kernel_tier(predict(pd.concat(points, ignore_index=True), calibrations or None), calibrations, table)
    w = pred["instances"].to_numpy(dtype=np.float64)
    out = pd.DataFrame({"scheme": pred["scheme"].astype(str).to_numpy(), "batch": pred["batch"].to_numpy(),
                        "layer": pred["layer"].astype(str).to_numpy(),
                        "time_s": pred["time_kernel_s"].to_numpy(dtype=np.float64) * w,
                        "bytes": pred["bytes"].to_numpy(dtype=np.float64) * w})
    return _grouped_expert_layers(out, m, gpu, schemes, batches, calibrations, table)


def _grouped_expert_layers(out: pd.DataFrame, model: Any, gpu: str, schemes: list[str], batches: list[int],
                           calibrations: Mapping[str, Calibration] | None, table: ParamTable | None) -> pd.DataFrame:
    """`out` with each expert layer of an MoE model as one grouped launch per instance (analysis.moe_tier) where the
    scheme has a grouped kernel, instead of a dense kernel per touched expert."""
    if not any(x.experts > 1 for x in model.layers):
        return out
    g = moe_tier.layers(model, gpu, [s for s in schemes if s in set(out["scheme"])], batches, None, calibrations,
                        table)
    if g.empty:
        return out
    count = g["count"].to_numpy(dtype=np.float64)
    grouped = pd.DataFrame({"scheme": g["scheme"].astype(str), "batch": g["batch"].astype(out["batch"].dtype),
                            "layer": g["layer"].astype(str), "time_s": g["time_kernel_s"].to_numpy() * count,
                            "bytes": g["bytes"].to_numpy() * count})
    done = set(zip(grouped["scheme"], grouped["batch"], grouped["layer"], strict=True))
    keep = [k not in done for k in zip(out["scheme"], out["batch"], out["layer"], strict=True)]
    return pd.concat([out[keep], grouped], ignore_index=True)


def model_steps_kernel_tier(model: str, gpu: str, schemes: list[str], batches: list[int],
                            calibrations: Mapping[str, Calibration] | None = None,
                            table: ParamTable | None = None) -> pd.DataFrame:
    """(scheme, batch, time_step_s, tokens_per_s, bytes_step): `model_layers_kernel_tier` summed over the layers."""
    layers = model_layers_kernel_tier(model, gpu, schemes, batches, calibrations, table)
    step = layers.groupby(["scheme", "batch"], sort=False)[["time_s", "bytes"]].sum(min_count=1).reset_index()
    return pd.DataFrame({"scheme": step["scheme"].astype(str), "batch": step["batch"], "time_step_s": step["time_s"],
                         "tokens_per_s": step["batch"] / step["time_s"], "bytes_step": step["bytes"]})
