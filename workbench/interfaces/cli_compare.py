"""`workbench export`, `workbench validate` and `workbench report`: predicted vs measured, CSVs and hypotheses.

Everything reads one data directory (`--data-dir`, alias `--data`; default $WORKBENCH_DATA, else the checkout's
`data/`): measurements under `measurements/`, calibrations under `calibration/`, hypotheses under `hypotheses/` (else
the shipped ones). CSVs are SI units at full
precision (columns in docs/columns.md), written atomically. Exit codes: 0 ok, 1 a hypothesis failed (validate), 2 bad
input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from models.errors import InputError
from workbench.interfaces import cli_args

TABLES = ("comparison", "speedups", "crossovers", "errors")
SOURCES = {"measured": ("measured",), "predicted": ("predicted",), "both": ("measured", "predicted")}


# ---------------------------------------------------------------------------------------------------- loading
def load_comparison(data_dir: Path) -> tuple[pd.DataFrame, dict]:
    """(comparison of every measured point under data_dir, calibrations by gpu_key)."""
    from models.hardware import load_calibrations
    from workbench.analysis.compare import compare_points
    from workbench.analysis.kernel_tier import params_for
    from workbench.storage.store import load_measurements

    cli_args.data_dir(data_dir)
    measured = load_measurements(data_dir) if (Path(data_dir) / "measurements").is_dir() else None
    calibrations = load_calibrations(data_dir)
    if measured is None:
        from workbench.storage.store import empty_measurements

        measured = empty_measurements()
    return compare_points(measured, calibrations=calibrations, params=params_for(data_dir)), calibrations


def _check_filters(comparison: pd.DataFrame, gpu, scheme, kernel, shape, batch) -> list[tuple[int, int]]:
    from models.hardware import load_gpus
    from models.schemes import SCHEME_NAMES
    from workbench.analysis.hypotheses import known_kernels

    gpus = load_gpus()
    for g in gpu or []:
        if g not in gpus:
            raise InputError(f"unknown --gpu {g!r}; valid: {', '.join(sorted(gpus))}")
    for s in scheme or []:
        if s not in SCHEME_NAMES:
            raise InputError(f"unknown --scheme {s!r}; valid: {', '.join(SCHEME_NAMES)}")
    known = known_kernels(comparison)
    for k in kernel or []:
        if k not in known:
            raise InputError(f"unknown --kernel {k!r}; valid: {', '.join(sorted(known))}")
    return [cli_args.parse_shape(s) for s in shape or []]


def filter_points(df: pd.DataFrame, *, gpu=None, scheme=None, kernel=None, shapes=None, batch=None) -> pd.DataFrame:
    """Rows matching every given filter (each a list; None or empty = no filter)."""
    keep = pd.Series(True, index=df.index)
    if gpu and "gpu_key" in df:
        keep &= df["gpu_key"].isin(gpu)
    if scheme and "scheme" in df:
        keep &= df["scheme"].isin(scheme)
    if kernel and "kernel" in df:
        keep &= df["kernel"].isin(kernel)
    if shapes and "N" in df:
        pairs = list(zip(df["N"].astype(int), df["K"].astype(int), strict=True))
        keep &= pd.Series([p in set(shapes) for p in pairs], index=df.index, dtype=bool)
    if batch and "M" in df:
        keep &= df["M"].isin(batch)
    return df[keep].reset_index(drop=True)


def explain_empty(comparison: pd.DataFrame, data: Path, **filters) -> str:
    """Why a selection holds no rows: no measured points at all, or the filter(s) that match nothing alone."""
    if not len(comparison):
        return f"no measured points under {Path(data) / 'measurements'}; nothing to write"
    column = {"gpu": "gpu_key", "scheme": "scheme", "kernel": "kernel", "batch": "M"}
    reasons = []
    for name, value in filters.items():
        if not value:
            continue
        if not len(filter_points(comparison, **{name: value})):
            option = "shape" if name == "shapes" else name
            have = (sorted({f"{n}x{k}" for n, k in zip(comparison["N"], comparison["K"], strict=True)})
                    if name == "shapes" else [str(v) for v in sorted(set(comparison[column[name]]))])
            reasons.append(f"--{option} matches no measured point (the data holds {', '.join(have[:12])})")
    if reasons:
        return "; ".join(reasons) + "; nothing written"
    return "no measured point matches all the filters together; nothing written"


# ---------------------------------------------------------------------------------------------------- commands
GpuOpt = Annotated[list[str] | None, typer.Option("--gpu", help="GPU key(s), repeatable or a comma list")]
DataOpt = cli_args.DataDirOpt


def export(
    out: Annotated[str, typer.Argument(help="output .csv file, or - for stdout")],
    table: Annotated[str, typer.Option("--table", help="comparison | speedups | crossovers | errors")] = "comparison",
    rollup: Annotated[str | None, typer.Option("--rollup", help="roll-up of MODEL instead")] = None,
    gpu: GpuOpt = None,
    scheme: Annotated[list[str] | None, typer.Option("--scheme", help="scheme(s)")] = None,
    kernel: Annotated[list[str] | None, typer.Option("--kernel", help="kernel name(s)")] = None,
    shape: Annotated[list[str] | None, typer.Option("--shape", help="NxK weight shape(s)")] = None,
    batch: Annotated[list[str] | None, typer.Option("--batch", "-M", help="batch sizes M (repeatable, comma list)")]
    = None,
    baseline: Annotated[str, typer.Option("--baseline", help="speedup baseline: a kernel or a scheme")] = "cublas_bf16",
    mode: Annotated[str, typer.Option("--mode", help="cold | hot (for --rollup)")] = "cold",
    data: DataOpt = None,
) -> None:
    """Write the predicted-vs-measured comparison (or speedups, crossovers, error summary, model roll-up) as CSV."""
    from workbench.analysis.compare import error_summary, rollup_measured
    from workbench.analysis.speedup import crossovers, speedups

    if table not in TABLES:
        raise InputError(f"unknown --table {table!r}; valid: {', '.join(TABLES)}")
    if mode not in ("cold", "hot"):
        raise InputError(f"unknown --mode {mode!r}; valid: cold, hot")
    out = cli_args.csv_path(out, "output", allow_stdout=True)
    for value, option in ((rollup, "--rollup"), (baseline, "--baseline")):
        cli_args.nonempty(value, option)
    gpu, scheme, kernel = (cli_args.split_list(v, o) for v, o in ((gpu, "--gpu"), (scheme, "--scheme"),
                                                                   (kernel, "--kernel")))
    batch = cli_args.parse_batches(batch, ())
    data = cli_args.dataset(data)
    comparison, calibrations = load_comparison(data)
    shapes = _check_filters(comparison, gpu, scheme, kernel, shape, batch)
    if rollup is not None:
        if kernel or shape:
            raise InputError("--kernel and --shape do not apply to --rollup (it uses the model's layers)")
        frames = [
            rollup_measured(comparison, rollup, gpu_key=g, schemes=scheme or None, batches=batch or None,
                            calibrations=calibrations, mode=mode)
            for g in (gpu or [None])
        ]  # fmt: skip
        result = pd.concat(frames, ignore_index=True)
        if not len(result):
            raise InputError(explain_empty(comparison, data, gpu=gpu, scheme=scheme, batch=batch))
        cli_args.write_csv(result, out)
        return
    scoped = filter_points(comparison, gpu=gpu, shapes=shapes, batch=batch)
    if table == "comparison":
        result = filter_points(scoped, scheme=scheme, kernel=kernel)
    elif table == "errors":
        result = error_summary(filter_points(scoped, scheme=scheme, kernel=kernel))
    else:
        sp = speedups(scoped, baseline) if len(scoped) else speedups(scoped)
        sp = filter_points(sp, scheme=scheme, kernel=kernel)
        result = sp if table == "speedups" else crossovers(sp)
    if not len(result):
        why = explain_empty(comparison, data, gpu=gpu, scheme=scheme, kernel=kernel, shapes=shapes, batch=batch)
        raise InputError(f"{table}: {why}" if table != "comparison" else why)
    cli_args.write_csv(result, out)


def _verdicts(data: Path, hypotheses: list[str] | None, source: str, gpu: list[str] | None):
    from workbench.analysis.hypotheses import default_files, evaluate_all, load_hypotheses

    if source not in SOURCES:
        raise InputError(f"unknown --source {source!r}; valid: {', '.join(SOURCES)}")
    gpu = cli_args.split_list(gpu, "--gpu")
    data = cli_args.dataset(data)
    files = list(hypotheses) if hypotheses else default_files(data)
    if not files:
        raise InputError(f"no hypothesis files in {Path(data) / 'hypotheses'}; give --hypotheses FILE")
    files = [f if isinstance(f, Path) else str(f) for f in files]
    for f in files:
        if not str(f).strip() or not Path(f).is_file():
            raise InputError(f"--hypotheses {str(f)!r}: no such file; give a TOML file of [[hypothesis]] tables")
        if not Path(f).read_bytes().strip():
            raise InputError(f"--hypotheses {f} is empty; it must hold at least one [[hypothesis]] table")
    files = [Path(f) for f in files]
    hyps = load_hypotheses(files)
    if not len(hyps):
        raise InputError(f"no [[hypothesis]] tables in {', '.join(map(str, files))}; nothing to validate")
    comparison, _ = load_comparison(data)
    _check_filters(comparison, gpu, None, None, None, None)
    if gpu:
        comparison = filter_points(comparison, gpu=gpu)
    if gpu:  # an MoE hypothesis naming no GPU is predicted on the GPUs asked for
        from dataclasses import replace

        hyps = [replace(h, gpus=tuple(gpu)) if h.kind == "moe_speedup" and not h.gpus else h for h in hyps]
    moe_rows = _moe_rows(data) if any(h.kind == "moe_speedup" for h in hyps) else None
    results = evaluate_all(hyps, comparison, sources=SOURCES[source], moe_rows=moe_rows,
                           calibrations=load_calibrations_of(data))
    return hyps, comparison, results, files


def _moe_rows(data: Path) -> pd.DataFrame | None:
    """The MoE rows of the data directory's measurements (workbench profile --moe), for moe_speedup hypotheses."""
    from workbench.analysis.moe_tier import measured_rows
    from workbench.storage.store import load_measurements

    return measured_rows(load_measurements(data)) if (Path(data) / "measurements").is_dir() else None


