"""The dashboard over HTTP with Flask's test client: the page, the layout, and callback round trips."""

from __future__ import annotations

import base64

import pytest

pytest.importorskip("dash")

from tests.dash_requests import call, initial_callbacks, layout_values  # noqa: E402
from tests.dashboard_synthetic import synthetic_measurements, write_dataset  # noqa: E402
from workbench.dashboard import ids  # noqa: E402
from workbench.dashboard.factory import create_app  # noqa: E402


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
    assert f"{ids.ROOFLINE}.figure" in outputs and f"{ids.DOWNLOAD}.data" in outputs


def test_initial_callbacks_all_answer(app, client):
    values = layout_values(app)
    for key in initial_callbacks(app):
        status, body = call(client, app, key, values)
        assert status == 200, key
        assert body["multi"] is True and body["response"], key


def test_figure_round_trip_follows_the_gpu(app, client):
    values = layout_values(app)
    status, body = call(client, app, f"{ids.TIME}.figure", values)
    figure = body["response"][ids.TIME]["figure"]
    assert "H200" in figure["layout"]["title"]["text"]
    assert any(t["name"].endswith("measured") for t in figure["data"])
    values[(ids.GPUS, "value")] = ["l40s"]
    status, body = call(client, app, f"{ids.TIME}.figure", values, [f"{ids.GPUS}.value"])
    figure = body["response"][ids.TIME]["figure"]
    assert "L40S" in figure["layout"]["title"]["text"]
    assert figure["data"] and all("predicted" in t["name"] for t in figure["data"])
    status, body = call(client, app, f"{ids.STATUS}.children", values)
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
