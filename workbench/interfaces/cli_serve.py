"""`workbench serve`: the dashboard, same flags and environment variables as `python app.py`.

Every value (flag or environment) is checked, and the address is bound once and released, before the app is built:
a bad host, a port out of range or a port in use is one line on stderr and exit 2, never a banner then a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workbench.interfaces import cli_args


def resolve(host: str | None, port: str | None, data_dir: str | Path | None) -> tuple[str, int, Path]:
    """(host, port, data dir) from the flags, else WORKBENCH_HOST / WORKBENCH_PORT / WORKBENCH_DATA, else defaults
    (the data: the checkout's data/); validated and the address checked for binding."""
    host = cli_args.nonempty(host, "--host") if host is not None else cli_args.env_host()
    port_n = cli_args.port_value(port, "--port") if port is not None else cli_args.env_port()
    data = cli_args.dataset(data_dir)
    cli_args.check_bind(host, port_n)
    return host, port_n, data


def serve_command(
    host: Annotated[str | None, typer.Option(help="Interface to bind (env WORKBENCH_HOST; default 127.0.0.1).")] = None,
    port: Annotated[str | None, typer.Option(help="Port 1-65535 (env WORKBENCH_PORT; default 8050).")] = None,
    data_dir: cli_args.DataDirOpt = None,
    debug: Annotated[bool, typer.Option(help="Dash debug mode (reloader, dev tools).")] = False,
) -> None:
    """Serve the dashboard (predicted vs measured, roofline, speedup, clocks, hypotheses) in a browser."""
    host, port_n, data = resolve(host, port, data_dir)
    from workbench.interfaces.dashboard.factory import serve

    serve(host=host, port=port_n, data_dir=data, debug=debug)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
