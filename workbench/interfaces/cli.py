"""The `workbench` command line: one Typer app; each command group lives in its own `cli_*` module.

Every command module exposes `register(app)`. Bad input anywhere raises `models.errors.InputError`, which `main`
turns into one line on stderr and exit code 2 — never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import signal
import sys
import threading
from collections.abc import Iterator

import typer

from models.errors import InputError

COMMAND_MODULES = (
    "workbench.interfaces.cli_predict",
    "workbench.interfaces.cli_profile",
    "workbench.interfaces.cli_compare",
    "workbench.interfaces.cli_serve",
    "workbench.interfaces.cli_quant_recommend",
    "workbench.interfaces.cli_model",
    "workbench.interfaces.cli_scale",
    "workbench.interfaces.cli_import",
    "workbench.interfaces.cli_stale",
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


def _is(exc: BaseException, *names: str) -> bool:
    """Whether `exc` is an instance of a class called one of `names`, from whichever click runs typer.

    typer <= 0.15 raises `click.exceptions.*`; typer >= 0.16 may raise its bundled `typer._click.exceptions.*`, a
    different class with the same name, so isinstance against the installed `click` misses it; typer 0.29 raises its
    own `typer.exceptions.Abort` (for an EOFError) and `Exit`, which derive from neither.
    """
    return any(cls.__name__ in names and ("click" in cls.__module__ or cls.__module__.startswith("typer"))
               for cls in type(exc).__mro__)


def _usage_line(exc: BaseException, command_names: list[str]) -> str:
    """The one line for a click usage error: what was wrong, and what is accepted."""
    ctx = getattr(exc, "ctx", None)
    where = f"{ctx.command_path}: " if ctx is not None and getattr(ctx, "command_path", "") else ""
    if _is(exc, "NoArgsIsHelpError"):
        return f"no command given; use one of: {', '.join(command_names)} (workbench --help)"
    try:
        message = exc.format_message()  # type: ignore[attr-defined]
    except Exception:
        message = str(exc)
    message = " ".join(str(message).split())
    if "No such command" in message:
        message += f" Commands: {', '.join(command_names)}."
    hint = f" (see {ctx.command_path} --help)" if ctx is not None and getattr(ctx, "command_path", "") else ""
    return f"{where}{message}{hint}"


@functools.cache
def click_command():
    """The click command typer builds from the app (built once per process: typer >= 0.16 takes ~0.1 s for it)."""
    return typer.main.get_command(build_app())


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (`timeout`, `kill`, a batch scheduler) ends a command as Ctrl-C does: its `finally` blocks run (a sweep
    folds its journal into the output, with `--remeasure`'s replacement of the old rows) instead of the process dying
    between two writes. Only the main thread can take a signal handler; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit code (2 for bad input, one line on stderr, whatever typer/click version)."""
    command = click_command()
    names = sorted(getattr(command, "commands", {}) or {})
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:  # click < 8.2 shows the help with exit 0, click >= 8.2 raises NoArgsIsHelpError: same answer for both
        return _fail(f"no command given; use one of: {', '.join(names)} (workbench --help)")
    try:
        with sigterm_as_interrupt():
            result = command.main(args=args, prog_name="workbench", standalone_mode=False)
    except InputError as exc:
        return _fail(str(exc))
    except (KeyboardInterrupt, EOFError):
        return _fail("interrupted", 130)
    except OSError as exc:
        return _fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))
    except Exception as exc:
        if _is(exc, "Exit"):
            return int(getattr(exc, "exit_code", 0) or 0)
        if _is(exc, "Abort"):
            if isinstance(exc.__cause__, EOFError):  # typer >= 0.16 turns an EOFError (a truncated file) into Abort
                return _fail(f"unexpected end of input ({exc.__cause__ or 'EOFError'})")
            return _fail("interrupted", 130)
        if _is(exc, "UsageError", "BadParameter", "NoArgsIsHelpError"):
            return _fail(_usage_line(exc, names))
        if _is(exc, "ClickException"):
            return _fail(_usage_line(exc, names), int(getattr(exc, "exit_code", 1) or 1))
        raise
    finally:
        from workbench.storage.locks import release_all

        release_all()  # the GPU and output locks a command took (profile) end with it
    return int(result) if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
