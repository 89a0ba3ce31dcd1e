"""Fire >= 1,000 fuzzed callback requests (control payloads of the wrong type or size, broken request structure,
junk uploads) at a running dashboard over real HTTP and count the answers; HTTP 500 must stay at 0.

Starts `python app.py` on a free 127.0.0.1 port over the shipped data (or --data-dir), unless --url points at a
server already running. Prints the count per (kind, status) and exits 1 if any request got a 500.

    python bench/fuzz_dashboard.py [--requests 1000] [--seed 0] [--url http://127.0.0.1:8050/]
"""

from __future__ import annotations

import argparse
import http.client
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.app_server import start_app  # noqa: E402
from tests.dash_fuzz import fuzz_bodies  # noqa: E402
from tests.dash_requests import layout_values  # noqa: E402


def start_server(data_dir: str | None) -> tuple[subprocess.Popen, str]:
    try:
        return start_app(data_dir, 120.0)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--url", default=None, help="a running dashboard (default: start app.py)")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    from workbench.interfaces.dashboard.factory import create_app

    app = create_app(args.data_dir)  # the same callback map and layout the server has, to build payloads from
    values = layout_values(app)
    proc, url = (None, args.url) if args.url else start_server(args.data_dir)
    split = urlsplit(url)
    codes: Counter = Counter()
    fivehundreds = []
    t0 = time.perf_counter()
    try:
        for label, body in fuzz_bodies(app, values, args.requests, args.seed):
            conn = http.client.HTTPConnection(split.hostname, split.port, timeout=60)
            conn.request("POST", "/_dash-update-component", body=body, headers={"Content-Type": "application/json"})
            status = conn.getresponse().status
            conn.close()
            codes[(label, status)] += 1
            if status >= 500:
                fivehundreds.append(body[:200])
        # one request over Flask's size cap: must come back as a message, not an empty page or a 500
        big = b'{"output": "x", "inputs": [{"id": "upload", "property": "contents", "value": "' + b"A" * (45 * 10**6)
        conn = http.client.HTTPConnection(split.hostname, split.port, timeout=60)
        try:
            conn.request("POST", "/_dash-update-component", body=big, headers={"Content-Type": "application/json"})
            status = conn.getresponse().status
        except (ConnectionError, http.client.HTTPException):
            status = -1  # the server may close the connection while the body is still being sent
        conn.close()
        codes[("over-size", status)] += 1
        fivehundreds += [b"over-size"] if status >= 500 else []
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
    elapsed = time.perf_counter() - t0
    total = sum(codes.values())
    print(f"{total} fuzzed callback requests in {elapsed:.1f} s against {url}")
    for (label, status), n in sorted(codes.items()):
        print(f"  {label:<10} HTTP {status}: {n}")
    print(f"HTTP 500: {len(fivehundreds)} [target 0] -> {'PASS' if not fivehundreds else 'FAIL'}")
    for body in fivehundreds[:5]:
        print("  e.g.", body)
    return 0 if not fivehundreds else 1


if __name__ == "__main__":
    sys.exit(main())
