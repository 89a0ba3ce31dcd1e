"""The dashboard's targets measured in real headless Chromium (Debian's `chromium`, driven by Playwright).

1. On a 100k-row measured-shaped dataset (synthetic, in a temp dir; never in data/): first load to the first figure
   drawn (navigation start -> the roofline's SVG holds data), over --loads fresh pages; and a control change to idle
   (the action -> the last callback answered and the last figure redrawn, then 300 ms of quiet) over a cycle of
   scheme toggles, typed batch sizes, slider arrow keys, tier / cache / kernel-view radios, shape and GPU changes and
   tab switches (p95 over all of them, tab switches included). Targets (issue 35): first load <= 1.0 s and p95 <= 200 ms
   on a quiet machine (load average < 2 on these 2 cores), <= 1.5 s / 300 ms at load average 3; the load average is
   printed with the numbers, and the one at the start picks the target the exit code follows.
2. On the shipped data (data/): the legend entries of the default roofline and time views (target <= 12).

    python bench/bench_dashboard_browser.py [--rows 100000] [--cycles 3] [--loads 5] [--load N]

--load N runs N busy processes (one spinning Python loop each) from the start to the end, so the load-3 target can be
measured on purpose (`--load 3` on a quiet machine): the load-3 target then applies, whatever the load at the start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app_server import start_app  # noqa: E402
from tests.dashboard_synthetic import synthetic_measurements, write_dataset  # noqa: E402
from workbench.interfaces.dashboard import ids  # noqa: E402
from workbench.interfaces.dashboard.layout import TAB_LABELS  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
QUIET_LOAD = 2.0  # load average (1 min) below which the machine counts as quiet
LIMITS_S = {"quiet": (1.0, 0.200), "load 3": (1.5, 0.300)}  # first figure, control change p95
LEGEND_LIMIT = 12
# in-page instrumentation: callbacks in flight, Plotly draws in flight, and the time the last of either finished
# (Plotly.react / newPlot are wrapped when dcc.Graph's async chunk defines window.Plotly)
PROBE = """
(() => {
  window.__pending = 0; window.__seen = 0; window.__last = 0; window.__drawing = 0;
  const done = () => { window.__last = Math.max(window.__last, performance.now()); };
  const orig = window.fetch;
  window.fetch = function(input, init) {
    const url = typeof input === 'string' ? input : (input && input.url) || '';
    const dash = url.includes('_dash-update-component');
    if (dash) { window.__pending++; window.__seen++; }
    const p = orig.apply(this, arguments);
    if (dash) { p.then(r => r.clone().text()).catch(() => null).finally(() => { window.__pending--; done(); }); }
    return p;
  };
  let plotly;
  Object.defineProperty(window, 'Plotly', {configurable: true, get() { return plotly; }, set(v) {
    plotly = v;
    for (const name of ['react', 'newPlot']) {
      const fn = v[name];
      v[name] = function() {
        window.__drawing++;
        const out = Promise.resolve(fn.apply(this, arguments));
        out.finally(() => { window.__drawing--; requestAnimationFrame(done); });
        return out;
      };
    }
  }});
})();
"""
# idle: nothing in flight, 300 ms without a DOM change, and a callback was sent (or 1 s passed: a no-op action)
IDLE = ("() => window.__pending === 0 && window.__drawing === 0 && performance.now() - window.__last > 300"
        " && (window.__seen > %d || performance.now() - %f > 1000)")  # fmt: skip


def busy(n: int) -> list[subprocess.Popen]:
    """N processes that keep one core busy each (the load average climbs towards N in about a minute)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def start(data_dir: Path | None) -> tuple[subprocess.Popen, str]:
    try:
        return start_app(data_dir, 300.0)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None


