"""Routing model of an MoE expert layer at decode: which experts a batch touches and how the tokens spread.

At batch B with top-k routing over E experts, every token picks k distinct experts. Expert e is picked by a token with
probability q_e (its *inclusion probability*, Σ q_e = k); tokens are independent. Then, per step:
  touched  E[distinct experts read]    = Σ_e 1 − (1 − q_e)^B          (every touched expert's weights read once)
  tokens   E[tokens of expert e]       = B·q_e                         (Σ = B·k rows of the grouped GEMMs)
  busiest  E[max_e tokens of e]        = Σ_{t≥0} 1 − Π_e P(Bin(B, q_e) ≤ t)
The busiest expert sets the time of a grouped kernel whose CTAs split (expert, row tile): its tiles multiply the most
rows. The busiest figure treats the experts' counts as independent binomials (they are slightly negatively
correlated: Σ counts = B·k), never below the mean rows per touched expert; within a few percent of a Monte-Carlo
draw at B = 16-64 (tests/test_moe.py).

Routings (the share p_e of all picks that go to expert e, then q = waterfill(k·p): q_e = min(1, c·p_e) with c such
that Σ q_e = k, since a token cannot pick one expert twice):
  uniform        p_e = 1/E: q_e = k/E, touched = E·(1 − (1 − k/E)^B) (models.workloads.expert_load)
  zipf:S         p_e ∝ 1/r^S for the expert of rank r = 1..E (S ≥ 0; S = 0 is uniform; real routers measured after
                 load balancing sit well below S = 1)
  a file         a routing histogram: counts of picks per expert (JSON {"counts": [...]} or numbers separated by
                 commas or white space), E entries, non-negative, at least k of them above 0
`draw` samples routings with exactly these inclusion probabilities (systematic sampling over a random order of the
experts per token), so the bench and the profiler run the problems the model predicts. Pure Python and NumPy.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.errors import InputError
from models.schemes import traffic

ROUTING_HELP = "'uniform', 'zipf:S' (S >= 0, e.g. zipf:1.0) or a routing histogram file (counts per expert)"


@dataclass(frozen=True)
class Routing:
    kind: str = "uniform"  # "uniform", "zipf", "histogram"
    zipf_s: float = 0.0
    counts: tuple[float, ...] = ()  # histogram: picks per expert
    source: str = ""  # the file a histogram came from

    @property
    def label(self) -> str:
        if self.kind == "zipf":
            return f"zipf:{self.zipf_s:g}"
        return f"histogram:{Path(self.source).name}" if self.kind == "histogram" else "uniform"

    def shares(self, experts: int) -> np.ndarray:
        """p_e: the share of all picks that go to each expert (sums to 1)."""
        if self.kind == "uniform" or experts == 1:
            return np.full(experts, 1.0 / experts)
        if self.kind == "zipf":
            w = np.arange(1, experts + 1, dtype=np.float64) ** -self.zipf_s
            return w / w.sum()
        c = np.asarray(self.counts, dtype=np.float64)
        if c.size != experts:
            raise InputError(f"routing histogram {self.source or ''} has {c.size} counts, but the layer has "
                             f"{experts} experts; give one count per expert")
        return c / c.sum()

    def check(self, experts: int, top_k: int) -> None:
        """InputError when this routing cannot route top_k of `experts` (wrong length, too few experts used)."""
        if not 1 <= top_k <= experts:
            raise InputError(f"top-k must be in [1, experts={experts}], got top-k={top_k}")
        p = self.shares(experts)
        if int(np.count_nonzero(p)) < top_k:
            raise InputError(f"routing {self.label}: only {np.count_nonzero(p)} experts have picks, fewer than "
                             f"top-k={top_k}; each token needs {top_k} distinct experts")


def parse_routing(text: str | Routing | None) -> Routing:
    """'uniform', 'zipf:S' or a histogram file path -> Routing (InputError with what is accepted otherwise)."""
    if text is None:
        return Routing()
    if isinstance(text, Routing):
        return text
    t = str(text).strip()
    if t.lower() == "uniform":
        return Routing()
    if t.lower().startswith("zipf"):
        _, _, s = t.partition(":")
        try:
            value = float(s)
        except ValueError:
            value = float("nan")
        if not (math.isfinite(value) and value >= 0):
            raise InputError(f"malformed routing {t!r}; expected zipf:S with S a number >= 0, e.g. zipf:1.0")
        return Routing("zipf", zipf_s=value) if value > 0 else Routing()
    path = Path(t)
    if not path.is_file():
        raise InputError(f"routing {t!r} is neither a known routing nor a file; valid: {ROUTING_HELP}")
    return Routing("histogram", counts=read_histogram(path), source=str(path))


def read_histogram(path: str | Path) -> tuple[float, ...]:
    """Counts per expert from a JSON file ({"counts": [...]} or a list) or numbers separated by commas/white space."""
    p = Path(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the routing histogram {p}: {exc}") from None
    try:
        raw: Any = json.loads(text)
        if isinstance(raw, dict):
            raw = raw.get("counts")
    except json.JSONDecodeError:
        raw = [x for x in text.replace(",", " ").split() if x]
    if not isinstance(raw, list) or not raw:
        raise InputError(f"routing histogram {p}: expected a list of counts per expert (JSON {{\"counts\": [...]}} "
                         f"or numbers separated by commas or spaces)")
    counts = []
    for i, v in enumerate(raw):
        try:
            x = float(v) if not isinstance(v, bool) else float("nan")
        except (TypeError, ValueError):
            x = float("nan")
        if not math.isfinite(x) or x < 0:
            raise InputError(f"routing histogram {p}: count #{i + 1} is {v!r}; counts must be finite numbers >= 0")
        counts.append(x)
    if sum(counts) <= 0:
        raise InputError(f"routing histogram {p}: every count is 0; at least top-k experts need picks")
    return tuple(counts)


def inclusion(shares: np.ndarray, top_k: int) -> np.ndarray:
    """q_e = min(1, c·p_e) with Σ q_e = top_k (water-filling): each expert's chance to be among a token's top-k."""
    p = np.asarray(shares, dtype=np.float64)
    if np.count_nonzero(p) < top_k:
        raise InputError(f"only {np.count_nonzero(p)} experts have picks, fewer than top-k={top_k}")
    q = np.zeros_like(p)
    capped = np.zeros(p.shape, dtype=bool)
    for _ in range(p.size + 1):
        free = ~capped
        room = top_k - capped.sum()
        q[free] = p[free] * room / p[free].sum()
        over = free & (q > 1.0)
        if not over.any():
            break
        capped |= over
        q[capped] = 1.0
    return q


@dataclass(frozen=True)
class Load:
    """Expected figures of one expert layer at each batch (arrays over the batches)."""

    batch: np.ndarray
    touched: np.ndarray  # distinct experts read
    tokens: np.ndarray  # rows per touched expert (mean): B·k / touched
    busiest: np.ndarray  # rows of the busiest expert

    @property
    def rows(self) -> np.ndarray:
        return self.tokens * self.touched


def expert_load(batches: Any, experts: int, top_k: int, routing: Routing | str | None = None) -> Load:
    """Touched experts, mean and busiest rows per expert at each batch under `routing` (dense layer: 1, B, B)."""
    B = np.atleast_1d(np.asarray(batches, dtype=np.float64))
    if B.size == 0 or np.any(B <= 0) or np.any(B != np.floor(B)):
        raise InputError(f"batches must be positive integers, got {B.tolist()}")
    if experts <= 1:
        return Load(B, np.ones_like(B), B.copy(), B.copy())
    r = parse_routing(routing)
    r.check(experts, top_k)
    q = inclusion(r.shares(experts), top_k)
    touched = np.array([np.sum(1.0 - (1.0 - q) ** b) for b in B])
    tokens = B * top_k / touched
    # the independent-binomial figure falls below the mean rows at small B (at B = 1 it gives P(any pick) < 1 where
    # the busiest expert surely has one row): the busiest expert has at least the mean
    busiest = np.maximum([_expected_max(int(b), q) for b in B], tokens)
    return Load(B, touched, tokens, busiest)


def _expected_max(b: int, q: np.ndarray) -> float:
    from scipy.stats import binom

    t = np.arange(b)[:, None]
    cdf = binom.cdf(t, b, q[None, :])  # P(count_e <= t)
    return float(np.sum(1.0 - np.prod(cdf, axis=1)))


def grouped_traffic(scheme: str, load: Load, N: int, K: int, group_size: int | None = None) -> dict[str, np.ndarray]:
    """Bytes and FLOPs of one grouped GEMM (all experts of a layer, one launch) at each batch of `load`: every
    touched expert's weights (and scales) once, B·k activation rows in and out, 2·B·k·N·K FLOPs."""
    from models.roofline import _scheme_for

    s = _scheme_for(scheme, group_size)
    per_expert = traffic(s, 1.0, N, K)  # weights and scales do not depend on M
    rows = traffic(s, load.rows, N, K)
    weight = load.touched * (per_expert.weight_bytes + per_expert.scale_bytes)
    moved = rows.act_bytes + rows.out_bytes
    return {"weight_bytes": weight, "act_bytes": rows.act_bytes, "out_bytes": rows.out_bytes,
            "bytes": weight + moved, "flops": rows.flops}


