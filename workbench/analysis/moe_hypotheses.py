"""MoE hypotheses (issue 33 item 6): `kind = "moe_speedup"`, the speedup of scheme `a` over scheme `b` on an MoE
model's expert layers at a batch, each layer one grouped launch (the grouped kernel of each scheme).

    [[hypothesis]]
    id = "mixtral-w4a16-experts-b64"
    kind = "moe_speedup"
    model = "mixtral-8x7b"      # an MoE model of data/workloads.toml
    a = "w4a16"                 # schemes with a grouped kernel: bf16, w4a16, fp8
    b = "bf16"
    batch = 64                  # or a list
    op = ">="
    value = 1.2
    # optional: layer = "experts" (default: gate_up + down summed) | "gate_up" | "down"; routing = "uniform"
    # (default) | "zipf:S" | a routing histogram file (checked against the model's E and top-k); gpu = "h200-sxm"

Predicted: time_b / time_a from the grouped kernels' kernel tier (workbench.analysis.moe_tier, the routing model's
expectation) on every GPU named (default: the GPUs with data, else h200-sxm), measured or not. Measured: the same
ratio of the dataset's MoE rows (`workbench profile --moe`: the model's expert layers, that routing label, L2-cold,
unthrottled, float64-checked; the fastest seed-wise median when several seeds were recorded); inconclusive where a
layer or batch was not measured.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from models.errors import InputError

LAYERS = {"experts": ("expert_gate_up", "expert_down"), "gate_up": ("expert_gate_up",), "down": ("expert_down",)}
DEFAULT_GPU = "h200-sxm"


def parse_fields(table: dict[str, Any], fail: Any) -> dict[str, Any]:
    """model, layer and routing of a moe_speedup table, checked (unknown model, a routing that does not fit the
    model's experts and top-k, sides without a grouped kernel: `fail(field, what)`)."""
    from models.moe import moe_model, parse_routing
    from models.moe_kernel import KERNELS_OF_SCHEME
    from models.workloads import get_model

    out: dict[str, Any] = {}
    for name in ("model", "layer", "routing"):
        if name in table and (not isinstance(table[name], str) or not table[name].strip()):
            raise fail(name, "must be a non-empty string")
    try:
        model = get_model(table["model"])
    except InputError as exc:
        raise fail("model", str(exc)) from None
    out["model"] = model.key
    out["layer"] = table.get("layer", "experts")
    if out["layer"] not in LAYERS:
        raise fail("layer", f"{out['layer']!r} is not accepted; one of {', '.join(repr(x) for x in LAYERS)}")
    try:
        _, routing = moe_model(model, parse_routing(table.get("routing", "uniform")))
    except InputError as exc:
        raise fail("routing" if "routing" in table else "model", str(exc)) from None
    out["routing"] = routing.source or routing.label
    for side in ("a", "b"):
        if table[side] not in KERNELS_OF_SCHEME:
            raise fail(side, f"{table[side]!r} has no grouped kernel; one of {', '.join(KERNELS_OF_SCHEME)}")
    return out


def gpus_for(h: Any, data_gpus: list[str]) -> list[str]:
    return list(h.gpus) or data_gpus or [DEFAULT_GPU]


def _predicted(h: Any, gpu: str, calibrations: Any) -> dict[int, dict[str, float]]:
    """batch -> scheme -> seconds of the selected layers, summed."""
    from models.workloads import get_model
    from workbench.analysis import moe_tier

    got = moe_tier.layers(get_model(h.model), gpu, [h.a, h.b], list(h.batches), h.routing, calibrations)
    got = got[got["layer"].isin(LAYERS[h.layer])]
    t = got.groupby(["batch", "scheme"])["time_kernel_s"].sum()
    return {int(b): {str(s): float(v) for (bb, s), v in t.items() if bb == b} for b in h.batches}


def _measured(h: Any, gpu: str, rows: pd.DataFrame | None) -> dict[int, dict[str, float]]:
    from models.moe import parse_routing
    from models.moe_kernel import KERNELS_OF_SCHEME

    if rows is None or rows.empty:
        return {}
    label = parse_routing(h.routing).label
    sel = rows[(rows["gpu"] == gpu) & (rows["model"] == h.model) & (rows["routing"] == label)]
    out: dict[int, dict[str, float]] = {}
    for b in h.batches:
        for scheme in (h.a, h.b):
            g = sel[(sel["batch"] == b) & sel["kernel"].isin(KERNELS_OF_SCHEME[scheme])]
            # per layer, the fastest of the scheme's measured kernels (each one's median over the seeds)
            per_layer = [g[g["layer"] == x].groupby("kernel")["time_s"].median() for x in LAYERS[h.layer]] \
                if "layer" in g else []
            if per_layer and all(len(v) for v in per_layer):
                out.setdefault(int(b), {})[scheme] = float(sum(v.min() for v in per_layer))
    return out


def evaluate(h: Any, gpu: str, source: str, rows: pd.DataFrame | None,
             calibrations: Any = None) -> list[tuple[str, float | None, str]]:
    """One moe_speedup hypothesis on one GPU and source: (label, the speedup b ÷ a or None, why None) per batch;
    hypothesis_eval turns them into verdicts."""
    times = _predicted(h, gpu, calibrations) if source == "predicted" else _measured(h, gpu, rows)
    out: list[tuple[str, float | None, str]] = []
    for b in h.batches:
        label = f"{h.model} {h.layer} M={b}"
        t = times.get(int(b), {})
        if h.a not in t or h.b not in t:
            out.append((label, None, "not measured for both schemes" if source == "measured" else "not predicted"))
            continue
        out.append((label, t[h.b] / t[h.a], ""))
    return out
