"""The dashboard in a real headless Chromium (Debian's `chromium` package, driven by Playwright; no browser download).

Starts `python app.py` on a free 127.0.0.1 port over a synthetic measured-shaped dataset in a temp dir, then: loads the
page and screenshots every view, types batch sizes into the boxes, round-trips the URL, picks the primary GPU, checks
the legend grouping, counts the callbacks one control change fires (only the open view's figure comes back), downloads
the CSV, and uploads bad and good files. Screenshots land in test-output/screenshots/. Waits are generous (a slow,
shared machine): every wait is for a condition, never a fixed sleep standing in for one.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from tests.app_server import start_app
from tests.dashboard_synthetic import synthetic_measurements, write_dataset
from workbench.interfaces.dashboard import ids
from workbench.interfaces.dashboard.layout import TAB_LABELS

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-output" / "screenshots"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
VIEWS = TAB_LABELS
WAIT_MS = 60000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is absent (apt-get install chromium; the CI script installs it)")
    pytest.importorskip("playwright.sync_api")
    root = tmp_path_factory.mktemp("data")
    write_dataset(root, synthetic_measurements(gpus=("h200-sxm",)))
    log = open(tmp_path_factory.mktemp("log") / "app.log", "w")  # noqa: SIM115
    try:
        proc, url = start_app(root, 120.0, log)
    except RuntimeError as exc:
        pytest.fail(f"{exc}; see {log.name}")
    yield url
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


@pytest.fixture(scope="module")
def browser_context(server, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1500, "height": 1100},
            accept_downloads=True,
        )
        context.set_default_timeout(WAIT_MS)
        yield context
        context.close()


@pytest.fixture(scope="module")
def page(browser_context, server):
    page = browser_context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server)
    _wait_traces(page, ids.ROOFLINE)
    page.errors = errors  # type: ignore[attr-defined]
    return page


def _wait_traces(page, graph_id: str) -> None:
    page.wait_for_function(
        f"() => {{ const g = document.querySelector('#{graph_id} .js-plotly-plot');"
        " return g && g.data && g.data.length > 0; }",
        timeout=WAIT_MS,
    )


def _idle(page) -> None:
    page.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')", timeout=WAIT_MS)


def _figure(page, graph_id: str) -> dict:
    return page.evaluate(
        f"() => {{ const g = document.querySelector('#{graph_id} .js-plotly-plot');"
        " return {title: g.layout.title.text, names: g.data.map(t => t.name),"
        " legend: g.data.filter(t => t.showlegend !== false).map(t => [t.name, t.legendgroup]),"
        " x: g._fullData.map(t => Array.from(t.x || []))}; }"
    )


def _toggle(page, dropdown_id: str, value: str) -> None:
    page.click(f"#{dropdown_id}")
    page.locator(f".dash-dropdown-option:has(input[value='{value}'])").first.click()
    page.keyboard.press("Escape")


def _tab(page, view: str) -> None:
    page.locator(".tab", has_text=VIEWS[view]).first.click()


def _type(page, box_id: str, value: str) -> None:
    box = page.locator(f"#{box_id}")
    box.fill(value)
    box.press("Enter")  # debounce: the value is sent on Enter / blur


def _stable_text(page, selector: str, polls: int = 3, every_ms: int = 250) -> str:
    last, same = None, 0
    for _ in range(160):
        _idle(page)
        text = page.inner_text(selector)
        same = same + 1 if text == last else 1
        last = text
        if same >= polls:
            return text
        page.wait_for_timeout(every_ms)
    raise AssertionError(f"{selector} kept changing: last read {last!r}")


def test_every_view_draws_and_is_screenshot(page):
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert "H200" in _figure(page, ids.ROOFLINE)["title"]
    for view in VIEWS:
        _tab(page, view)
        if view == "hypotheses":
            page.wait_for_selector(f"#{ids.HYPOTHESES} .ag-row")
        elif view == "table":
            page.wait_for_selector(f"#{ids.TABLE} .ag-row")
        elif view == "ladder":  # the synthetic rows hold no ladder kernel: the view says so (drawn: test_fig_ladder)
            page.wait_for_selector(f"#{ids.FIGURES[view]} .js-plotly-plot")
            assert "no kernel of the W4A16 ladder" in _stable_text(page, f"#{ids.FIGURES[view]}")
        else:
            # attribution may draw no traces
            _wait_traces(page, ids.FIGURES[view]) if view != "attribution" else page.wait_for_selector(
                f"#{ids.FIGURES[view]} .js-plotly-plot")  # fmt: skip
        _idle(page)
        page.screenshot(path=str(SHOTS / f"{view}.png"), full_page=True)
    assert set(VIEWS) <= {p.stem for p in SHOTS.glob("*.png")}
    assert not page.errors
    _tab(page, "roofline")


def test_default_legends_are_grouped_and_short(page):
    for view in ("roofline", "time"):
        _tab(page, view)
        _wait_traces(page, ids.FIGURES[view])
        legend = _figure(page, ids.FIGURES[view])["legend"]
        assert 0 < len(legend) <= 12, legend
        for name, group in legend:
            assert name.startswith(group), (name, group)  # each entry sits in its scheme's group
    _tab(page, "roofline")


def test_typed_batch_values_move_the_slider_and_the_figures(page):
    _tab(page, "time")
    _wait_traces(page, ids.TIME)
    _type(page, ids.BATCH_HI, "64")
    page.wait_for_function("() => location.search.includes('m_hi=64')", timeout=WAIT_MS)
    page.wait_for_function(  # _fullData: the decoded arrays (data keeps the base64 form)
        "() => Math.max(...document.querySelector('#fig-time .js-plotly-plot')._fullData"
        ".flatMap(t => Array.from(t.x || []))) === 64"
    )
    handles = page.locator(f"#{ids.BATCH} [role=slider]")
    assert handles.last.get_attribute("aria-valuenow") == "6"  # 2^6 = 64: the slider followed the typed value
    assert page.locator(f"#{ids.BATCH_HI}").input_value() == "64"  # and the box kept it
    _type(page, ids.BATCH_LO, "4")
    page.wait_for_function("() => location.search.includes('m_lo=4')", timeout=WAIT_MS)
    assert handles.first.get_attribute("aria-valuenow") == "2"


def test_url_round_trip_restores_the_view(browser_context, page, server):
    _tab(page, "speedup")
    _wait_traces(page, ids.SPEEDUP)
    page.wait_for_function("() => location.search.includes('view=speedup')", timeout=WAIT_MS)
    search = page.evaluate("() => location.search")
    other = browser_context.new_page()
    other.goto(server + search)
    _wait_traces(other, ids.SPEEDUP)
    assert other.locator(f"#{ids.BATCH_HI}").input_value() == page.locator(f"#{ids.BATCH_HI}").input_value()
    assert other.locator(f"#{ids.BATCH_LO}").input_value() == page.locator(f"#{ids.BATCH_LO}").input_value()
    assert "tab--selected" in (other.locator(f"#{ids.tab_id('speedup')}").get_attribute("class") or "")
    other.reload()
    _wait_traces(other, ids.SPEEDUP)
    assert other.evaluate("() => location.search") == search
    other.close()


def test_one_control_change_recomputes_only_the_open_view(page):
    _tab(page, "roofline")
    _wait_traces(page, ids.ROOFLINE)
    _idle(page)
    responses: list = []

    def record(response):  # bodies are read after the change (not inside Playwright's event handler)
        if "/_dash-update-component" in response.url:  # Dash 4 adds ?endId=...
            responses.append(response)

    before = _figure(page, ids.ROOFLINE)["names"]
    assert not any(n.startswith("fp32") for n in before), before
    page.on("response", record)
    _toggle(page, ids.SCHEMES, "fp32")
    page.wait_for_function(
        "() => document.querySelector('#fig-roofline .js-plotly-plot').data"
        ".some(t => (t.name || '').startsWith('fp32'))"
    )
    _idle(page)
    page.wait_for_timeout(500)
    page.remove_listener("response", record)
    bodies = [json.loads(r.body()) for r in responses if r.status == 200]
    print(f"one control change: {len(responses)} callback requests, figures returned: "
          f"{[k for b in bodies for k, v in b.get('response', {}).items() if 'figure' in v]}")  # fmt: skip
    figures = [json.loads(k) for b in bodies for k, v in b.get("response", {}).items() if "figure" in v]
    assert figures == [ids.graph_id("roofline")], figures  # the mounted roofline graph, updated in place
    _toggle(page, ids.SCHEMES, "fp32")


def test_moe_view_follows_its_controls_and_the_url(page):
    _tab(page, "moe")
    _wait_traces(page, ids.MOE)
    assert "Qwen3-30B-A3B" in _figure(page, ids.MOE)["title"]
    assert any("touched experts" in n for n in _figure(page, ids.MOE)["names"])
    page.locator(f"#{ids.MOE_ROUTING} input[value='zipf:1']").check()
    page.wait_for_function("() => document.querySelector('#fig-moe .js-plotly-plot').layout.title.text"
                           ".includes('zipf:1 routing')")  # fmt: skip
    page.wait_for_function("() => location.search.includes('moe_routing=zipf:1')")
    page.locator(f"#{ids.MOE_ROUTING} input[value='uniform']").check()
    page.wait_for_function("() => location.search.includes('moe_routing=uniform')")
    _tab(page, "roofline")


def test_primary_gpu_is_chosen_explicitly(page):
    _tab(page, "roofline")
    _toggle(page, ids.GPUS, "h200-sxm")  # removed: the H100 (no measurements) becomes primary
    page.wait_for_function("() => document.querySelector('#fig-roofline .js-plotly-plot').layout.title.text"
                           ".includes('H100')")  # fmt: skip
    assert "predictions only" in page.inner_text(f"#{ids.STATUS}")
    _toggle(page, ids.GPUS, "h200-sxm")  # back, now second in the list
    _idle(page)
    page.click(f"#{ids.PRIMARY}")
    page.wait_for_selector(".dash-dropdown-option input")  # the menu renders after the click, not with it
    shown = page.locator(".dash-dropdown-option input").evaluate_all("els => els.map(e => e.value)")
    assert shown == ["h100-sxm", "h200-sxm"], shown  # the selected GPUs, in their order (wiring.PRIMARY_JS)
    page.locator(".dash-dropdown-option", has_text="H200").first.click()
    page.wait_for_function("() => document.querySelector('#fig-roofline .js-plotly-plot').layout.title.text"
                           ".includes('H200')")  # fmt: skip
    page.wait_for_function("() => location.search.includes('primary=h200-sxm')")
    page.screenshot(path=str(SHOTS / "primary-gpu.png"), full_page=True)


def test_csv_download_is_the_grid_rows(page):
    _tab(page, "table")
    page.wait_for_selector(f"#{ids.TABLE} .ag-row")
    page.wait_for_function("() => /^\\d+ rows/.test(document.querySelector('#tbl-count').innerText)")
    count = int(_stable_text(page, f"#{ids.TABLE_COUNT}").split(" ", 1)[0])
    with page.expect_download() as info:
        page.click(f"#{ids.DOWNLOAD_BUTTON}")
    frame = pd.read_csv(io.StringIO(Path(info.value.path()).read_text()))
    assert len(frame) == count > 0
    assert {"gpu_key", "kernel", "time_measured_s", "achieved_bytes_per_s"} <= set(frame.columns)
    assert frame["time_measured_s"].between(1e-7, 1e-1).all()  # raw seconds


def test_uploads_bad_unsupported_and_good(page):
    page.set_input_files(
        "#upload input[type=file]", files=[{"name": "bad.csv", "mimeType": "text/csv", "buffer": b"x,y\n1,2\n"}]
    )
    page.wait_for_function("() => document.querySelector('#upload-message').innerText.includes('rejected')")
    assert "bad.csv" in page.inner_text(f"#{ids.UPLOAD_MESSAGE}")
    page.set_input_files(
        "#upload input[type=file]", files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hello"}]
    )
    page.wait_for_function("() => document.querySelector('#upload-message').innerText.includes('notes.txt')")
    assert "unsupported file type" in page.inner_text(f"#{ids.UPLOAD_MESSAGE}")
    page.screenshot(path=str(SHOTS / "upload-rejected.png"))
    good = synthetic_measurements(gpus=("l40s",), seed=5).to_csv(index=False).encode()
    page.set_input_files(
        "#upload input[type=file]", files=[{"name": "l40s.csv", "mimeType": "text/csv", "buffer": good}]
    )
    page.wait_for_function("() => document.querySelector('#upload-message').innerText.includes('Added l40s.csv')")
    _toggle(page, ids.GPUS, "l40s")
    page.wait_for_function("() => document.querySelector('#status-banner').innerText.includes('l40s.csv')")
    assert not page.errors
