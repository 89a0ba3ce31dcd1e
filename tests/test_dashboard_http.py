"""The dashboard over HTTP with Flask's test client: the page, the layout, and callback round trips."""

from __future__ import annotations

import base64
import re

import pytest

pytest.importorskip("dash")

from tests.dash_requests import call, initial_callbacks, key, layout_values  # noqa: E402
from tests.dashboard_synthetic import synthetic_measurements, write_dataset  # noqa: E402
from workbench.interfaces.dashboard import ids  # noqa: E402
from workbench.interfaces.dashboard.factory import create_app  # noqa: E402


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_dataset(root, synthetic_measurements(gpus=("h200-sxm",)))
    return create_app(root)


@pytest.fixture()
def client(app):
    return app.server.test_client()


def test_page_layout_and_dependencies(app, client):
    page = client.get("/")
    assert page.status_code == 200 and b"Roofline workbench" in page.data
    layout = client.get("/_dash-layout")
    assert layout.status_code == 200
    for component in (ids.GPUS, ids.ROOFLINE, ids.TABLE, ids.UPLOAD, ids.DOWNLOAD):
        assert component.encode() in layout.data
    deps = client.get("/_dash-dependencies").get_json()
    outputs = {d["output"] for d in deps}
    assert _views_key(app) in outputs and f"{ids.DOWNLOAD}.data" in outputs


def _views_key(app) -> str:
    return next(k for k in app.callback_map if f"{ids.ROOFLINE}.children" in k)


def _figure(body: dict, view: str):
    """The open view's figure in a main-callback answer: mounted in its slot (first visit) or updated in place."""
    response = body["response"]
    if key(ids.graph_id(view)) in response:
        return response[key(ids.graph_id(view))]["figure"]
    if ids.FIGURES[view] in response:
        return response[ids.FIGURES[view]]["children"][0]["props"]["figure"]
    return None


def _figures(body: dict) -> list[str]:
    """The views whose figure an answer carries."""
    return [v for v in ids.FIGURES if _figure(body, v) is not None]


def _mount(values: dict, body: dict) -> None:
    """Apply an answer to `values` as the page would: slots filled (their components' props), tokens kept."""

    def walk(node) -> None:
        if isinstance(node, list):
            for child in node:
                walk(child)
        elif isinstance(node, dict) and "props" in node:
            if "id" in node["props"]:
                for p, v in node["props"].items():
                    values[(key(node["props"]["id"]), p)] = v
            walk(node["props"].get("children"))

    for cid, props in body["response"].items():
        for prop, value in props.items():
            values[(cid, prop)] = value
            if prop == "children" and cid in ids.SLOTS.values():
                walk(value)


def test_the_first_layout_draws_the_open_view_and_nothing_fires_on_load(app, client):
    assert initial_callbacks(app) == []  # the layout carries what the main callback would answer
    values = layout_values(app)
    assert values[(key(ids.graph_id("roofline")), "figure")]["data"]  # the figure's JSON dict (callbacks.view_json)
    assert values[(ids.PREFETCH, "data")] == ""  # not None: dcc.Store would mount None as a change, firing _main
    assert values[(ids.STATUS, "children")]
    assert values[(ids.TIME, "children")] is None  # other views: mounted on their first visit
    assert set(values[(ids.FIGURE_KEYS, "data")]) == {"roofline", "status"}
    assert values[(ids.pane_id("roofline"), "className")] == "pane open"
    assert values[(ids.pane_id("time"), "className")] == "pane"
    table = layout_values_for(app, client, "?view=table")
    assert table[(key(ids.grid_id("table")), "rowData")] and "rows" in table[(key(ids.grid_note_id("table")),
                                                                                "children")]  # fmt: skip
    tag = re.compile(rb'<script src="[^"]*/dash_ag_grid/[^"]*\.js"')
    assert tag.search(client.get("/?view=table").data)  # the grid is in the first layout: its bundle loads up front
    assert not tag.search(client.get("/").data)  # else on a grid view's first visit (wiring.PANES_JS)
    page = client.get("/").data.decode()  # scripts the first view does not run are off the page (factory.py)
    assert "polyfill@" not in page and "dash_table/bundle" not in page and "regeneratorRuntime" in page
    first, again = client.get("/_dash-layout"), client.get("/_dash-layout")  # the second from factory.cache_layouts
    assert first.status_code == again.status_code == 200 and first.data == again.data
    assert client.get("/assets/regenerator-runtime.js").status_code == 200


