"""The dashboard in a real headless Chromium (Debian's `chromium` package, driven by Playwright; no browser download).

Starts `python app.py` on a free 127.0.0.1 port over a synthetic measured-shaped dataset in a temp dir, then: loads the
page, changes the GPU and scheme selections and sees the figures follow, downloads the CSV and checks it against the
table, uploads a bad file and sees the message, uploads a good one and sees it join the session. A screenshot of every
view lands in test-output/screenshots/.
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.dashboard_synthetic import synthetic_measurements, write_dataset
from workbench.dashboard.layout import TAB_LABELS

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-output" / "screenshots"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
VIEWS = TAB_LABELS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is absent (apt-get install chromium; the CI script installs it)")
    pytest.importorskip("playwright.sync_api")
    root = tmp_path_factory.mktemp("data")
    write_dataset(root, synthetic_measurements(gpus=("h200-sxm",)))
    port = _free_port()
    log = open(tmp_path_factory.mktemp("log") / "app.log", "w")  # noqa: SIM115
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "app.py"), "--port", str(port), "--data-dir", str(root)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env=env,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"app.py exited with {proc.returncode}; see {log.name}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("app.py did not start listening within 60 s")
    yield f"http://127.0.0.1:{port}/"
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


@pytest.fixture(scope="module")
def page(server, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        # a fresh profile directory per run (Playwright passes it as --user-data-dir)
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1500, "height": 1100},
            accept_downloads=True,
        )
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        start = time.perf_counter()
        page.goto(server)
        for graph in ("fig-roofline",):
            _wait_traces(page, graph)
        page.first_paint_s = time.perf_counter() - start  # type: ignore[attr-defined]
        page.errors = errors  # type: ignore[attr-defined]
        yield page
        context.close()


def _wait_traces(page, graph_id: str, timeout_ms: int = 30000) -> None:
    page.wait_for_function(
        f"() => {{ const g = document.querySelector('#{graph_id} .js-plotly-plot');"
        " return g && g.data && g.data.length > 0; }",
        timeout=timeout_ms,
    )


def _figure(page, graph_id: str) -> dict:
    return page.evaluate(
        f"() => {{ const g = document.querySelector('#{graph_id} .js-plotly-plot');"
        " return {title: g.layout.title.text, names: g.data.map(t => t.name)}; }"
    )


def _toggle(page, dropdown_id: str, value: str) -> None:
    page.click(f"#{dropdown_id}")
    page.locator(f".dash-dropdown-option:has(input[value='{value}'])").first.click()
    page.keyboard.press("Escape")


def _tab(page, view: str) -> None:
    page.locator(".tab", has_text=VIEWS[view]).first.click()


def _stable_text(page, selector: str, polls: int = 3, every_ms: int = 250) -> str:
    """The text of `selector` once no Dash callback is loading and it reads the same `polls` times in a row (a view
    reached right after other controls changed may still be redrawing for their earlier state)."""
    last, same = None, 0
    for _ in range(80):
        page.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')")
        text = page.inner_text(selector)
        same = same + 1 if text == last else 1
        last = text
        if same >= polls:
            return text
        page.wait_for_timeout(every_ms)
    raise AssertionError(f"{selector} kept changing: last read {last!r}")


def test_first_paint_and_every_view_screenshot(page):
    SHOTS.mkdir(parents=True, exist_ok=True)
    print(f"browser first paint (goto -> roofline drawn): {page.first_paint_s * 1e3:.0f} ms")
    assert "H200" in _figure(page, "fig-roofline")["title"]
    for view in VIEWS:
        _tab(page, view)
        if view in ("hypotheses", "table"):
            page.wait_for_selector(f"#{'tbl-hypotheses' if view == 'hypotheses' else 'tbl-comparison'} table")
        else:
            graph = {"compare": "fig-gpu-compare"}.get(view, f"fig-{view}")
            _wait_traces(page, graph)
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / f"{view}.png"), full_page=True)
    assert set(VIEWS) <= {p.stem for p in SHOTS.glob("*.png")}
    assert not page.errors


def test_gpu_and_scheme_selection_update_the_figures(page):
    _tab(page, "roofline")
    before = _figure(page, "fig-roofline")
    assert not any(n.startswith("fp32") for n in before["names"])
    _toggle(page, "ctl-schemes", "fp32")
    page.wait_for_function(
        "() => document.querySelector('#fig-roofline .js-plotly-plot').data.some(t => t.name.startsWith('fp32'))"
    )
    _toggle(page, "ctl-gpus", "h200-sxm")  # the H100 (no measurements) becomes the primary GPU
    page.wait_for_function(
        "() => document.querySelector('#fig-roofline .js-plotly-plot').layout.title.text.includes('H100')"
    )
    after = _figure(page, "fig-roofline")
    assert not any(n.endswith("measured") for n in after["names"])
    assert "predictions only" in page.inner_text("#status-banner")
    page.screenshot(path=str(SHOTS / "roofline-h100-predictions-only.png"), full_page=True)
    _toggle(page, "ctl-gpus", "h200-sxm")  # back: now the second GPU
    _toggle(page, "ctl-schemes", "fp32")


def test_csv_download_is_the_table_rows(page):
    _tab(page, "table")
    page.wait_for_selector("#tbl-comparison table")
    page.wait_for_function("() => /^\\d+ rows/.test(document.querySelector('#tbl-count').innerText)")
    count = int(_stable_text(page, "#tbl-count").split(" ", 1)[0])
    with page.expect_download() as info:
        page.click("#btn-download")
    download = info.value
    frame = pd.read_csv(io.StringIO(Path(download.path()).read_text()))
    assert len(frame) == count > 0
    assert {"gpu_key", "kernel", "time_measured_s", "achieved_bytes_per_s"} <= set(frame.columns)
    assert frame["time_measured_s"].between(1e-7, 1e-1).all()  # raw seconds
    first_shown = float(page.locator("#tbl-comparison td[data-dash-column='t_meas_us']").first.inner_text())
    assert frame["time_measured_s"].iloc[0] * 1e6 == pytest.approx(first_shown, abs=0.006)


def test_bad_upload_shows_a_message_and_a_good_one_joins(page):
    page.set_input_files(
        "#upload input[type=file]", files=[{"name": "bad.csv", "mimeType": "text/csv", "buffer": b"x,y\n1,2\n"}]
    )
    page.wait_for_function("() => document.querySelector('#upload-message').innerText.includes('rejected')")
    assert "bad.csv" in page.inner_text("#upload-message")
    page.screenshot(path=str(SHOTS / "upload-rejected.png"))
    good = synthetic_measurements(gpus=("l40s",), seed=5).to_csv(index=False).encode()
    page.set_input_files(
        "#upload input[type=file]", files=[{"name": "l40s.csv", "mimeType": "text/csv", "buffer": good}]
    )
    page.wait_for_function("() => document.querySelector('#upload-message').innerText.includes('Added l40s.csv')")
    _toggle(page, "ctl-gpus", "l40s")
    page.wait_for_function("() => document.querySelector('#status-banner').innerText.includes('l40s.csv')")
    assert not page.errors
