"""One MoE model's expert layer(s) per batch, predicted against measured (issue 33 item 6; the dashboard's MoE view).

`curves(model, layer, schemes, routing, gpus, batches, measurements, ...)`: one row per (gpu, scheme, kernel, source,
batch) with the layer's time (gate_up and down summed for layer "experts", as `moe_hypotheses.LAYERS` says), the
touched experts and the speedup over the bf16 grouped layer of the same source (the fastest bf16 kernel where a GPU
measured several). Predicted: the grouped kernels' kernel tier (`moe_tier.layers`, the routing model's expectation)
for schemes with a grouped kernel when the tier is "kernel", else the roofline tier of the grouped layer
(`models.moe.grouped_layers`; "floor" stands in for "kernel", "datasheet" for a GPU without calibration; the `tier`
column says which). Measured: the dataset's MoE rows (`moe_tier.measured_rows`: L2-cold, unthrottled, checked), the
median over seeds and runs of each layer and kernel, their recorded `touched_experts`; a batch is measured only when
every selected layer is. Read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError
from workbench.analysis.moe_hypotheses import LAYERS

BASELINE = "bf16"  # the speedup's baseline: the scheme every measured MoE point has
COLUMNS = ["gpu", "scheme", "kernel", "tier", "source", "batch", "time_s", "touched", "speedup"]


def moe_models() -> list[str]:
    """Keys of the catalogue's models that have expert layers (data/workloads.toml)."""
    from models.workloads import get_model, model_keys

    return [k for k in model_keys() if any(x.experts > 1 for x in get_model(k).layers)]


def _summed(rows: pd.DataFrame, names: tuple[str, ...], keys: list[str]) -> pd.DataFrame:
    """Per `keys` + batch: the selected layers' times summed and their touched experts (the same routing draw or
    expectation for every layer of a model: the largest), where every selected layer has a row."""
    got = rows.groupby([*keys, "batch"], sort=True, observed=True).agg(
        time_s=("time_s", lambda t: t.sum(min_count=len(t))), touched=("touched", "max"),
        layers=("layer", "nunique")).reset_index()
    return got[(got["layers"] == len(names)) & got["time_s"].notna()].drop(columns="layers")


def predicted(model: Any, gpus: list[str], schemes: list[str], batches: list[int], routing: Any, names: tuple[str, ...],
              tier: str, calibrations: Mapping[str, Any] | None = None, table: Any = None) -> pd.DataFrame:
    """(gpu, scheme, kernel, tier, batch, time_s, touched) of the selected expert layers."""
    from models.moe import grouped_layers
    from models.moe_kernel import KERNELS_OF_SCHEME
    from models.roofline import TIERS
    from workbench.analysis import moe_tier

    grouped = [s for s in schemes if s in KERNELS_OF_SCHEME] if tier == "kernel" else []
    roof = "floor" if tier == "kernel" else tier
    frames = []
    for gpu in gpus:
        if grouped:
            g = moe_tier.layers(model, gpu, grouped, batches, routing, calibrations, table)
            # the layers of one batch may take different kernels (the fastest of each): one label for their sum
            g["kernel"] = g.groupby(["scheme", "batch"])["kernel"].transform(lambda k: "+".join(sorted(set(k))))
            frames.append(g.assign(tier="kernel", time_s=g["time_kernel_s"]))
        for scheme in (s for s in schemes if s not in grouped):
            try:
                r = grouped_layers(model, gpu, [scheme], batches, routing, calibrations)
            except InputError:  # a scheme the layer's shape does not take (group size): left out
                continue
            drawn = roof if r[TIERS[roof]].notna().any() else "datasheet"  # a GPU without calibration
            frames.append(r.assign(gpu=gpu, kernel="", tier=drawn, time_s=r[TIERS[drawn]]))
    if not frames:
        return pd.DataFrame(columns=["gpu", "scheme", "kernel", "tier", "batch", "time_s", "touched"])
    rows = pd.concat(frames, ignore_index=True)
    rows = rows[rows["layer"].isin(names)]
    return _summed(rows, names, ["gpu", "scheme", "kernel", "tier"])