def test_only_the_open_tab_is_computed(app, client):
    values = layout_values(app)
    status, body = call(client, app, _views_key(app), values)
    assert status == 200 and not _figures(body) and ids.STATUS not in body["response"]  # the page holds both
    values[(ids.FIGURE_KEYS, "data")] = {}
    status, body = call(client, app, _views_key(app), values)
    assert status == 200 and _figures(body) == ["roofline"] and ids.STATUS in body["response"]
    assert key(ids.graph_id("roofline")) in body["response"]  # mounted: updated in place
    _mount(values, body)
    values[(ids.OPEN_VIEW, "data")] = "speedup"
    status, body = call(client, app, _views_key(app), values, [f"{ids.OPEN_VIEW}.data"])
    assert _figures(body) == ["speedup"] and ids.SPEEDUP in body["response"]  # first visit: mounted in its slot
    assert ids.TABLE not in body["response"] and ids.HYPOTHESES not in body["response"]
    assert set(body["response"][ids.FIGURE_KEYS]["data"]) == {"roofline", "speedup", "status"}
    _mount(values, body)
    values[(ids.OPEN_VIEW, "data")] = "table"
    status, body = call(client, app, _views_key(app), values, [f"{ids.OPEN_VIEW}.data"])
    assert not _figures(body)  # no figure on the table tab
    grid = body["response"][ids.TABLE]["children"][1]["props"]
    assert grid["rowData"] and grid["id"] == ids.grid_id("table")
    _mount(values, body)
    values[(ids.OPEN_VIEW, "data")] = "roofline"
    status, body = call(client, app, _views_key(app), values, [f"{ids.OPEN_VIEW}.data"])
    assert not _figures(body) and set(body["response"]) == {ids.URL}  # revisited, unchanged: nothing to draw
    values[(ids.URL, "search")] = body["response"][ids.URL]["search"]
    values[(ids.TIER, "value")] = "floor"
    status, body = call(client, app, _views_key(app), values, [f"{ids.TIER}.value"])
    assert _figures(body) == ["roofline"]  # a new selection: sent
    _mount(values, body)
    values[(ids.OPEN_VIEW, "data")] = "table"
    status, body = call(client, app, _views_key(app), values, [f"{ids.OPEN_VIEW}.data"])
    assert body["response"][key(ids.grid_id("table"))]["rowData"]  # the mounted grid: its rows in place
    assert "rows" in body["response"][key(ids.grid_note_id("table"))]["children"]


def test_url_follows_the_controls_and_the_layout_reads_it_back(app, client):
    values = layout_values(app)
    values[(ids.BATCH_LO, "value")] = 4
    values[(ids.BATCH_HI, "value")] = 64
    values[(ids.GPUS, "value")] = ["h100-sxm", "h200-sxm"]
    values[(ids.PRIMARY, "value")] = "h200-sxm"
    values[(ids.OPEN_VIEW, "data")] = "time"
    status, body = call(client, app, _views_key(app), values, [f"{ids.BATCH_LO}.value"])
    search = body["response"][ids.URL]["search"]
    assert "m_lo=4" in search and "m_hi=64" in search and "gpus=h100-sxm,h200-sxm" in search and "view=time" in search
    restored = layout_values_for(app, client, search)
    assert restored[(ids.BATCH_LO, "value")] == 4 and restored[(ids.BATCH_HI, "value")] == 64
    assert restored[(ids.BATCH, "value")] == [2, 6]
    assert restored[(ids.GPUS, "value")] == ["h100-sxm", "h200-sxm"] and restored[(ids.PRIMARY, "value")] == "h200-sxm"
    assert restored[(ids.TABS, "value")] == "time" and restored[(ids.OPEN_VIEW, "data")] == "time"
    junk = layout_values_for(app, client, "?gpus=nope,h100-sxm&m_lo=abc&view=../../etc&tier=%00&shape=9x")
    assert junk[(ids.GPUS, "value")] == ["h100-sxm"] and junk[(ids.BATCH_LO, "value")] == 1
    assert junk[(ids.TABS, "value")] == "roofline"


def layout_values_for(app, client, search: str) -> dict:
    """Control values of the layout served to a page whose URL carries `search` (the Referer of the request)."""
    resp = client.get("/_dash-layout", headers={"Referer": "http://127.0.0.1/" + search})
    assert resp.status_code == 200
    values: dict = {}

    def walk(node):
        if isinstance(node, list):
            for child in node:
                walk(child)
        elif isinstance(node, dict) and "props" in node:
            props = node["props"]
            if isinstance(props.get("id"), str | dict):
                for prop, value in props.items():
                    values[(key(props["id"]), prop)] = value
            walk(props.get("children"))

    walk(resp.get_json())
    return values