def first_figure_s(page, url: str) -> float:
    page.goto(url)
    handle = page.wait_for_function(
        "() => { const g = document.querySelector('#fig-roofline .js-plotly-plot');"
        " return g && g.data && g.data.length > 0 && g.querySelector('.main-svg .scatterlayer .trace')"
        " ? performance.now() : false; }",
        timeout=120000,
        polling="raf",
    )
    return float(handle.json_value()) / 1e3


def settle(page) -> None:
    page.wait_for_function(
        "() => window.__pending === 0 && window.__drawing === 0 && performance.now() - window.__last > 300",
        timeout=120000,
    )


def timed(page, action) -> float:
    """Seconds from just before `action` to the page going idle (last callback answered, last figure redrawn)."""
    settle(page)
    seen = page.evaluate("() => window.__seen")
    t0 = page.evaluate("() => performance.now()")
    action()
    page.wait_for_function(IDLE % (seen, t0), timeout=120000)
    return max(0.0, page.evaluate("() => window.__last") - t0) / 1e3


def _option(page, dropdown: str, value: str):
    page.click(f"#{dropdown}")
    option = page.locator(f".dash-dropdown-option:has(input[value='{value}'])").first
    option.wait_for()

    def act():
        option.click()

    return act


def _close(page) -> None:
    page.keyboard.press("Escape")


def _type(page, box: str, value: str):
    def act():
        page.fill(f"#{box}", value)
        page.press(f"#{box}", "Enter")

    return act


def _radio(page, group: str, value: str):
    return lambda: page.locator(f"#{group} input[value='{value}']").check()


def _tab(page, view: str):
    return lambda: page.locator(".tab", has_text=TAB_LABELS[view]).first.click()


def _arrow(page, key: str):
    def act():
        page.locator(f"#{ids.BATCH} [role=slider]").last.focus()
        page.keyboard.press(key)

    return act


def control_changes(page, cycles: int) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []

    def run(name: str, act, close: bool = False) -> None:
        out.append((name, timed(page, act)))
        if close:
            _close(page)

    for _ in range(cycles):
        for view in ("time", "roofline"):
            run(f"tab {view}", _tab(page, view))
            run("scheme +fp32", _option(page, ids.SCHEMES, "fp32"), close=True)
            run("scheme -fp32", _option(page, ids.SCHEMES, "fp32"), close=True)
            run("type M max 64", _type(page, ids.BATCH_HI, "64"))
            run("type M max 256", _type(page, ids.BATCH_HI, "256"))
            run("slider ArrowLeft", _arrow(page, "ArrowLeft"))
            run("slider ArrowRight", _arrow(page, "ArrowRight"))
            run("tier datasheet", _radio(page, ids.TIER, "datasheet"))
            run("tier floor", _radio(page, ids.TIER, "floor"))
            run("cache hot", _radio(page, ids.MODE, "hot"))
            run("cache cold", _radio(page, ids.MODE, "cold"))
            run("every kernel", _radio(page, ids.KERNEL_VIEW, "all"))
            run("best kernel", _radio(page, ids.KERNEL_VIEW, "best"))
            run("shape 4096x4096", _option(page, ids.SHAPE, "4096x4096"))
            run("shape 22016x4096", _option(page, ids.SHAPE, "22016x4096"))
            run("shape model", _option(page, ids.SHAPE, "model:llama-2-7b"))
            run("shape 22016x4096", _option(page, ids.SHAPE, "22016x4096"))
            run("gpu +a100", _option(page, ids.GPUS, "a100-sxm-80gb"), close=True)
            run("gpu -a100", _option(page, ids.GPUS, "a100-sxm-80gb"), close=True)
        for view in ("speedup", "error", "compare", "rollup", "roofline"):
            run(f"tab {view}", _tab(page, view))
    return out


