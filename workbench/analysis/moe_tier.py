"""The kernel tier of MoE expert layers on the analysis side (issue 33): the grouped kernels' facts
(models.moe_kernel) with the GPU's figures (kernel_tier.gpu_lookup) and their fitted parameters (the kernel-params
table, keys grouped_bf16_tc / grouped_w4a16_tc; a kernel without them gets its family's median and says so).

- `grouped_tier(points, calibrations, table)`: rows (gpu, kernel, batch, N, K, experts, top_k, routing) with
  time_kernel_s, attribution, pass rows, passes, touched experts and bytes.
- `layers(model, gpu, schemes, batches, routing, ...)`: each expert layer of an MoE model as one grouped launch per
  scheme and batch (what the kernel-tier roll-up and `predict --tier kernel --model` use for those layers).
- `fit(rows)`: parameters of each grouped kernel from measured rows (time_s); `leave_one_model_out(rows)`: each
  model's rows predicted by parameters fitted on the other models only.
- `measured_rows(frame)`: the dataset's MoE rows (workbench profile --moe) in the shape `fit` reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError
from models.hardware import Calibration, get_gpu
from models.kernel_model import KernelParams, ParamTable
from models.moe import parse_routing
from models.moe_kernel import GROUPED, KERNELS_OF_SCHEME, Layer, layer_terms, predict_layer, runs_on
from models.moe_kernel import fit as fit_one

FIGURES = ("time_kernel_s", "attr_fixed_s", "attr_fixup_s", "attr_memory_s", "attr_alu_s", "attr_tensor_s",
           "pass_rows", "passes", "touched", "bytes", "flops")


def _params(kernel: str, table: ParamTable | None) -> tuple[KernelParams, str]:
    from models.kernel_model import load_params
    from workbench.analysis.kernel_tier import kernel_facts, params_path

    table = table if table is not None else load_params(params_path())
    family_of = {k: f.family for k, f in kernel_facts().items()}
    return table.lookup(kernel, GROUPED[kernel].facts, family_of)


def _gpu(gpu_key: str, calibrations: Mapping[str, Calibration] | None) -> tuple[Any, float]:
    from workbench.analysis.kernel_tier import gpu_lookup

    return gpu_lookup(calibrations)(gpu_key), float(get_gpu(gpu_key).l2_bytes)


def _layer(r: Any) -> Layer:
    """A row's layer: the routing drawn with its routing_seed where the row has one (a measured point), else the
    routing model's expectation."""
    seed = r.get("routing_seed")
    seed = None if seed is None or (isinstance(seed, float) and np.isnan(seed)) else int(seed)
    return Layer(str(r["kernel"]), int(r["batch"]), int(r["N"]), int(r["K"]), int(r["experts"]), int(r["top_k"]),
                 parse_routing(r.get("routing", "uniform") or "uniform"), seed)


def grouped_tier(points: pd.DataFrame, calibrations: Mapping[str, Calibration] | None = None,
                 table: ParamTable | None = None, params: Mapping[str, KernelParams] | None = None) -> pd.DataFrame:
    """`points` with FIGURES and kernel_params_source (params: per-kernel parameters overriding the table)."""
    out = points.copy().reset_index(drop=True)
    got: dict[str, list[Any]] = {c: [] for c in (*FIGURES, "kernel_params_source")}
    gpus: dict[str, tuple[Any, float]] = {}
    looked: dict[str, tuple[KernelParams, str]] = {}
    for _, r in out.iterrows():
        gpu, l2 = gpus.setdefault(str(r["gpu"]), _gpu(str(r["gpu"]), calibrations))
        kernel = str(r["kernel"])
        if kernel not in looked:
            looked[kernel] = (params[kernel], "fitted (given)") if params and kernel in params else \
                _params(kernel, table)
        p, how = looked[kernel]
        for k, v in predict_layer(_layer(r), gpu, l2, p).items():
            got[k].append(v)
        got["kernel_params_source"].append(how)
    for k, v in got.items():
        out[k] = v
    return out


