"""`workbench stale`: which measured rows measure kernel code that has changed since (workbench.measure.stale)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from models.errors import InputError
from workbench.interfaces import cli_args


def _rows(root: Path):
    import pandas as pd

    from workbench.storage import store

    files = store.measurement_files(root)
    frames = [store.read_measurement_file(f).assign(file=str(f.relative_to(root))) for f in files]
    frames = [f for f in frames if len(f)]
    if not frames:
        raise InputError(f"no measurements under {root}")
    return pd.concat(frames, ignore_index=True)


def _pick(rows, column: str, wanted: list[str], option: str):
    have = sorted(set(rows[column].astype(str)))
    missing = [w for w in wanted if w not in have]
    if missing:
        raise InputError(f"{option} {missing[0]}: no rows of it in the data; the data holds {', '.join(have)}")
    return rows[rows[column].isin(wanted)] if wanted else rows


def stale(
    data_dir: cli_args.DataDirOpt = None,
    gpu: Annotated[list[str] | None, typer.Option("--gpu", help="only this GPU kind (gpu_key), repeatable")] = None,
    kernel: Annotated[list[str] | None, typer.Option("--kernel", "-k", help="only this kernel, repeatable")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="list current rows too")] = False,
    check: Annotated[bool, typer.Option("--check", help="exit 1 when any row measures changed code")] = False,
) -> None:
    """List the measured rows whose kernel code changed since they were measured, count the rows by status, and
    give the command that measures each file's changed rows again (`workbench profile --stale --out FILE`)."""
    from workbench.measure.stale import code_status, summary

    root = cli_args.dataset(data_dir)
    rows = _rows(root)
    rows = _pick(rows, "gpu_key", cli_args.split_list(gpu, "--gpu"), "--gpu")
    rows = _pick(rows, "kernel", cli_args.split_list(kernel, "--kernel"), "--kernel")
    table = code_status(rows)
    shown = table if show_all else table[table["status"] != "current"]
    if len(shown):
        shown = shown.assign(git_commit=shown["git_commit"].str.slice(0, 7))
        print(shown.to_string(index=False))
    print(summary(table))
    todo = table[table["status"] == "changed"]
    for (file, gpu_key, mode), _ in todo.groupby(["file", "gpu_key", "mode"], sort=True):
        print(f"on {gpu_key or 'the GPU of these rows'}: workbench profile --stale --out {root / file}"
              f"{' --hot' if mode == 'hot' else ''}")
    if check and (table["status"] == "changed").any():
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("stale")(stale)