def draw(batch: int, experts: int, top_k: int, routing: Routing | str | None = None, seed: int = 0) -> np.ndarray:
    """[batch, top_k] expert ids: each token's k distinct experts, drawn with the inclusion probabilities of
    `routing` (systematic sampling over a random order of the experts, per token)."""
    r = parse_routing(routing)
    r.check(experts, top_k)
    q = inclusion(r.shares(experts), top_k)
    rng = np.random.default_rng(seed)
    out = np.empty((batch, top_k), dtype=np.int64)
    for i in range(batch):
        order = rng.permutation(experts)
        edges = np.concatenate([[0.0], np.cumsum(q[order])])
        points = rng.uniform() + np.arange(top_k)
        pos = np.clip(np.searchsorted(edges, points, side="right") - 1, 0, experts - 1)
        out[i] = order[pos]
    return out


def route(choices: np.ndarray, experts: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows sorted by expert: token ids, int32 [B·k]; offsets per expert, int32 [E + 1]) from [B, k] choices: the
    routed token list a grouped kernel reads (expert e multiplies the tokens rows[offsets[e]:offsets[e + 1]])."""
    c = np.asarray(choices, dtype=np.int64)
    flat = c.ravel()
    order = np.argsort(flat, kind="stable")
    tokens = (order // c.shape[1]).astype(np.int32)
    counts = np.bincount(flat, minlength=experts)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return tokens, offsets


def moe_model(model: Any, routing: Routing | str | None = None, top_k: int | None = None) -> tuple[Any, Routing]:
    """(the model with its expert layers' top-k set to `top_k` when given, the parsed routing), checked against
    every expert layer: InputError when the model has none, top-k > E, or a histogram that does not fit E."""
    from dataclasses import replace

    experts = [layer for layer in model.layers if layer.experts > 1]
    if not experts:
        raise InputError(f"model {model.key!r} has no MoE expert layers; --routing and --top-k apply to MoE models")
    r = parse_routing(routing)
    if top_k is not None:
        for layer in experts:
            if not 1 <= top_k <= layer.experts:
                raise InputError(f"--top-k {top_k} is out of range for layer {layer.name!r} of {model.key}: give "
                                 f"1..{layer.experts} (its experts)")
        model = replace(model, layers=tuple(replace(x, top_k=top_k) if x.experts > 1 else x for x in model.layers))
    for layer in (x for x in model.layers if x.experts > 1):
        try:
            r.check(layer.experts, layer.top_k)
        except InputError as exc:
            raise InputError(f"layer {layer.name!r} of {model.key}: {exc}") from None
    return model, r


def load_table(model: Any, routing: Routing, batches: Any) -> list[tuple[str, int, int, int, float, float, float]]:
    """(layer, E, k, batch, touched experts, mean rows, busiest rows) per expert layer and batch."""
    out = []
    for layer in (x for x in model.layers if x.experts > 1):
        load = expert_load(batches, layer.experts, layer.top_k, routing)
        for b, t, m, x in zip(load.batch, load.touched, load.tokens, load.busiest, strict=True):
            out.append((layer.name, layer.experts, layer.top_k, int(b), float(t), float(m), float(x)))
    return out


def grouped_layers(model: Any, gpu: str, schemes: Any, batches: Any, routing: Routing | str | None = None,
                   calibrations: Any = None, group_size: int | None = None) -> Any:
    """The roofline tiers of each expert layer run as ONE grouped launch, per (scheme, layer, batch): touched experts,
    mean and busiest rows, bytes (every touched expert's weights once, B·k rows in and out) and FLOPs, and
    time_{datasheet,calibrated,floor}_s: the layer's bytes and FLOPs against the GPU's ceilings, the floor tier with
    one launch floor (not one per expert, as a loop of per-expert GEMMs would pay)."""
    import pandas as pd

    from models.roofline import predict

    r = parse_routing(routing)
    frames = []
    for layer in (x for x in model.layers if x.experts > 1):
        load = expert_load(batches, layer.experts, layer.top_k, r)
        for scheme in schemes:
            t = grouped_traffic(scheme, load, layer.N, layer.K, group_size)
            pts = pd.DataFrame({"gpu": gpu, "scheme": scheme, "M": load.tokens, "N": layer.N, "K": layer.K})
            if group_size is not None:
                pts["group_size"] = group_size
            p = predict(pts, calibrations)  # one expert's GEMM at the mean rows: every term scales with `touched`
            row = {"model": model.key, "layer": layer.name, "scheme": scheme, "routing": r.label,
                   "batch": load.batch.astype(int), "experts": layer.experts, "top_k": layer.top_k,
                   "touched": load.touched, "rows_mean": load.tokens, "rows_busiest": load.busiest, **t}
            for tier in ("datasheet", "calibrated"):
                row[f"time_{tier}_s"] = p[f"time_{tier}_s"].to_numpy() * load.touched
            row["time_floor_s"] = (p["time_floor_s"] - p["floor_s"]).to_numpy() * load.touched + p["floor_s"].to_numpy()
            frames.append(pd.DataFrame(row))
    return pd.concat(frames, ignore_index=True)