def layers(model: Any, gpu: str, schemes: list[str], batches: list[int], routing: Any = None,
           calibrations: Mapping[str, Calibration] | None = None, table: ParamTable | None = None) -> pd.DataFrame:
    """(model, layer, scheme, kernel, batch, experts, top_k, routing, count, FIGURES) per expert layer of `model`
    (a models.workloads.Model) run as one grouped launch of the scheme's fastest predicted kernel among those the GPU
    runs (kernel names it); schemes without a grouped kernel are left out."""
    r = parse_routing(routing)
    cc = round(float(get_gpu(gpu).cc) * 10)
    rows = [{"gpu": gpu, "model": model.key, "layer": x.name, "scheme": s, "kernel": k,
             "batch": int(b), "N": x.N, "K": x.K, "experts": x.experts, "top_k": x.top_k, "routing": r,
             "count": x.count}
            for x in model.layers if x.experts > 1 for s in schemes if s in KERNELS_OF_SCHEME
            for k in KERNELS_OF_SCHEME[s] if runs_on(k, cc) for b in batches]
    if not rows:
        return pd.DataFrame(columns=["model", "layer", "scheme", "kernel", "batch", *FIGURES])
    out = grouped_tier(pd.DataFrame(rows), calibrations, table)
    out = out.loc[out.groupby(["layer", "scheme", "batch"], sort=False)["time_kernel_s"].idxmin()]
    out = out.reset_index(drop=True)
    out["routing"] = r.label
    return out


def measured_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The MoE rows of a measurement frame (experts > 1, grouped kernels with facts, L2-cold, unthrottled, checked)
    as (gpu, model, layer, kernel, batch, N, K, experts, top_k, routing, routing_seed, time_s)."""
    from workbench.analysis.kernel_tier import fit_rows

    if "experts" not in frame or frame.empty:
        return pd.DataFrame(columns=["gpu", "model", "layer", "kernel", "batch", "N", "K", "experts", "top_k",
                                     "routing", "routing_seed", "time_s"])
    df = fit_rows(frame[(frame["experts"] > 1) & frame["kernel"].astype(str).isin(list(GROUPED))])
    return pd.DataFrame({"gpu": df["gpu"], "model": df["layer"].astype(str).str.split("/").str[0],
                         "layer": df["layer"].astype(str).str.split("/").str[-1],
                         "kernel": df["kernel"].astype(str), "batch": df["M"], "N": df["N"], "K": df["K"],
                         "experts": df["experts"], "top_k": df["top_k"], "routing": df["routing"].astype(str),
                         "routing_seed": df["routing_seed"], "time_s": df["time_median_s"].astype(float)})


def fit(rows: pd.DataFrame, calibrations: Mapping[str, Calibration] | None = None) -> dict[str, tuple[KernelParams,
                                                                                                      float]]:
    """Per grouped kernel in `rows` (grouped_tier's columns plus time_s) with enough points: (fitted params, RMS
    log error)."""
    from models.kernel_fit import FIT_MIN_POINTS

    out = {}
    for kernel, sub in rows.groupby(rows["kernel"].astype(str), sort=True):
        if len(sub) < FIT_MIN_POINTS:
            continue
        terms = []
        for _, r in sub.iterrows():
            gpu, l2 = _gpu(str(r["gpu"]), calibrations)
            terms.append(layer_terms(_layer(r), gpu, l2)[0])
        out[kernel] = fit_one(kernel, terms, sub["time_s"].to_numpy(dtype=np.float64))
    return out


def leave_one_model_out(rows: pd.DataFrame, calibrations: Mapping[str, Calibration] | None = None) -> pd.DataFrame:
    """`rows` with time_kernel_s predicted, for each model, by parameters fitted on the other models' rows only
    (held_out names the model; error = predicted / measured - 1)."""
    models = sorted(set(rows["model"].astype(str)))
    if len(models) < 2:
        raise InputError(f"leave-one-model-out needs two or more models, got {models}")
    frames = []
    for held in models:
        train = rows[rows["model"] != held]
        params = {k: p for k, (p, _) in fit(train, calibrations).items()}
        got = grouped_tier(rows[rows["model"] == held], calibrations, params=params)
        frames.append(got.assign(held_out=held))
    out = pd.concat(frames, ignore_index=True)
    out["error"] = out["time_kernel_s"] / out["time_s"] - 1.0
    return out


def params_table(fitted: Mapping[str, tuple[KernelParams, float]], base: ParamTable) -> ParamTable:
    """`base` with the grouped kernels' fitted parameters added (their RMS log error in the provenance)."""
    prov = dict(base.provenance)
    rms = dict(prov.get("rms_log_error") or {})
    rms.update({k: round(v, 4) for k, (_, v) in fitted.items()})
    prov["rms_log_error"] = rms
    return ParamTable({**base.kernels, **{k: p for k, (p, _) in fitted.items()}}, prov)
