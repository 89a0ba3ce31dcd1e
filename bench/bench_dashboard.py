"""Dashboard latency on a 100k-row measured-shaped dataset (built in a temp dir, never in data/).

Prints: app build time (data load + precompute + warm-up), first paint (GET / + layout + dependencies + every
initial callback, one after another through Flask's test client, JSON included), and p50 / p95 / max of every
callback over repeated calls with varied selections (the view callback builds only the open tab's figure; a repeated
selection is served from the figure cache). Must-holds: first paint <= 2 s, every callback p95 <= 150 ms. The browser
targets (issue 17) are measured by bench/bench_dashboard_browser.py.

    python bench/bench_dashboard.py [--rows 100000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.dash_requests import call, initial_callbacks, key, layout_values  # noqa: E402
from tests.dashboard_synthetic import synthetic_measurements, write_dataset  # noqa: E402
from workbench.interfaces.dashboard import ids  # noqa: E402

FIRST_PAINT_LIMIT_S = 2.0
CALLBACK_P95_LIMIT_S = 0.150

VARIATIONS = {
    (ids.GPUS, "value"): [["h200-sxm", "h100-sxm"], ["a100-sxm-80gb"], ["h100-sxm", "h200-sxm", "l40s"]],
    (ids.PRIMARY, "value"): [None, "h100-sxm"],
    (ids.SCHEMES, "value"): [["bf16", "w8a16", "w4a16", "w8a8", "fp8"], ["bf16", "w4a16"], ["fp32", "bf16", "fp8"]],
    (ids.KERNEL_VIEW, "value"): ["best", "all"],
    (ids.SHAPE, "value"): ["22016x4096", "4096x4096", "model:llama-2-7b", "12288x4096"],
    (ids.BATCH_LO, "value"): [1, 8],
    (ids.BATCH_HI, "value"): [32, 256],
    (ids.TIER, "value"): ["datasheet", "floor"],
    (ids.MODE, "value"): ["cold", "hot"],
    (ids.OPEN_VIEW, "data"): ["roofline", "time", "speedup", "error", "compare", "rollup", "table"],
    (ids.COMPARE_VIEW, "value"): ["time", "speedup", "roofline"],
    (key(ids.grid_id("table")), "filterModel"): [{}, {"M": {"filterType": "number", "type": "greaterThanOrEqual",
                                                            "filter": 8}}],  # fmt: skip
    (key(ids.grid_id("table")), "columnState"): [[], [{"colId": "t_meas_us", "sort": "desc", "sortIndex": 0}]],
    (ids.DOWNLOAD_BUTTON, "n_clicks"): [1],
}


def build(rows: int, root: Path):
    gpus = ("h200-sxm", "h100-sxm", "a100-sxm-80gb")
    t0 = time.perf_counter()
    frame = synthetic_measurements(rows, gpus=gpus, modes=("cold", "hot"))
    write_dataset(root, frame)
    for toml in (ROOT / "data" / "hypotheses").glob("*.toml"):  # the shipped claims, evaluated at load
        shutil.copy(toml, root / "hypotheses" / toml.name)
    t1 = time.perf_counter()
    from workbench.interfaces.dashboard.factory import create_app

    app = create_app(root)
    t2 = time.perf_counter()
    return app, len(frame), t1 - t0, t2 - t1


def first_paint(app) -> tuple[float, dict[str, float]]:
    client = app.server.test_client()
    values = layout_values(app)
    parts = {}
    t0 = time.perf_counter()
    for path in ("/", "/_dash-layout", "/_dash-dependencies"):
        t = time.perf_counter()
        assert client.get(path).status_code == 200
        parts[path] = time.perf_counter() - t
    for spec_key in initial_callbacks(app):
        t = time.perf_counter()
        status, _ = call(client, app, spec_key, values)
        assert status in (200, 204), spec_key
        parts[spec_key] = time.perf_counter() - t
    return time.perf_counter() - t0, parts


def callback_latencies(app, repeats: int) -> dict[str, np.ndarray]:
    client = app.server.test_client()
    base = layout_values(app)
    combos = list(itertools.product(*VARIATIONS.values()))
    rng = np.random.default_rng(0)
    picks = [combos[i] for i in rng.choice(len(combos), size=repeats, replace=False)]
    keys = [c["output"] for c in app._callback_list
            if ids.UPLOAD_MESSAGE not in c["output"] and not c.get("clientside_function")]  # fmt: skip
    out: dict[str, list[float]] = {k: [] for k in keys}
    for pick in picks:
        values = dict(base)
        values.update(dict(zip(VARIATIONS, pick, strict=True)))
        for spec_key in keys:
            t = time.perf_counter()
            status, _ = call(client, app, spec_key, values, [f"{ids.GPUS}.value"])
            out[spec_key].append(time.perf_counter() - t)
            assert status in (200, 204), (spec_key, status)
    return {k: np.array(v) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        app, n, t_data, t_app = build(args.rows, Path(tmp))
        print(f"dataset: {n} measured-shaped rows (synthetic, temp dir), written in {t_data:.2f} s")
        print(f"create_app (load + compare + predict grid + roll-ups + warm-up): {t_app:.2f} s")
        paint, parts = first_paint(app)
        slowest = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
        print(
            f"first paint (page + layout + {len(parts) - 3} initial callbacks, sequential): {paint * 1e3:.0f} ms "
            f"[limit {FIRST_PAINT_LIMIT_S * 1e3:.0f} ms] slowest: "
            + ", ".join(f"{k.strip('.')[:28]} {v * 1e3:.0f} ms" for k, v in slowest)
        )
        lat = callback_latencies(app, args.repeats)
        print(f"\n{'callback':<58} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        worst = 0.0
        for key, values in lat.items():
            p50, p95, mx = (float(np.percentile(values, q)) * 1e3 for q in (50, 95, 100))
            worst = max(worst, p95)
            print(f"{key.strip('.')[:58]:<58} {p50:8.1f} {p95:8.1f} {mx:8.1f}")
        ok = paint <= FIRST_PAINT_LIMIT_S and worst <= CALLBACK_P95_LIMIT_S * 1e3
        print(
            f"\nworst callback p95: {worst:.0f} ms [limit {CALLBACK_P95_LIMIT_S * 1e3:.0f} ms] -> "
            f"{'PASS' if ok else 'FAIL'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
