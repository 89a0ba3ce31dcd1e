"""`python app.py`: serve the dashboard on the shipped data (127.0.0.1:8050 by default).

Flags override the environment: --host / WORKBENCH_HOST, --port / WORKBENCH_PORT, --data-dir / WORKBENCH_DATA.
Bad values (flags or environment), an unknown flag, an address that does not resolve or a port in use: one line on
stderr, exit 2, before any banner.
"""

from __future__ import annotations

import argparse
import os
import sys


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse prints the usage and the error on two lines: keep one
        raise _UsageError(f"{message} (see python app.py --help)")


class _UsageError(Exception):
    pass


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Flags over the environment over the defaults: host (str), port (int), data_dir (str or None), debug.
    A bad flag or value raises (one line), before anything is bound or served."""
    from workbench.interfaces import cli_args

    parser = _OneLineParser(description="Roofline workbench dashboard")
    parser.add_argument("--host", default=None, help="interface to bind (env WORKBENCH_HOST; default 127.0.0.1)")
    parser.add_argument("--port", default=None, help="port 1-65535 (env WORKBENCH_PORT; default 8050)")
    parser.add_argument(
        "--data-dir",
        default=None,
        help="workbench data directory (env WORKBENCH_DATA; default: the repository's data/)",
    )
    parser.add_argument("--debug", action="store_true", help="Dash debug mode (reloader, dev tools)")
    args = parser.parse_args(argv)
    args.host = cli_args.nonempty(args.host, "--host") if args.host is not None else cli_args.env_host()
    args.port = cli_args.port_value(args.port, "--port") if args.port is not None else cli_args.env_port()
    if args.data_dir is None and os.environ.get("WORKBENCH_DATA"):
        args.data_dir = os.environ["WORKBENCH_DATA"]  # checked (with its name) when served
    return args


def argv_has(argv: list[str] | None, option: str) -> bool:
    return any(a == option or a.startswith(option + "=") for a in (sys.argv[1:] if argv is None else argv))


def main(argv: list[str] | None = None) -> int:
    from models.errors import InputError
    from workbench.interfaces.cli_serve import resolve

    try:
        args = parse_args(argv)
        flag_data = args.data_dir if argv_has(argv, "--data-dir") else None  # else resolve reads WORKBENCH_DATA
        host, port, data_dir = resolve(args.host, str(args.port), flag_data)
        from workbench.interfaces.dashboard.factory import serve

        serve(host=host, port=port, data_dir=data_dir, debug=args.debug)
    except (InputError, _UsageError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
