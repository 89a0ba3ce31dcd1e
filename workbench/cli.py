"""The `workbench` command line: one Typer app; each command group lives in its own `cli_*` module.

Every command module exposes `register(app)`. Bad input anywhere raises `models.errors.InputError`, which `main`
turns into one line on stderr and exit code 2 — never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click
import typer

from models.errors import InputError

COMMAND_MODULES = (
    "workbench.cli_predict",
    "workbench.cli_profile",
    "workbench.cli_compare",
    "workbench.cli_serve",
    "workbench.cli_quant_recommend",
    "workbench.cli_model",
    "workbench.cli_scale",
)


def build_app() -> typer.Typer:
    """A fresh Typer app with every available command group registered."""
    app = typer.Typer(
        name="workbench",
        help="Roofline model and profiler for LLM-decode GEMV/GEMM kernels.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a command group not written yet
            if exc.name == name:
                continue
            raise
        module.register(app)
    return app


def _fail(message: str, code: int = 2) -> int:
    first = str(message).strip().splitlines()[0] if str(message).strip() else "error"
    print(f"error: {first}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (2 for bad input)."""
    command = typer.main.get_command(build_app())
    try:
        result = command.main(args=argv, prog_name="workbench", standalone_mode=False)
    except InputError as exc:
        return _fail(str(exc))
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        return _fail("interrupted", 130)
    except click.ClickException as exc:
        exc.show()
        return 2 if isinstance(exc, click.UsageError) else exc.exit_code
    except OSError as exc:
        return _fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))
    return int(result) if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
