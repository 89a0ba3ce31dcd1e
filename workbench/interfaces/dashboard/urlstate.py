"""The page state in the URL's query string: every control, the open view and the comparison view.

`encode(values)` writes the query string from control values; `decode(search, data)` reads one back into control
values, keeping only what the data knows (unknown GPUs, schemes, shapes... are dropped, never an error), so a shared
link or a reload restores the view. Pure functions; no Dash.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlencode

from workbench.interfaces.dashboard import ids
from workbench.interfaces.dashboard.data import TIER_COLUMNS, DashboardData
from workbench.interfaces.dashboard.queries import MAX_BATCH, MODEL_PREFIX, valid_shape

# query key -> (component id, kind); order = the order of the callback's inputs/outputs
KEYS: dict[str, tuple[str, str]] = {
    "gpus": (ids.GPUS, "list"),
    "primary": (ids.PRIMARY, "str"),
    "schemes": (ids.SCHEMES, "list"),
    "kernels": (ids.KERNELS, "list"),
    "kernel_view": (ids.KERNEL_VIEW, "str"),
    "shape": (ids.SHAPE, "str"),
    "m_lo": (ids.BATCH_LO, "int"),
    "m_hi": (ids.BATCH_HI, "int"),
    "baseline": (ids.BASELINE, "str"),
    "tier": (ids.TIER, "str"),
    "mode": (ids.MODE, "str"),
    "view": (ids.TABS, "str"),
    "compare": (ids.COMPARE_VIEW, "str"),
    "moe_model": (ids.MOE_MODEL, "str"),
    "moe_layer": (ids.MOE_LAYER, "str"),
    "moe_routing": (ids.MOE_ROUTING, "str"),
}
MAX_QUERY = 4000  # characters; a longer query string is ignored


def encode(values: dict[str, Any]) -> str:
    """'?key=value&...' from {query key: control value}; lists are comma-joined, None and empty lists left out."""
    pairs = []
    for key, (_, kind) in KEYS.items():
        value = values.get(key)
        if value is None or value == [] or value == "":
            continue
        if kind == "list":
            if not isinstance(value, list | tuple):
                continue
            value = ",".join(str(v) for v in value if isinstance(v, str | int | float))
        pairs.append((key, str(value)))
    return "?" + urlencode(pairs, safe=",:") if pairs else ""


def _valid(data: DashboardData, key: str, value: str, known: dict[str, set[str]]) -> Any:
    kind = KEYS[key][1]
    if kind == "list":
        items = [v for v in value.split(",") if v]
        if key in known:
            items = [v for v in items if v in known[key]]
        return list(dict.fromkeys(items)) if items or key == "kernels" else None
    if kind == "int":
        return int(value) if value.isdigit() and 1 <= int(value) <= MAX_BATCH else None
    if key == "shape":
        return value if valid_shape(data, value) else None
    if key in known:
        return value if value in known[key] else None
    return value if len(value) <= 200 else None


def decode(search: Any, data: DashboardData) -> dict[str, Any]:
    """{query key: control value} for the keys present and valid in `search` ('?a=b&...')."""
    from models.schemes import SCHEME_NAMES
    from workbench.interfaces.dashboard import views_moe

    if not isinstance(search, str) or not search or len(search) > MAX_QUERY:
        return {}
    known = {
        "gpus": set(data.gpus),
        "primary": set(data.gpus),
        "schemes": set(SCHEME_NAMES),
        "kernel_view": {"best", "all"},
        "tier": set(TIER_COLUMNS),
        "mode": {"cold", "hot"},
        "view": set(ids.TAB_VALUES),
        "compare": set(ids.COMPARE_VIEWS),
        "moe_model": set(views_moe.moe_models()),
        "moe_layer": set(views_moe.LAYER_LABELS),
        "moe_routing": set(views_moe.ROUTINGS),
    }
    out = {}
    for key, raw in parse_qs(search.lstrip("?"), keep_blank_values=False).items():
        if key in KEYS and raw:
            value = _valid(data, key, raw[-1], known)
            if value is not None:
                out[key] = value
    return out


def shape_label(shape: str) -> str:
    return f"model {shape[len(MODEL_PREFIX):]}" if shape.startswith(MODEL_PREFIX) else shape.replace("x", "×")