def legend_entries(page, url: str) -> dict[str, int]:
    first_figure_s(page, url)
    counts = {}
    for view in ("roofline", "time"):
        page.locator(".tab", has_text=TAB_LABELS[view]).first.click()
        graph = ids.FIGURES[view]
        page.wait_for_function(f"() => document.querySelector('#{graph} .legend .traces')", timeout=120000)
        settle(page)
        counts[view] = page.evaluate(f"() => document.querySelectorAll('#{graph} .legend .traces').length")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--load", type=int, default=0, help="busy processes run alongside (CPU load N)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    load0 = os.getloadavg()
    spinners = busy(args.load)
    try:
        return measure(args, load0, sync_playwright)
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait(timeout=10)


def measure(args: argparse.Namespace, load0: tuple[float, float, float], sync_playwright) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-browser-") as tmp:
        root = Path(tmp)
        frame = synthetic_measurements(args.rows, gpus=("h200-sxm", "h100-sxm", "a100-sxm-80gb"), modes=("cold", "hot"))
        write_dataset(root, frame)
        for toml in (ROOT / "data" / "hypotheses").glob("*.toml"):
            shutil.copy(toml, root / "hypotheses" / toml.name)
        procs = []
        try:
            proc, url = start(root)
            procs.append(proc)
            shipped, shipped_url = start(None)
            procs.append(shipped)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
                context = browser.new_context(viewport={"width": 1500, "height": 1100})
                context.add_init_script(PROBE)
                loads = []
                for _ in range(args.loads + 1):  # the first load warms the server's and the browser's caches
                    page = context.new_page()
                    loads.append(first_figure_s(page, url))
                    page.close()
                loads = loads[1:]
                page = context.new_page()
                first_figure_s(page, url)
                changes = control_changes(page, args.cycles)
                legend_page = context.new_page()
                legends = legend_entries(legend_page, shipped_url)
                browser.close()
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=10)
    load = os.getloadavg()
    lat = np.array([t for _, t in changes])
    tabs = np.array([t for name, t in changes if name.startswith("tab ")])
    p50, p95, mx = (float(np.percentile(lat, q)) for q in (50, 95, 100))
    first = float(max(loads))
    made = f", {args.load} of it this bench's busy processes" if args.load else " (other users of the machine)"
    print(f"dataset: {len(frame)} measured-shaped rows (synthetic, temp dir); {CHROMIUM}; {os.cpu_count()} CPUs; "
          f"load average (1 min) at the start {load0[0]:.1f}, at the end {load[0]:.1f}{made}")
    print(f"first load -> first figure drawn (from navigation start), {len(loads)} fresh pages: "
          f"median {np.median(loads):.2f} s, max {first:.2f} s")  # fmt: skip
    print(f"control change -> idle, {len(lat)} changes incl. {len(tabs)} tab switches: p50 {p50 * 1e3:.0f} ms, "
          f"p95 {p95 * 1e3:.0f} ms, max {mx * 1e3:.0f} ms; tab switches alone p95 "
          f"{np.percentile(tabs, 95) * 1e3:.0f} ms")  # fmt: skip
    slowest = sorted(changes, key=lambda kv: -kv[1])[:6]
    print("  slowest: " + ", ".join(f"{name} {t * 1e3:.0f} ms" for name, t in slowest))
    shown = f"roofline {legends['roofline']}, time {legends['time']}"
    print(f"legend entries, shipped data: {shown} [limit {LEGEND_LIMIT}]")
    verdicts = {}
    for name, (first_limit, p95_limit) in LIMITS_S.items():
        verdicts[name] = first <= first_limit and p95 <= p95_limit and max(legends.values()) <= LEGEND_LIMIT
        print(f"target {name}: first figure (max) <= {first_limit} s, p95 <= {p95_limit * 1e3:.0f} ms: "
              f"{'met' if verdicts[name] else 'missed'}")
    # at the start: before this bench adds its own browser and servers (or with --load, the load it makes)
    applies = "quiet" if load0[0] < QUIET_LOAD and not args.load else "load 3"
    print(f"PASS ({applies} target)" if verdicts[applies] else f"FAIL ({applies} target; see the numbers above)")
    return 0 if verdicts[applies] else 1


if __name__ == "__main__":
    sys.exit(main())
