"""Whole-model decode roll-up: Σ over a model's linear layers of count × predicted time, per (gpu, scheme, batch).

A decode step at batch M produces M tokens: time_step_s is the per-token latency, tokens_per_s = M / time_step_s.
MoE expert layers are weighted by the expected number of distinct experts read at that batch, each multiplying
its expected share of the tokens (models.workloads.expert_load under uniform routing; models.moe.expert_load under
a skewed routing given as `routing`). Attention over the KV cache,
norms and sampling are not linear layers and are not counted: the roll-up is a lower bound on a real step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from models.errors import InputError
from models.hardware import Calibration
from models.moe import Routing
from models.moe import expert_load as routed_load
from models.roofline import TIME_COLUMNS, predict
from models.workloads import Model, expert_load, get_model


def _as_list(x: str | Sequence[str]) -> list[str]:
    return [x] if isinstance(x, str) else list(x)


def model_points(model: Model, gpus: Sequence[str], schemes: Sequence[str], batches: Sequence[int],
                 group_size: int | None = None, routing: Routing | str | None = None) -> pd.DataFrame:
    """One point per (gpu, scheme, batch, layer): M = tokens per GEMM (fractional for MoE experts), `instances` =
    GEMMs of that layer per step (count × expected active experts)."""
    batch = np.asarray(list(batches), dtype=np.float64)
    if batch.size == 0 or np.any(batch <= 0) or np.any(batch != np.floor(batch)):
        raise InputError(f"batches must be positive integers, got {list(batches)}")
    frames = []
    for layer in model.layers:
        if routing is None or layer.experts <= 1:
            active, tokens = expert_load(batch, layer.experts, layer.top_k)
        else:
            load = routed_load(batch, layer.experts, layer.top_k, routing)
            active, tokens = load.touched, load.tokens
        frames.append(pd.DataFrame({"layer": layer.name, "N": layer.N, "K": layer.K, "batch": batch.astype(np.int64),
                                    "M": tokens, "instances": layer.count * active}))
    per_layer = pd.concat(frames, ignore_index=True)
    grid = pd.MultiIndex.from_product([list(gpus), list(schemes)], names=["gpu", "scheme"]).to_frame(index=False)
    points = grid.merge(per_layer, how="cross")
    if group_size is not None:
        points["group_size"] = group_size
    return points


def rollup(model: str | Model, gpu: str | Sequence[str], schemes: Sequence[str], batches: Sequence[int],
           calibrations: dict[str, Calibration] | None = None, time_col: str = "time_datasheet_s",
           baseline: str | None = None, group_size: int | None = None,
           routing: Routing | str | None = None) -> pd.DataFrame:
    """Per (gpu, scheme, batch): time_step_{datasheet,calibrated,floor}_s, time_step_s (from `time_col`),
    tokens_per_s, bytes_step, flops_step, and `speedup` over `baseline` when given (same batch and GPU)."""
    m = get_model(model) if isinstance(model, str) else model
    if time_col not in TIME_COLUMNS:
        raise InputError(f"unknown time column {time_col!r}; valid: {', '.join(TIME_COLUMNS)}")
    scheme_list = _as_list(schemes)
    if baseline is not None and baseline not in scheme_list:
        scheme_list = [*scheme_list, baseline]
    pred = predict(model_points(m, _as_list(gpu), scheme_list, batches, group_size, routing), calibrations)
    w = pred["instances"]
    weighted = pd.DataFrame({
        "gpu": pred["gpu"], "scheme": pred["scheme"], "batch": pred["batch"],
        "bytes_step": pred["bytes"] * w, "flops_step": pred["flops"] * w,
        **{f"time_step_{c.removeprefix('time_')}": pred[c] * w for c in TIME_COLUMNS},
    })
    # min_count=1: a tier with no calibration stays NaN instead of summing to 0.
    out = weighted.groupby(["gpu", "scheme", "batch"], sort=False).sum(min_count=1).reset_index()
    out.insert(0, "model", m.key)
    out["time_step_s"] = out[f"time_step_{time_col.removeprefix('time_')}"]
    out["tokens_per_s"] = out["batch"] / out["time_step_s"]
    if baseline is not None:
        base = out[out["scheme"] == baseline][["gpu", "batch", "time_step_s"]]
        out = out.merge(base.rename(columns={"time_step_s": "time_step_baseline_s"}), on=["gpu", "batch"], how="left")
        out["speedup"] = out["time_step_baseline_s"] / out["time_step_s"]
    return out
