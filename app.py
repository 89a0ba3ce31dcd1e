"""`python app.py`: serve the dashboard on the shipped data (127.0.0.1:8050 by default).

Flags override the environment: --host / WORKBENCH_HOST, --port / WORKBENCH_PORT, --data-dir / WORKBENCH_DATA.
"""

from __future__ import annotations

import argparse
import os
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Roofline workbench dashboard")
    parser.add_argument("--host", default=os.environ.get("WORKBENCH_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=os.environ.get("WORKBENCH_PORT", "8050"))
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("WORKBENCH_DATA") or None,
        help="workbench data directory (default: the repository's data/)",
    )
    parser.add_argument("--debug", action="store_true", help="Dash debug mode (reloader, dev tools)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from models.errors import InputError
    from workbench.dashboard.factory import serve

    args = parse_args(argv)
    try:
        serve(host=args.host, port=args.port, data_dir=args.data_dir, debug=args.debug)
    except InputError as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
