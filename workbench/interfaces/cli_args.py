"""Argument parsing shared by every `workbench` command (and `app.py`): one definition of each limit and syntax.

Every parser raises `models.errors.InputError` with one line naming the option, the bad value and what is accepted,
before anything is read from disk, touched on a GPU or written.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer

from models.errors import InputError
from models.paths import DATA_ENV, dataset_dir, refuse_installed

MAX_DIM = 1 << 20  # N and K of a weight: 1,048,576 (a 2^20 x 2^20 fp16 weight is already 2 TB)
MAX_BATCH = 1 << 16  # M: 65,536 tokens per step
MAX_GROUP = MAX_DIM
MAX_DIGITS = 12  # longer integers are refused before int() sees them (Python refuses > 4300 digits with a ValueError)
PORT_RANGE = (1, 65535)


def _shown(text: object) -> str:
    """A value as shown in a message: repr, shortened to 40 characters."""
    r = repr(text)
    return r if len(r) <= 40 else r[:37] + "...'"


def split_list(values: Iterable[str] | None, option: str) -> list[str]:
    """Repeated options and comma lists alike: ['a,b', 'c'] -> ['a', 'b', 'c']; an empty item is refused."""
    out = []
    for v in values or []:
        parts = [p.strip() for p in str(v).split(",")]
        if not any(parts) or (len(parts) > 1 and not all(parts)):
            raise InputError(f"{option} {_shown(v)} has an empty item; give values, or a comma list without gaps")
        out += parts
    return out


def parse_int(text: object, option: str, low: int, high: int, example: str) -> int:
    """One integer option value in [low, high]."""
    s = str(text).strip()
    body = s[1:] if s[:1] in "+-" else s
    if len(body) > MAX_DIGITS or not (body.isascii() and body.isdigit()):
        raise InputError(f"{option} {_shown(text)} is not an integer in {low}..{high:,}; e.g. {option} {example}")
    value = int(s)
    if not low <= value <= high:
        raise InputError(f"{option} {value} is out of range; give an integer in {low}..{high:,}")
    return value


def parse_batches(values: Iterable[object] | None, default: Iterable[int], option: str = "--batch") -> list[int]:
    """Batch sizes M from repeated --batch/-M options or comma lists, sorted and deduplicated."""
    items = split_list([str(v) for v in values or []], option)
    if not items:
        return list(default)
    return sorted({parse_int(i, option, 1, MAX_BATCH, "1,8,64") for i in items})


def parse_shape(text: object, option: str = "--shape") -> tuple[int, int]:
    """'22016x4096' (or a named shape) -> (N, K), each in 1..MAX_DIM."""
    from models.workloads import SHAPES
    from models.workloads import parse_shape as model_parse

    s = str(text).strip()
    if not s:
        raise InputError(f"{option} is empty; give NxK with positive integers, e.g. {option} 22016x4096")
    if s in SHAPES:
        return SHAPES[s]
    parts = [p.strip() for p in s.lower().replace("×", "x").split("x")]
    digits = len(parts) == 2 and all(p.isascii() and p.isdigit() for p in parts)
    if not digits or any(not p.lstrip("0") for p in parts):  # not two integers, or a zero
        raise InputError(
            f"{option}: malformed shape {_shown(text)}; expected NxK with positive integers, e.g. 22016x4096"
        )
    if any(len(p.lstrip("0")) > MAX_DIGITS for p in parts):
        raise InputError(f"{option} {_shown(text)}: N and K must be at most {MAX_DIM:,}")
    n, k = model_parse(s)
    if n > MAX_DIM or k > MAX_DIM:
        raise InputError(f"{option} {n}x{k}: N and K must be at most {MAX_DIM:,}")
    return n, k


def nonempty(value: str | None, option: str) -> str | None:
    """An optional text option that, when given, must not be empty or blank."""
    if value is not None and not str(value).strip():
        raise InputError(f"{option} is empty; give a value or leave the option out")
    return value


def csv_path(out: object, option: str, allow_stdout: bool = False) -> str:
    """An output file that must end in .csv (or be - for stdout where allowed) and must not be a folder."""
    s = str(out)
    if allow_stdout and s == "-":
        return s
    if not s.strip() or not s.lower().endswith(".csv"):
        also = " (or - for stdout)" if allow_stdout else ""
        raise InputError(f"{option} {_shown(s)} must be a file name ending in .csv{also}")
    if Path(s).is_dir():
        raise InputError(f"{option} {s} is a folder; give a file name ending in .csv")
    return s


def check_out_path(path: Path | str, option: str) -> Path:
    """An output path that could be written, checked without creating anything: not a folder, and its nearest
    existing ancestor a writable folder."""
    p = Path(path)
    if not str(path).strip():
        raise InputError(f"{option} is empty; give a file name")
    if p.is_dir():
        raise InputError(f"{option} {p} is a folder; give a file name")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option}: cannot write {p}: {parent} is not a writable folder; choose a writable path")
    return p


def html_path(out: Path, option: str) -> Path:
    if Path(out).suffix.lower() not in (".html", ".htm") or Path(out).is_dir():
        raise InputError(f"{option} {_shown(str(out))} must be a file name ending in .html")
    return Path(out)


def data_dir(path: Path | str | None, option: str = "--data-dir") -> Path | None:
    """A data directory that, when given, exists and is a folder (its measurements/, if present, a folder too)."""
    if path is None:
        return None
    p = Path(path)
    if not str(path).strip():
        raise InputError(f"{option} is empty; give a folder holding measurements/ and calibration/")
    if not p.is_dir():
        raise InputError(f"{option} {p}: no such folder; give a folder holding measurements/ and calibration/")
    for sub in ("measurements", "calibration", "hypotheses"):
        if (p / sub).exists() and not (p / sub).is_dir():
            raise InputError(f"{option} {p}: {p / sub} is a file, not a folder; fix the data directory")
    return p


# The one spelling of the data option on every command: --data-dir, alias --data (str, not Path: Path("") is "." and
# an empty value must be refused, not read as the working directory). None: $WORKBENCH_DATA, else the checkout's data/.
DATA_DIR_HELP = f"data directory (measurements/, calibration/); default ${DATA_ENV}, else the checkout's data/"
DataDirOpt = Annotated[str | None, typer.Option("--data-dir", "--data", help=DATA_DIR_HELP)]


def dataset(path: Path | str | None, option: str = "--data-dir") -> Path:
    """The dataset a command reads or writes: `path` (the data option) when given, else $WORKBENCH_DATA, else the
    checkout's data/; an existing folder, or one line naming where it was looked for."""
    if path is not None:
        return data_dir(path, option)  # type: ignore[return-value]
    env = env_data_dir()
    if env is not None:
        return env
    found = dataset_dir()  # the checkout's data/, or InputError naming --data-dir and WORKBENCH_DATA
    return data_dir(found, "the checkout's data folder")  # type: ignore[return-value]


