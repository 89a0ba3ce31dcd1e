"""LLM decode workloads: the linear layers of each model (data/workloads.toml) and named N×K shapes.

A layer's weight is N×K (N outputs, K the reduction); `count` is how many times it runs per decode step. MoE expert
layers also carry `experts` (E) and `top_k` (k): at batch M, under uniform routing, a step reads the weights of
E·(1 − (1 − k/E)^M) distinct experts on average, each multiplying M·k / that many tokens (at M = 1: k experts, one
token each; as M grows: all E experts, M·k/E tokens each). `expert_load` computes both.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.errors import InputError, unknown
from models.paths import catalogue_dir

WORKLOADS_TOML = catalogue_dir() / "workloads.toml"
_SHAPE_RE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*$")


@dataclass(frozen=True)
class Layer:
    name: str
    N: int
    K: int
    count: int  # runs per decode step (e.g. number of transformer blocks)
    experts: int = 1  # E for an MoE expert layer (1 = dense)
    top_k: int = 1  # experts each token is routed to

    @property
    def params(self) -> int:
        """Weights stored for this layer across all its instances (all experts)."""
        return self.N * self.K * self.count * self.experts


@dataclass(frozen=True)
class Model:
    key: str
    name: str
    layers: tuple[Layer, ...]
    notes: str = ""

    @property
    def params(self) -> int:
        """Parameters in the linear layers (embedding lookups excluded)."""
        return sum(layer.params for layer in self.layers)


def expert_load(M: Any, experts: int, top_k: int) -> tuple[Any, Any]:
    """(expected distinct experts read, tokens per such expert) at batch M, uniform routing; dense: (1, M)."""
    Ma = np.asarray(M, dtype=np.float64)
    if experts <= 1:
        return np.ones_like(Ma), Ma
    active = experts * (1.0 - (1.0 - top_k / experts) ** Ma)
    return active, Ma * top_k / active


def _int_field(where: str, entry: dict[str, Any], name: str, default: int | None = None) -> int:
    value = entry.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(f"{where}: field {name!r} must be a positive integer, got {value!r}")
    return value


def _parse_model(path: Path, key: str, entry: dict[str, Any]) -> Model:
    where = f"{path}: model {key!r}"
    layers_raw = entry.get("layers")
    if not isinstance(layers_raw, list) or not layers_raw:
        raise InputError(f"{where}: needs a non-empty 'layers' list")
    layers = []
    for i, raw in enumerate(layers_raw):
        lw = f"{where} layer #{i + 1}"
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise InputError(f"{lw}: each layer needs a name, N, K and count")
        experts = _int_field(lw, raw, "experts", 1)
        top_k = _int_field(lw, raw, "top_k", 1)
        if top_k > experts:
            raise InputError(f"{lw}: top_k={top_k} exceeds experts={experts}")
        layers.append(Layer(raw["name"], _int_field(lw, raw, "N"), _int_field(lw, raw, "K"),
                            _int_field(lw, raw, "count"), experts, top_k))
    names = [layer.name for layer in layers]
    if len(set(names)) != len(names):
        raise InputError(f"{where}: duplicate layer names")
    return Model(key=key, name=str(entry.get("name", key)), layers=tuple(layers), notes=str(entry.get("notes", "")))


def _load(path: Path = WORKLOADS_TOML) -> tuple[dict[str, Model], dict[str, tuple[int, int]]]:
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"cannot read the workload catalogue {path}: {exc}") from None
    models = {key: _parse_model(path, key, entry) for key, entry in raw.get("models", {}).items()}
    shapes: dict[str, tuple[int, int]] = {}
    for name, value in raw.get("shapes", {}).items():
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and v > 0 for v in value)):
            raise InputError(f"{path}: shape {name!r} must be [N, K] with positive integers")
        shapes[name] = (value[0], value[1])
    return models, shapes


MODELS, SHAPES = _load()


def model_keys() -> list[str]:
    return list(MODELS)


def get_model(key: str) -> Model:
    """The model by key (case-insensitive); InputError listing the valid keys."""
    wanted = str(key).strip().lower()
    for k, model in MODELS.items():
        if k.lower() == wanted:
            return model
    raise unknown("model", key, model_keys())


def parse_shape(text: str) -> tuple[int, int]:
    """'22016x4096' -> (N, K) = (22016, 4096): an N×K weight, N outputs, K the reduction."""
    if isinstance(text, str) and text.strip() in SHAPES:
        return SHAPES[text.strip()]
    match = _SHAPE_RE.match(text) if isinstance(text, str) else None
    if not match:
        raise InputError(f"malformed shape {text!r}; expected NxK with positive integers, e.g. 22016x4096")
    n, k = int(match.group(1)), int(match.group(2))
    if n <= 0 or k <= 0:
        raise InputError(f"malformed shape {text!r}; N and K must be positive, e.g. 22016x4096")
    return n, k
