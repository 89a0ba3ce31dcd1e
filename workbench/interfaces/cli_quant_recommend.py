"""`workbench quant-error` (quantization error against bytes per weight) and `workbench recommend` (which scheme to
run at each batch, the switch points, a whole-model plan). Tables are formatted; `--csv` writes the same rows in SI
units and fractions, atomically (or to stdout with `-`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from models.errors import InputError
from workbench.interfaces import cli_args
from workbench.interfaces.format import fmt_percent, fmt_time

ListOpt = list[str] | None


MAX_WEIGHTS = 1 << 27  # values of a synthetic weight (N*K): 32768x4096; larger ones take minutes and tens of GB


def _seed(seed: int) -> int:
    if seed < 0:  # numpy's generators take non-negative seeds only
        raise InputError(f"--seed {seed}: give a non-negative integer, e.g. --seed 0")
    return seed


def _synthetic_shape(shape: str, option: str) -> tuple[int, int]:
    N, K = cli_args.parse_shape(shape, option)
    if N * K > MAX_WEIGHTS:
        raise InputError(f"{option} {N}x{K}: a synthetic weight holds at most {MAX_WEIGHTS:,} values (N*K); "
                         "give a smaller shape, e.g. 1024x4096")
    return N, K


def _weights(weights: Path | None, tensor: str | None, dist: str, shape: str, seed: int, std: float, df: float,
             outliers: str, rate: float, magnitude: float, shape_option: str = "--shape"):
    from workbench.analysis import quant_error as qe

    if weights is not None:
        return qe.load_matrix(weights, tensor), str(weights)
    if tensor is not None:
        raise InputError("--tensor needs --weights FILE.safetensors")
    N, K = _synthetic_shape(shape, shape_option)
    w = qe.make_weights(dist, N, K, seed, std, df, outliers, rate, magnitude)
    extra = f", {outliers} x{magnitude:g} at {rate:g}" if dist == "outliers" else ""
    return w, f"{dist} {N}x{K} seed {seed}{extra}"


WeightsOpt = Annotated[Path | None, typer.Option("--weights", help="a real matrix: FILE.npy or FILE.safetensors")]
TensorOpt = Annotated[str | None, typer.Option("--tensor", help="tensor name in a .safetensors file")]
DistOpt = Annotated[str, typer.Option("--dist", help="gaussian | student-t | outliers (synthetic weights)")]
SeedOpt = Annotated[int, typer.Option("--seed", help="seed of the synthetic weights and activations")]
StdOpt = Annotated[float, typer.Option("--std", help="standard deviation of the synthetic weights")]
DfOpt = Annotated[float, typer.Option("--df", help="Student-t degrees of freedom (> 2)")]
OutliersOpt = Annotated[str, typer.Option("--outliers", help="columns (input channels) | rows (output channels)")]
RateOpt = Annotated[float, typer.Option("--rate", help="fraction of columns/rows that are outliers")]
MagOpt = Annotated[float, typer.Option("--magnitude", help="outlier multiplier")]
CsvOpt = Annotated[str | None, typer.Option("--csv", help="also write the rows to this .csv (SI units), - = stdout")]


def quant_error_command(
    dist: DistOpt = "gaussian",
    shape: Annotated[str, typer.Option("--shape", help="NxK of the synthetic weight")] = "1024x4096",
    weights: WeightsOpt = None,
    tensor: TensorOpt = None,
    fmt: Annotated[ListOpt, typer.Option("--format", help="int4, int8, fp8 (repeat or comma list)")] = None,
    group_size: Annotated[ListOpt, typer.Option("--group-size", help="group sizes along K")] = None,
    tokens: Annotated[int, typer.Option("--tokens", help="rows of x for the y = x W^T error")] = 16,
    seed: SeedOpt = 0, std: StdOpt = 0.02, df: DfOpt = 4.0, outliers: OutliersOpt = "columns",
    rate: RateOpt = 0.01, magnitude: MagOpt = 20.0,
    csv: CsvOpt = None,
) -> None:
    """Quantization error of W and of y = x W^T for every format and granularity, with the bytes per weight each
    costs (codes + scales + zero points)."""
    from models.schemes import GROUP_SIZES
    from workbench.analysis import quant_error as qe

    if csv is not None:
        cli_args.csv_path(csv, "--csv", allow_stdout=True)
    _seed(seed)
    tokens = cli_args.parse_int(tokens, "--tokens", 1, cli_args.MAX_BATCH, "16")
    formats = tuple(cli_args.split_list(fmt, "--format")) or qe.FORMATS
    groups = tuple(sorted({cli_args.parse_int(g, "--group-size", 1, cli_args.MAX_GROUP, "32,128")
                           for g in cli_args.split_list(group_size, "--group-size")})) or GROUP_SIZES
    w, source = _weights(weights, tensor, dist, shape, seed, std, df, outliers, rate, magnitude)
    bad = [g for g in groups if w.shape[1] % g] if group_size else []
    if bad:
        raise InputError(f"group size {bad[0]} does not divide K={w.shape[1]}; give group sizes that divide K")
    table = qe.explore(w, qe.default_choices(formats, groups), tokens, seed)
    if csv == "-":
        cli_args.write_csv(table, csv)
        return
    typer.echo(f"weights: {source} ({w.shape[0]}x{w.shape[1]}); y = x W^T with {tokens} Gaussian tokens")
    typer.echo(f"{'choice':26s} {'bits/weight':>11s} {'overhead':>9s} {'W error':>9s} {'y error':>9s}")
    for r in table.itertuples():
        typer.echo(f"{r.label:26s} {r.bits_per_weight:11.3f} {100 * r.overhead:8.3f}% "
                   f"{fmt_percent(r.weight_error_rel):>9s} {fmt_percent(r.output_error_rel):>9s}")
    if csv:
        cli_args.write_csv(table, csv)


def recommend_command(
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU key, e.g. h200-sxm (default: the only one measured)")]
    = None,
    shape: Annotated[ListOpt, typer.Option("--shape", help="NxK layer shape(s) (default: every measured shape)")]
    = None,
    model: Annotated[str | None, typer.Option("--model", help="a model of data/workloads.toml: per-layer plan")]
    = None,
    scheme: Annotated[ListOpt, typer.Option("--scheme", help="candidate schemes (default: all measured but fp32)")]
    = None,
    batch: Annotated[ListOpt, typer.Option("--batch", help="batches of the model plan (default: measured)")] = None,
    mode: Annotated[str, typer.Option("--mode", help="cold | hot")] = "cold",
    max_error: Annotated[float | None, typer.Option("--max-error", help="drop schemes whose y error on the chosen "
                                                    "weights exceeds this fraction, e.g. 0.05")] = None,
    weights: WeightsOpt = None, tensor: TensorOpt = None, dist: DistOpt = "gaussian",
    error_shape: Annotated[str, typer.Option("--error-shape", help="NxK of synthetic weights for --max-error")]
    = "1024x4096",
    seed: SeedOpt = 0, std: StdOpt = 0.02, df: DfOpt = 4.0, outliers: OutliersOpt = "columns",
    rate: RateOpt = 0.01, magnitude: MagOpt = 20.0,
    data: cli_args.DataDirOpt = None,
    csv: CsvOpt = None,
) -> None:
    """For each batch: the fastest scheme measured and predicted, the margin and whether it is inside the noise; the
    switch points per shape; with --model, a scheme per layer and batch with the step time."""
    from models.hardware import get_gpu
    from models.schemes import SCHEME_NAMES
    from models.workloads import get_model
    from workbench.analysis import recommend as rec
    from workbench.interfaces.cli_compare import load_comparison

    if shape and model:
        raise InputError("give --shape or --model, not both")
    if mode not in ("cold", "hot"):
        raise InputError(f"unknown --mode {mode!r}; valid: cold, hot")
    cli_args.nonempty(model, "--model")
    if csv is not None:
        cli_args.csv_path(csv, "--csv", allow_stdout=True)
    _seed(seed)
    shapes = [cli_args.parse_shape(s) for s in cli_args.split_list(shape, "--shape")]
    batches = cli_args.parse_batches(batch, ()) or None
    data = cli_args.dataset(data)
    comparison, cals = load_comparison(data)
    if comparison.empty:
        raise InputError(f"no measurements under {data}; run `workbench profile` or give --data-dir DIR")
    measured_gpus = sorted(set(comparison["gpu_key"].astype(str)))
    if gpu is not None:
        gpu = get_gpu(gpu).key
        if gpu not in measured_gpus:
            raise InputError(f"no measurements of {gpu}; measured: {', '.join(measured_gpus)}")
    schemes = cli_args.split_list(scheme, "--scheme") or None
    for s in schemes or []:
        if s not in SCHEME_NAMES:
            raise InputError(f"unknown --scheme {s!r}; valid: {', '.join(SCHEME_NAMES)}")
    if max_error is not None:
        w, source = _weights(weights, tensor, dist, error_shape, seed, std, df, outliers, rate, magnitude,
                             "--error-shape")
        mine = comparison[comparison["mode"] == mode]
        pool = schemes or [s for s in sorted(set(mine["scheme"])) if s not in rec.DEFAULT_EXCLUDE]
        errors = rec.scheme_errors(w, pool)
        schemes = rec.allowed_schemes(errors, max_error)
        typer.echo(f"accuracy bound {fmt_percent(max_error)} on {source}: " + ", ".join(
            f"{s} {fmt_percent(e)}{'' if s in schemes else ' (excluded)'}" for s, e in errors.items()))
    elif weights is not None or tensor is not None:
        raise InputError("--weights/--tensor choose the weights for --max-error; give --max-error too")
    if model:
        get_model(model)
    targets = [gpu] if gpu else measured_gpus  # no --gpu: every GPU measured, one after the other
    if shapes and not gpu:  # ... that measured at least one of the shapes asked for
        have = {g: set(zip(f["N"], f["K"], strict=True)) for g, f in
                comparison[comparison["mode"] == mode].groupby(comparison["gpu_key"].astype(str))}
        targets = [g for g in targets if have.get(g, set()) & set(shapes)] or targets[:1]
    tables = []
    for key in targets:
        tables += _recommend_gpu(comparison, cals, key, mode, schemes, shapes, model, batches)
    if csv:
        table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=rec.BY_BATCH_COLUMNS)
        cli_args.write_csv(table, csv)


def _recommend_gpu(comparison: pd.DataFrame, cals: dict, gpu: str, mode: str, schemes: list[str] | None,
                   shapes: list[tuple[int, int]], model: str | None, batches: list[int] | None) -> list[pd.DataFrame]:
    """`recommend` for one measured GPU: the per-batch tables it prints (and returns), and the model's plan."""
    from models.workloads import get_model
    from workbench.analysis import recommend as rec

    mine = comparison[(comparison["gpu_key"] == gpu) & (comparison["mode"] == mode)]
    measured_shapes = sorted(set(zip(mine["N"], mine["K"], strict=True)))
    if model:
        m = get_model(model)
        wanted = list(dict.fromkeys((layer.N, layer.K) for layer in m.layers if layer.experts <= 1))
        shapes = [s for s in wanted if s in set(measured_shapes)]
    elif shapes and len(shapes) > 1:
        shapes = [s for s in shapes if s in set(measured_shapes)] or shapes
    else:
        shapes = shapes or measured_shapes
    tables = [rec.by_batch(comparison, gpu, N, K, schemes=schemes, mode=mode) for N, K in shapes]
    for t in tables:
        N, K = int(t["N"].iloc[0]), int(t["K"].iloc[0])
        typer.echo(f"\n{gpu} {N}x{K} ({mode}): measured: {rec.describe(rec.switch_points(t))}; predicted: "
                   f"{rec.describe(rec.switch_points(t, 'best_predicted', noise_aware=False))}")
        typer.echo(f"{'M':>5s} {'measured best':14s} {'kernel':22s} {'time':>10s} {'runner-up':10s} {'margin':>8s} "
                   f"{'noise':6s} {'predicted best':14s}")
        for r in t.itertuples():
            typer.echo(f"{r.M:5d} {r.best_measured:14s} {r.kernel:22s} {fmt_time(r.time_s):>10s} {r.runner_up:10s} "
                       f"{fmt_percent(r.margin):>8s} {'tie' if r.tie else '':6s} {r.best_predicted:14s}"
                       + ("" if r.agree else "  (differs)"))
    if model:
        p = rec.plan(comparison, model, gpu, batches=batches, schemes=schemes, mode=mode, calibrations=cals)
        typer.echo(f"\n{model} on {gpu}: a scheme per layer and batch (step = sum of count x layer time)")
        typer.echo(f"{'M':>5s} {'step':>10s} {'best single':>12s} {'gain':>7s}  layers")
        for r in p.itertuples():
            typer.echo(f"{r.M:5d} {fmt_time(r.time_step_s):>10s} {fmt_time(r.time_step_single_s):>12s} "
                       f"{fmt_percent(r.gain_over_single - 1):>7s}  {r.layers}")
    return tables


def register(app: typer.Typer) -> None:
    app.command("quant-error")(quant_error_command)
    app.command("recommend")(recommend_command)
