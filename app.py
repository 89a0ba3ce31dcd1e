"""`python app.py`: serve the dashboard on the shipped data (127.0.0.1:8050 by default).

Flags override the environment: --host / WORKBENCH_HOST, --port / WORKBENCH_PORT, --data-dir / WORKBENCH_DATA.
Bad values (flags or environment), an unknown flag, an address that does not resolve or a port in use: one line on
stderr, exit 2, before any banner.
"""

from __future__ import annotations

import argparse
import sys


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse prints the usage and the error on two lines: keep one
        raise _UsageError(f"{message} (see python app.py --help)")


class _UsageError(Exception):
    pass


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = _OneLineParser(description="Roofline workbench dashboard")
    parser.add_argument("--host", default=None, help="interface to bind (env WORKBENCH_HOST; default 127.0.0.1)")
    parser.add_argument("--port", default=None, help="port 1-65535 (env WORKBENCH_PORT; default 8050)")
    parser.add_argument(
        "--data-dir",
        default=None,
        help="workbench data directory (env WORKBENCH_DATA; default: the repository's data/)",
    )
    parser.add_argument("--debug", action="store_true", help="Dash debug mode (reloader, dev tools)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from models.errors import InputError
    from workbench.cli_serve import resolve

    try:
        args = parse_args(argv)
        host, port, data_dir = resolve(args.host, args.port, args.data_dir)
        from workbench.dashboard.factory import serve

        serve(host=host, port=port, data_dir=data_dir, debug=args.debug)
    except (InputError, _UsageError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