def measured(measurements: pd.DataFrame, model: str, gpus: list[str], schemes: list[str], routing_label: str,
             names: tuple[str, ...]) -> pd.DataFrame:
    """(gpu, scheme, kernel, tier, batch, time_s, touched, seeds) of the dataset's MoE rows of `model`."""
    from models.moe_kernel import GROUPED
    from workbench.analysis import moe_tier

    rows = moe_tier.measured_rows(measurements)
    rows = rows[(rows["model"] == model) & rows["layer"].isin(names) & rows["gpu"].isin(gpus)
                & (rows["routing"] == routing_label)].copy()
    rows["scheme"] = rows["kernel"].map({k: g.scheme for k, g in GROUPED.items()})
    rows = rows[rows["scheme"].isin(schemes)]
    empty = pd.DataFrame(columns=["gpu", "scheme", "kernel", "tier", "batch", "time_s", "touched", "seeds"])
    if rows.empty:
        return empty
    raw = measurements[measurements["experts"] > 1]
    seen = pd.DataFrame({"gpu": raw["gpu_key"].astype(str), "layer": raw["layer"].astype(str).str.split("/").str[-1],
                         "model": raw["layer"].astype(str).str.split("/").str[0], "kernel": raw["kernel"].astype(str),
                         "batch": raw["M"].astype(int), "routing_seed": raw["routing_seed"],
                         "touched": raw["touched_experts"].astype(float)}).drop_duplicates(
        ["gpu", "model", "layer", "kernel", "batch", "routing_seed"])
    rows = rows.merge(seen, on=["gpu", "model", "layer", "kernel", "batch", "routing_seed"], how="left")
    per_layer = rows.groupby(["gpu", "scheme", "kernel", "layer", "batch"], sort=True, observed=True).agg(
        time_s=("time_s", "median"), touched=("touched", "median"), seeds=("routing_seed", "nunique")).reset_index()
    out = _summed(per_layer, names, ["gpu", "scheme", "kernel"])
    seeds = per_layer.groupby(["gpu", "scheme", "kernel", "batch"])["seeds"].min().reset_index()
    return out.merge(seeds, on=["gpu", "scheme", "kernel", "batch"]).assign(tier="measured")


def _speedup(frame: pd.DataFrame) -> pd.Series:
    # the fastest bf16 kernel of each (gpu, source, batch): a GPU may have measured several (sm_90: tc and wgmma)
    base = frame[frame["scheme"] == BASELINE].groupby(["gpu", "source", "batch"])["time_s"].min()
    key = pd.MultiIndex.from_frame(frame[["gpu", "source", "batch"]])
    return pd.Series(base.reindex(key).to_numpy(dtype=float) / frame["time_s"].to_numpy(dtype=float),
                     index=frame.index)


def curves(model_key: str, layer: str, schemes: list[str], routing: str, gpus: list[str], batches: list[int],
           measurements: pd.DataFrame | None, tier: str = "kernel", calibrations: Mapping[str, Any] | None = None,
           table: Any = None) -> pd.DataFrame:
    """COLUMNS (+ seeds for measured rows) for `model_key`'s `layer` ("experts", "gate_up" or "down") under
    `routing` ("uniform" or "zipf:S"; a histogram file is a CLI matter), the bf16 baseline always included."""
    from models.moe import moe_model
    from models.workloads import get_model

    if layer not in LAYERS:
        raise InputError(f"MoE layer {layer!r} is not accepted; one of {', '.join(LAYERS)}")
    if not str(routing).startswith(("uniform", "zipf:")):
        raise InputError(f"routing {routing!r} is not accepted here; 'uniform' or 'zipf:S'")
    model, r = moe_model(get_model(model_key), routing)
    names = LAYERS[layer]
    schemes = list(dict.fromkeys([BASELINE, *schemes]))
    pred = predicted(model, gpus, schemes, batches, r, names, tier, calibrations, table).assign(source="predicted")
    meas = measured(measurements, model.key, gpus, schemes, r.label, names) \
        if measurements is not None and "experts" in measurements else pd.DataFrame()
    meas = meas[meas["batch"].isin(batches)].assign(source="measured") if not meas.empty else meas
    out = pd.concat([f for f in (pred, meas) if not f.empty], ignore_index=True) if len(pred) or len(meas) else \
        pd.DataFrame(columns=COLUMNS)
    out["batch"] = out["batch"].astype(int)
    out["speedup"] = _speedup(out) if len(out) else np.array([], dtype=float)
    return out[[*COLUMNS, *(["seeds"] if "seeds" in out else [])]]