def load_calibrations_of(data: Path) -> dict:
    from models.hardware import load_calibrations

    return load_calibrations(data)


def _print_verdicts(results: pd.DataFrame) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from workbench.analysis.hypothesis_eval import format_number

    colors = {"pass": "green", "fail": "bold red", "inconclusive": "yellow"}
    # The id, threshold and deciding instance share one cell (three lines) so that a 100-column terminal holds the
    # table: ids, GPU keys and verdicts never wrap; the evidence wraps at spaces.
    table = Table(title="hypotheses", show_lines=True)
    longest = int(results["id"].astype(str).str.len().max()) if len(results) else 10
    table.add_column("hypothesis · threshold · deciding instance", ratio=1, overflow="fold", min_width=min(longest, 44))
    for col in ("gpu", "source", "verdict"):
        table.add_column(col, no_wrap=True)
    table.add_column("value [low, high]", no_wrap=False, max_width=20)
    for r in results.itertuples(index=False):
        unit = "%" if r.kind in ("model_error", "bandwidth") else ""
        value = format_number(r.value, unit)
        if pd.notna(r.low) and pd.notna(r.high) and r.low != r.high:
            value += f" [{format_number(r.low, unit)}, {format_number(r.high, unit)}]"
        verdict = f"[{colors[r.verdict]}]{r.verdict}[/]"
        what = f"[bold]{escape(str(r.id))}[/]\n{escape(str(r.threshold))}\n[dim]{escape(str(r.detail))}[/]"
        table.add_row(what, r.gpu_key or "—", r.source, verdict, value)
    console = Console() if Console().is_terminal else Console(width=100)
    console.print(table)
    counts = results["verdict"].value_counts()
    console.print(" · ".join(f"{counts.get(v, 0)} {v}" for v in ("pass", "fail", "inconclusive")))