def test_primary_gpu_is_explicit(app, client):
    """The primary-GPU box follows the GPU box in the browser (wiring.PRIMARY_JS: test_dashboard_browser.py picks
    it there); the main callback draws the primary GPU it is sent."""
    deps = client.get("/_dash-dependencies").get_json()
    spec = next(d for d in deps if f"{ids.PRIMARY}.options" in d["output"])
    assert spec.get("clientside_function") and [i["id"] for i in spec["inputs"]] == [ids.GPUS]
    values = layout_values(app)
    values[(ids.GPUS, "value")] = ["l40s", "h200-sxm"]
    values[(ids.PRIMARY, "value")] = "h200-sxm"
    status, body = call(client, app, _views_key(app), values)
    assert "H200" in _figure(body, "roofline")["layout"]["title"]["text"]


def test_figure_round_trip_follows_the_gpu(app, client):
    values = layout_values(app)
    values[(ids.OPEN_VIEW, "data")] = "time"
    status, body = call(client, app, _views_key(app), values)
    figure = _figure(body, "time")
    assert "H200" in figure["layout"]["title"]["text"]
    assert any("measured" in t["name"] for t in figure["data"])
    values[(ids.GPUS, "value")] = ["l40s"]
    values[(ids.PRIMARY, "value")] = None
    _mount(values, body)
    status, body = call(client, app, _views_key(app), values, [f"{ids.GPUS}.value"])
    figure = _figure(body, "time")
    assert "L40S" in figure["layout"]["title"]["text"]
    assert figure["data"] and all("predicted" in t["name"] for t in figure["data"])
    assert "predictions only" in str(body["response"][ids.STATUS]["children"])


def test_download_and_bad_upload_round_trip(app, client):
    values = layout_values(app)
    values[(ids.DOWNLOAD_BUTTON, "n_clicks")] = 1
    key = f"{ids.DOWNLOAD}.data"
    status, body = call(client, app, key, values, [f"{ids.DOWNLOAD_BUTTON}.n_clicks"])
    csv = body["response"][ids.DOWNLOAD]["data"]["content"]
    assert csv.splitlines()[0].startswith("gpu_key,") and len(csv.splitlines()) > 1
    values[(ids.UPLOAD, "contents")] = "data:text/csv;base64," + base64.b64encode(b"a,b\n1,2\n").decode()
    values[(ids.UPLOAD, "filename")] = "bad.csv"
    upload_key = next(k for k in app.callback_map if ids.UPLOAD_MESSAGE in k)
    status, body = call(client, app, upload_key, values, [f"{ids.UPLOAD}.contents"])
    assert status == 200
    message = body["response"][ids.UPLOAD_MESSAGE]["children"]
    assert "rejected" in message and "missing columns" in message
    assert ids.UPLOAD_STORE not in body["response"]  # the session's data is unchanged


def test_fuzzed_callback_requests_never_give_a_500(app, client):
    """300 malformed requests (the bench fires 1,000 at a live server): no 500, and valid ones still work after."""
    from collections import Counter

    from tests.dash_fuzz import fuzz_bodies

    values = layout_values(app)
    codes: Counter = Counter()
    for label, body in fuzz_bodies(app, values, 300, seed=1):
        resp = client.post("/_dash-update-component", data=body, content_type="application/json")
        codes[(label, resp.status_code)] += 1
        assert resp.status_code != 500, (label, body[:300])
    print("fuzzed callback requests:", dict(codes))
    assert sum(codes.values()) == 300
    values[(ids.FIGURE_KEYS, "data")] = {}
    status, body = call(client, app, _views_key(app), values)
    assert status == 200 and _figure(body, "roofline")["data"]


def test_a_request_over_the_cap_gets_the_upload_message(app, client):
    """Over Flask's request cap the page used to show nothing: the answer is now the upload message."""
    limit = app.server.config["MAX_CONTENT_LENGTH"]
    app.server.config["MAX_CONTENT_LENGTH"] = 2000
    try:
        body = b'{"output": "x", "inputs": [{"id": "upload", "value": "' + b"A" * 4000 + b'"}]}'
        resp = client.post("/_dash-update-component", data=body, content_type="application/json")
    finally:
        app.server.config["MAX_CONTENT_LENGTH"] = limit
    assert resp.status_code == 200
    message = resp.get_json()["response"][ids.UPLOAD_MESSAGE]["children"]
    assert "over the 20 MB limit" in message
