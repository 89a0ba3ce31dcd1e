"""Drive a Dash app's callbacks over HTTP (Flask test client) the way the browser does: initial values from the
layout, one POST to /_dash-update-component per callback. Used by the HTTP test and the dashboard benchmark."""

from __future__ import annotations

import json
from typing import Any


def key(cid: Any) -> Any:
    """A component id as a dict key: a pattern-matching (dict) id as its JSON text, sorted and compact, the way Dash
    writes it in a response."""
    return json.dumps(cid, sort_keys=True, separators=(",", ":")) if isinstance(cid, dict) else cid


def layout_values(app: Any) -> dict[tuple[Any, str], Any]:
    """(component id, prop) -> value for every component with an id in the layout (dict ids: see `key`)."""
    values: dict[tuple[Any, str], Any] = {}

    def walk(node: Any) -> None:
        if isinstance(node, (list, tuple)):
            for child in node:
                walk(child)
            return
        if not hasattr(node, "to_plotly_json"):
            return
        props = node.to_plotly_json()["props"]
        cid = props.get("id")
        if isinstance(cid, str | dict):
            for prop, value in props.items():
                values[(key(cid), prop)] = value
        walk(props.get("children"))

    walk(app.layout() if callable(app.layout) else app.layout)
    return values


def _matching(pattern: dict, prop: str, values: dict[tuple[Any, str], Any]) -> list[dict[str, Any]]:
    """The components an ALL pattern matches in `values`, as Dash lists them: {id, property, value}."""
    out = []
    for (cid, p), value in values.items():
        if p != prop or not isinstance(cid, str) or not cid.startswith("{"):
            continue
        got = json.loads(cid)
        if set(got) == set(pattern) and all(v == ["ALL"] or got[k] == v for k, v in pattern.items()):
            out.append({"id": got, "property": prop, "value": value})
    return out


def _outputs(spec_key: str, values: dict[tuple[Any, str], Any]) -> list | dict:
    parts = spec_key.strip(".").split("...") if spec_key.startswith("..") else [spec_key]
    out: list = []
    for part in parts:
        cid, prop = part.rsplit(".", 1)
        if cid.startswith("{"):
            out.append([{"id": m["id"], "property": prop} for m in _matching(json.loads(cid), prop, values)])
        else:
            out.append({"id": cid, "property": prop})
    return out if spec_key.startswith("..") else out[0]


def payload(app: Any, spec_key: str, values: dict[tuple[Any, str], Any], changed: list[str] | None = None) -> dict:
    spec = app.callback_map[spec_key]

    def items(deps: list[dict[str, Any]]) -> list[Any]:
        return [_matching(json.loads(d["id"]), d["property"], values) if d["id"].startswith("{") else
                {**d, "value": values.get((d["id"], d["property"]))} for d in deps]  # fmt: skip

    return {
        "output": spec_key,
        "outputs": _outputs(spec_key, values),
        "inputs": items(spec["inputs"]),
        "state": items(spec.get("state", [])),
        "changedPropIds": changed or [],
    }


def call(client: Any, app: Any, spec_key: str, values: dict[tuple[str, str], Any], changed: list[str] | None = None):
    """POST one callback; return (status code, decoded JSON response or None for 204 no-update)."""
    body = json.dumps(payload(app, spec_key, values, changed))
    resp = client.post("/_dash-update-component", data=body, content_type="application/json")
    body = json.loads(resp.data) if resp.status_code == 200 else None
    return resp.status_code, body


def initial_callbacks(app: Any) -> list[str]:
    """The callbacks the browser fires on page load (all but prevent_initial_call ones)."""
    return [
        c["output"]
        for c in app._callback_list
        if not c.get("prevent_initial_call") and not c.get("clientside_function")
    ]