def writable_target(path: Path | str, option: str) -> Path:
    """A path the command may write: never inside the installed packages (site-packages)."""
    return refuse_installed(path, option)


# ---------------------------------------------------------------------------------------------------- serving
def port_value(text: object, option: str) -> int:
    return parse_int(text, option, PORT_RANGE[0], PORT_RANGE[1], "8050")


def env_port(default: int = 8050) -> int:
    text = os.environ.get("WORKBENCH_PORT")
    if text is None:
        return default
    return port_value(text, "WORKBENCH_PORT")


def env_host(default: str = "127.0.0.1") -> str:
    text = os.environ.get("WORKBENCH_HOST")
    if text is None:
        return default
    return nonempty(text, "WORKBENCH_HOST") or default


def env_data_dir() -> Path | None:
    text = os.environ.get(DATA_ENV)
    if text is None or text == "":
        return None
    return data_dir(text, DATA_ENV)


def check_bind(host: str, port: int) -> None:
    """Refuse, before any banner is printed, a host that does not resolve or a port that cannot be bound."""
    host = nonempty(host, "--host") or ""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise InputError(f"--host {_shown(host)} does not resolve ({why}); give an address such as 127.0.0.1") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug does: TIME_WAIT is not "in use"
        sock.bind(addr)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise InputError(
            f"cannot listen on {host}:{port} ({why}); choose another --port or stop what holds it"
        ) from None
    finally:
        sock.close()


def write_csv(frame, out: str | Path) -> None:
    """The CLI's one CSV writer: "-" is stdout; a path is written atomically (a temporary file beside it, then a
    rename: never a half-written CSV) and one line on stderr says what was written."""
    import sys

    from workbench.storage.store import atomic_write_bytes

    text = frame.to_csv(index=False)
    if str(out) == "-":
        sys.stdout.write(text)
        return
    path = Path(out)
    if path.is_dir():
        raise InputError(f"{path} is a directory; give a file name ending in .csv")
    try:
        atomic_write_bytes(path, text.encode())
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    print(f"wrote {len(frame)} rows to {path}", file=sys.stderr)
