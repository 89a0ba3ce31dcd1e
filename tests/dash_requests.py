"""Drive a Dash app's callbacks over HTTP (Flask test client) the way the browser does: initial values from the
layout, one POST to /_dash-update-component per callback. Used by the HTTP test and the dashboard benchmark."""

from __future__ import annotations

import json
from typing import Any


def layout_values(app: Any) -> dict[tuple[str, str], Any]:
    """(component id, prop) -> value for every component with an id in the layout."""
    values: dict[tuple[str, str], Any] = {}

    def walk(node: Any) -> None:
        if isinstance(node, (list, tuple)):
            for child in node:
                walk(child)
            return
        if not hasattr(node, "to_plotly_json"):
            return
        props = node.to_plotly_json()["props"]
        cid = props.get("id")
        if isinstance(cid, str):
            for prop, value in props.items():
                values[(cid, prop)] = value
        walk(props.get("children"))

    walk(app.layout() if callable(app.layout) else app.layout)
    return values


def _outputs(key: str) -> list[dict[str, str]] | dict[str, str]:
    if key.startswith(".."):
        parts = [p for p in key.strip(".").split("...")]
        return [{"id": p.rsplit(".", 1)[0], "property": p.rsplit(".", 1)[1]} for p in parts]
    cid, prop = key.rsplit(".", 1)
    return {"id": cid, "property": prop}


def payload(app: Any, key: str, values: dict[tuple[str, str], Any], changed: list[str] | None = None) -> dict:
    spec = app.callback_map[key]

    def items(deps: list[dict[str, str]]) -> list[dict[str, Any]]:
        return [{**d, "value": values.get((d["id"], d["property"]))} for d in deps]

    return {
        "output": key,
        "outputs": _outputs(key),
        "inputs": items(spec["inputs"]),
        "state": items(spec.get("state", [])),
        "changedPropIds": changed or [],
    }


def call(client: Any, app: Any, key: str, values: dict[tuple[str, str], Any], changed: list[str] | None = None):
    """POST one callback; return (status code, decoded JSON response or None for 204 no-update)."""
    resp = client.post(
        "/_dash-update-component", data=json.dumps(payload(app, key, values, changed)), content_type="application/json"
    )
    body = json.loads(resp.data) if resp.status_code == 200 else None
    return resp.status_code, body


def initial_callbacks(app: Any) -> list[str]:
    """The callbacks the browser fires on page load (all but prevent_initial_call ones)."""
    return [
        c["output"]
        for c in app._callback_list
        if not c.get("prevent_initial_call") and not c.get("clientside_function")
    ]
