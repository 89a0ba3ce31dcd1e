"""Regenerate the dashboard screenshots in docs/dashboard/ (one per view, plus a few states) from the shipped data,
in Debian's headless Chromium driven by Playwright.

    python scripts/dashboard_screenshots.py [--out docs/dashboard] [--data-dir data]

Each view is reached through its URL (the page state lives in the query string), so every picture is reproducible
from the link printed beside it.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.dashboard import ids  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
# file name -> query string (on top of the defaults)
SHOTS = {
    **{view: f"?view={view}" for view in ids.TAB_VALUES},
    "roofline-every-kernel": "?view=roofline&kernel_view=all",
    "time-every-kernel": "?view=time&kernel_view=all",
    "time-batch-1-16": "?view=time&m_lo=1&m_hi=16",
    "rollup-llama-2-7b": "?view=rollup&shape=model:llama-2-7b",
    "compare-roofline": "?view=compare&compare=roofline",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "dashboard"))
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    cmd = [sys.executable, str(ROOT / "app.py"), "--port", str(port)]
    cmd += ["--data-dir", args.data_dir] if args.data_dir else []
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.time() + 300
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise SystemExit("app.py did not start") from None
                time.sleep(0.3)
        base = f"http://127.0.0.1:{port}/"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.set_default_timeout(120000)
            for name, query in SHOTS.items():
                page.goto(base + query)
                view = query.split("view=")[1].split("&")[0]
                if view in ids.FIGURES:
                    page.wait_for_function(
                        f"() => {{ const g = document.querySelector('#{ids.FIGURES[view]} .js-plotly-plot');"
                        " return g && g.layout && g.querySelector('.main-svg'); }"
                    )
                else:
                    grid = ids.HYPOTHESES if view == "hypotheses" else ids.TABLE
                    page.wait_for_selector(f"#{grid} .ag-row")
                page.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')")
                page.wait_for_timeout(400)  # let Plotly finish its transitions before the picture
                page.screenshot(path=str(out / f"{name}.png"), full_page=True)
                print(f"{out / (name + '.png')}  <- {query}")
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