def validate(
    hypotheses: Annotated[
        list[str] | None, typer.Option("--hypotheses", help="TOML file(s); default data/hypotheses/*.toml")
    ] = None,
    source: Annotated[str, typer.Option("--source", help="measured | predicted | both")] = "both",
    html: Annotated[Path | None, typer.Option("--html", help="also write a self-contained HTML report")] = None,
    csv: Annotated[str | None, typer.Option("--csv", help="also write the verdicts as CSV")] = None,
    gpu: GpuOpt = None,
    data: DataOpt = None,
) -> None:
    """Evaluate the speedup hypotheses per GPU on measured data and on predictions; exit 1 when any fails."""
    if html is not None:
        cli_args.html_path(html, "--html")
    if csv is not None:
        cli_args.csv_path(csv, "--csv", allow_stdout=True)
    hyps, comparison, results, files = _verdicts(data, hypotheses, source, gpu)
    _print_verdicts(results)
    if csv is not None:
        cli_args.write_csv(results, csv)
    if html is not None:
        from workbench.analysis.report import write_report

        write_report(html, results, comparison, hyps, files)
        typer.echo(f"wrote {html}", err=True)
    if (results["verdict"] == "fail").any():
        raise typer.Exit(1)


def report(
    out: Annotated[Path, typer.Argument(help="output .html file")],
    hypotheses: Annotated[list[str] | None, typer.Option("--hypotheses", help="TOML file(s)")] = None,
    source: Annotated[str, typer.Option("--source", help="measured | predicted | both")] = "both",
    gpu: GpuOpt = None,
    data: DataOpt = None,
) -> None:
    """Write one self-contained HTML page: the verdict table and the key figures (exit 0 whatever the verdicts)."""
    from workbench.analysis.report import write_report

    cli_args.html_path(out, "output")
    hyps, comparison, results, files = _verdicts(data, hypotheses, source, gpu)
    write_report(out, results, comparison, hyps, files)
    typer.echo(f"wrote {out}: {len(results)} verdicts", err=True)


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("validate")(validate)
    app.command("report")(report)
