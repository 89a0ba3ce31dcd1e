"""`workbench serve`: the dashboard, same flags and environment variables as `python app.py`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from models.errors import InputError


def _env_port() -> int:
    text = os.environ.get("WORKBENCH_PORT", "8050")
    try:
        return int(text)
    except ValueError:
        raise InputError(f"WORKBENCH_PORT={text!r} is not a port number; use an integer 1-65535") from None


def serve_command(
    host: Annotated[str | None, typer.Option(help="Interface to bind (env WORKBENCH_HOST; default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (env WORKBENCH_PORT; default 8050).")] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Workbench data directory (env WORKBENCH_DATA; default data/).")
    ] = None,
    debug: Annotated[bool, typer.Option(help="Dash debug mode (reloader, dev tools).")] = False,
) -> None:
    """Serve the dashboard (predicted vs measured, roofline, speedup, clocks, hypotheses) in a browser."""
    from workbench.dashboard.factory import serve

    host = host or os.environ.get("WORKBENCH_HOST", "127.0.0.1")
    port = port if port is not None else _env_port()
    if not 0 < port < 65536:
        raise InputError(f"port {port} is out of range; use 1-65535")
    data = data_dir or (Path(os.environ["WORKBENCH_DATA"]) if os.environ.get("WORKBENCH_DATA") else None)
    serve(host=host, port=port, data_dir=data, debug=debug)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
