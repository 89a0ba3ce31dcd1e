"""`workbench import FILE`: public timings (aiconfigurator gemm_perf.parquet, or the public-timings CSV layout) stored
under <data dir>/public/, beside our measurements and never mixed with them (workbench.storage.public)."""

from __future__ import annotations

from typing import Annotated

import typer

from models.errors import InputError
from workbench.interfaces import cli_args


def import_command(
    file: Annotated[str, typer.Argument(help="aiconfigurator gemm_perf.parquet, or a .csv with gpu, scheme, M, N, K, "
                                             "time_s [, kernel, source, notes]")],
    data: cli_args.DataDirOpt = None,
    name: Annotated[str | None, typer.Option("--name", help="stored file name (default: from the file)")] = None,
    source: Annotated[str | None, typer.Option("--source", help="provenance for rows that carry none, e.g. "
                                                                "owner/repo@commit:path")] = None,
    max_batch: Annotated[str, typer.Option("--max-batch", help="import rows with M up to this (decode batches)")]
    = "256",
) -> None:
    """Import public timings of linear layers; re-importing the same file replaces its rows."""
    from workbench.storage.public import import_file

    if not str(file).strip():
        raise InputError("FILE is empty; give an aiconfigurator gemm_perf.parquet or a public-timings .csv")
    root = cli_args.dataset(data)  # rows go to its public/ folder
    cli_args.writable_target(root / "public", "--data-dir")
    cli_args.nonempty(name, "--name")
    cli_args.nonempty(source, "--source")
    limit = cli_args.parse_int(max_batch, "--max-batch", 1, cli_args.MAX_BATCH, "256")
    try:
        done = import_file(file, root, name=name, source=source, max_batch=limit)
    except OSError as exc:
        raise InputError(f"cannot write under {root}: {exc.strerror or exc}; choose a writable --data-dir") from None
    per_gpu = ", ".join(f"{g} {n:,}" for g, n in done.rows["gpu"].value_counts().sort_index().items())
    print(f"imported {len(done.rows):,} public rows ({done.layout} layout; {per_gpu}) to {done.path}")
    if done.left_out:
        print(f"left out {done.left_out:,} rows with M > {limit} (not decode batches; --max-batch to keep them)")


def register(app: typer.Typer) -> None:
    app.command("import")(import_command)
