"""Make the dashboard screenshots (one per view, plus a few states) from the shipped data, in Debian's headless
Chromium driven by Playwright, into screenshots/dashboard/ (ignored by git: pictures are made, not kept; the last set
kept in git is at commit 6d77402, `git show 6d77402:docs/dashboard/time.png > time.png`).

    python scripts/dashboard_screenshots.py [--out screenshots/dashboard] [--data-dir data]

Each view is reached through its URL (the page state lives in the query string), so every picture is reproducible
from the link printed beside it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app_server import start_app  # noqa: E402
from workbench.interfaces.dashboard import ids  # noqa: E402

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "screenshots" / "dashboard"))
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        proc, base = start_app(args.data_dir, 300.0)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None
    try:
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
