"""`workbench predict`, `workbench gpus`, `workbench schemes`: the analytical model and its catalogues on the command
line. Tables are formatted (µs, GB/s, TFLOP/s); `--csv` writes the same rows in SI units, atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from models.errors import InputError
from models.roofline import TIERS
from workbench.interfaces import cli_args
from workbench.interfaces.format import (
    fmt_bandwidth,
    fmt_bytes,
    fmt_clock,
    fmt_flops_rate,
    fmt_intensity,
    fmt_ratio,
    fmt_time,
)

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_SHAPE = "22016x4096"
BOUND_COL = {"datasheet": "bound_datasheet", "calibrated": "bound_calibrated", "floor": "bound_calibrated",
             "kernel": "bound_kernel"}
CEILING_COL = {"datasheet": "compute_unit_used", "calibrated": "compute_unit_calibrated",
               "floor": "compute_unit_calibrated", "kernel": "kernel_predicted"}
POINT_CSV_COLUMNS = (
    "gpu", "scheme", "layer", "M", "N", "K", "group_size", "weight_bytes", "scale_bytes", "act_bytes", "out_bytes",
    "bytes", "flops", "intensity", "compute_unit_used", "bandwidth_bytes_per_s", "peak_flops_per_s", "ridge",
    "t_memory_s", "t_compute_s", "time_datasheet_s", "bound_datasheet", "attainable_flops", "t_dequant_s",
    "compute_unit_calibrated", "bandwidth_calibrated", "peak_calibrated", "time_calibrated_s", "bound_calibrated",
    "floor_s", "time_floor_s", "time_kernel_s", "kernel_predicted", "bound_kernel", "attr_fixed_s", "attr_fixup_s",
    "attr_memory_s", "attr_alu_s", "attr_tensor_s", "kernel_bandwidth_bytes_per_s", "kernel_peak_flops_per_s",
    "kernel_terms_source", "kernel_params_source", "kernel", "time_s", "achieved_bytes_per_s", "baseline",
    "time_baseline_s", "speedup",
)


def parse_batches(values: list[str] | None) -> list[int]:
    """Batch sizes from --batch/-M (repeatable, comma lists), 1..cli_args.MAX_BATCH; the default sweep if none."""
    return cli_args.parse_batches(values, DEFAULT_BATCHES)


def _resolve_names(gpus: list[str] | None, schemes: list[str] | None) -> tuple[list[str], list[str]]:
    from models.hardware import get_gpu
    from models.schemes import SCHEME_NAMES, all_schemes, get_scheme

    gpu_keys = [get_gpu(g).key for g in cli_args.split_list(gpus, "--gpu")] or ["h200-sxm"]
    names = cli_args.split_list(schemes, "--scheme")
    if not names:
        names = [s.name for s in all_schemes(runnable_only=True)]
    elif names == ["all"]:
        names = list(SCHEME_NAMES)
    for n in names:
        get_scheme(n)  # unknown name -> InputError listing the valid ones
    return list(dict.fromkeys(gpu_keys)), list(dict.fromkeys(names))


def _calibrations(tier: str, data_dir: Path | None, gpu_keys: list[str]) -> dict:
    from models.hardware import load_calibrations

    if tier not in TIERS:
        raise InputError(f"unknown tier {tier!r}; valid: {', '.join(TIERS)}")
    if data_dir is None:  # $WORKBENCH_DATA, else the checkout's data/; the datasheet and kernel tiers need none
        from models.paths import checkout_data_dir

        data_dir = cli_args.env_data_dir() or checkout_data_dir()
        if data_dir is None and tier in ("datasheet", "kernel"):
            return {}
        data_dir = cli_args.dataset(data_dir)  # none: one line naming --data-dir and WORKBENCH_DATA
    cals = load_calibrations(data_dir)
    if tier not in ("datasheet", "kernel"):  # the kernel tier falls back to datasheet figures and says so
        missing = [g for g in gpu_keys if g not in cals]
        if missing:
            raise InputError(f"no calibration for {', '.join(missing)} in {data_dir}/calibration; run "
                             f"`workbench calibrate` on that GPU or use --tier datasheet")
    return cals


def _layers(shape: str | None, model: str | None) -> list[tuple[str, int, int]]:
    from models.workloads import get_model

    if model is not None:
        return [(layer.name, layer.N, layer.K) for layer in get_model(model).layers]
    n, k = cli_args.parse_shape(shape or DEFAULT_SHAPE)
    return [("", n, k)]


def predict_named_kernels(gpu_keys: list[str], kernels: list[str], batches: list[int], shape: str | None,
                          model: str | None, baseline: str, group_size: int | None, calibrations: dict,
                          params: Any = None) -> pd.DataFrame:
    """The kernel tier of named kernels (ours or a vendor library's) per GPU, layer and M; the speedup is over the
    first named kernel of the baseline scheme, else over the fastest modeled kernel of that scheme."""
    from models.roofline import predict, speedup
    from workbench.analysis.kernel_tier import best_kernel_tier, kernel_entries, named_kernel_tier

    entries = kernel_entries()
    for k in kernels:
        if k not in entries or entries[k].facts is None:
            modeled = sorted(n for n, e in entries.items() if e.facts is not None)
            raise InputError(f"unknown kernel {k!r} for --kernel; modeled kernels: {', '.join(modeled)}")
    layers = _layers(shape, model)
    rows = [(g, entries[k].scheme, k, name, m, n, kk) for g in gpu_keys for k in kernels for name, n, kk in layers
            for m in batches]
    points = pd.DataFrame(rows, columns=["gpu", "scheme", "kernel", "layer", "M", "N", "K"])
    if group_size is not None:
        points["group_size"] = group_size
    named = named_kernel_tier(predict(points, calibrations or None), calibrations, params)
    frames = [named]
    if baseline not in set(points["scheme"]):
        base = points.drop(columns="kernel").drop_duplicates(["gpu", "layer", "M"]).assign(scheme=baseline)
        frames.insert(0, best_kernel_tier(predict(base, calibrations or None), calibrations, params))
    else:  # the baseline scheme's first named kernel first: speedup() takes the first baseline row per point
        frames = [named[named["scheme"] == baseline].drop_duplicates(["gpu", "layer", "M"]), named]
    pred = speedup(pd.concat(frames, ignore_index=True), baseline, "time_kernel_s")
    pred = pred.iloc[len(pred) - len(named):].reset_index(drop=True)
    pred["time_s"] = pred["time_kernel_s"]
    pred["achieved_bytes_per_s"] = pred["bytes"] / pred["time_s"]
    pred["baseline"] = baseline
    return pred


def predict_points(gpu_keys: list[str], schemes: list[str], batches: list[int], shape: str | None,
                   model: str | None, baseline: str, group_size: int | None, tier: str,
                   calibrations: dict, params: Any = None) -> pd.DataFrame:
    """Per-GEMM predictions for the CLI: a bare shape, or each distinct layer of a model at M = batch."""
    from models.roofline import speedup
    from workbench.analysis.kernel_tier import predict_tiers

    layers = _layers(shape, model)
    names = schemes if baseline in schemes else [*schemes, baseline]
    rows = [(g, s, name, m, n, k) for g in gpu_keys for s in names for name, n, k in layers for m in batches]
    points = pd.DataFrame(rows, columns=["gpu", "scheme", "layer", "M", "N", "K"])
    if group_size is not None:
        points["group_size"] = group_size
    # the kernel tier: the fastest registered kernel of each scheme at each M (kernel_predicted names it)
    pred = predict_tiers(points, calibrations, kernel=tier == "kernel", table=params)
    pred = speedup(pred, baseline, TIERS[tier])
    pred["time_s"] = pred[TIERS[tier]]
    pred["achieved_bytes_per_s"] = pred["bytes"] / pred["time_s"]
    pred["baseline"] = baseline
    return pred[pred["scheme"].isin(schemes)].reset_index(drop=True)


NARROW = 132  # below this many columns the point table leaves out FLOP/B and the ceiling (both are in --csv)


def _console():
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=220)


def _table(title: str, narrow: bool):
    """A rich Table; on a narrow terminal without vertical rules, so that 100 columns hold the numbers unwrapped."""
    from rich import box
    from rich.table import Table

    if narrow:  # the box's blank vertical rule is the only gap between columns
        return Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False)
    return Table(title=title)


def _print_points(pred: pd.DataFrame, tier: str, title: str) -> None:
    console = _console()
    narrow = console.width < NARROW
    table = _table(title, narrow)
    show_layer = pred["layer"].astype(str).str.len().gt(0).any()
    headers = ["GPU", "scheme", *(["layer"] if show_layer else []), "N×K", "M", "bytes", "time", "GB/s", "TFLOP/s",
               "FLOP/B", "bound", "ceiling", f"vs {pred['baseline'].iloc[0]}"]
    one_gpu = pred["gpu"].nunique() == 1
    dropped = ("FLOP/B", "ceiling", *(["GPU"] if one_gpu else [])) if narrow else ()
    if narrow and one_gpu:
        table.title = f"{title} on {pred['gpu'].iloc[0]}"
    for h in headers:
        if h not in dropped:
            table.add_column(h, justify="left" if h in ("GPU", "scheme", "layer", "bound", "ceiling") else "right",
                             no_wrap=h != "layer", min_width=7 if h == "layer" else None)
    for r in pred.itertuples(index=False):
        cells = dict(zip(headers, (
            r.gpu, r.scheme, *([r.layer] if show_layer else []), f"{r.N}×{r.K}", str(r.M), fmt_bytes(r.bytes),
            fmt_time(r.time_s), fmt_bandwidth(r.achieved_bytes_per_s), fmt_flops_rate(r.flops / r.time_s),
            fmt_intensity(r.intensity), str(getattr(r, BOUND_COL[tier])), str(getattr(r, CEILING_COL[tier])),
            fmt_ratio(r.speedup)), strict=True))
        table.add_row(*(v for h, v in cells.items() if h not in dropped))
    if narrow:
        table.caption = f"{', '.join(dropped)} left out below {NARROW} columns (all columns: --csv FILE)"
    console.print(table)


def _print_rollup(out: pd.DataFrame, title: str) -> None:
    from rich.table import Table

    table = Table(title=title)
    for h in ("GPU", "scheme", "batch", "time/step", "tokens/s", "bytes/step", "speedup"):
        table.add_column(h, justify="left" if h in ("GPU", "scheme") else "right")
    for r in out.itertuples(index=False):
        table.add_row(r.gpu, r.scheme, str(r.batch), fmt_time(r.time_step_s), f"{r.tokens_per_s:,.0f}",
                      fmt_bytes(r.bytes_step), fmt_ratio(r.speedup))
    _console().print(table)


def predict_command(
    gpu: Annotated[list[str] | None, typer.Option("--gpu", help="GPU key or CUDA name (repeatable, comma list)")]
    = None,
    scheme: Annotated[list[str] | None, typer.Option("--scheme", help="scheme (repeatable); 'all' adds fp4")] = None,
    batch: Annotated[list[str] | None, typer.Option("--batch", "-M", help="batch sizes M (repeatable, comma list)")]
    = None,
    shape: Annotated[str | None, typer.Option("--shape", help="weight N×K, e.g. 22016x4096")] = None,
    model: Annotated[str | None, typer.Option("--model", help="an LLM's linear layers, e.g. llama-2-7b")] = None,
    baseline: Annotated[str, typer.Option("--baseline", help="scheme the speedup is relative to")] = "bf16",
    group_size: Annotated[str | None, typer.Option("--group-size", help="group size G (w4a16, w8a16)")] = None,
    tier: Annotated[str, typer.Option("--tier", help="datasheet | calibrated | floor | kernel")] = "datasheet",
    kernel: Annotated[list[str] | None, typer.Option("--kernel", help="with --tier kernel: predict these kernels "
                                                     "(ours or a vendor library's, e.g. cublas_bf16, trtllm_wo_int4; "
                                                     "repeatable, comma list) instead of the fastest per scheme")]
    = None,
    rollup: Annotated[bool, typer.Option("--rollup", help="with --model: time per step and tokens/s")] = False,
    csv: Annotated[str | None, typer.Option("--csv", help="also write the rows to this .csv file (SI units)")] = None,
    data_dir: cli_args.DataDirOpt = None,
    routing: Annotated[str | None, typer.Option("--routing", help="with --rollup, MoE models: uniform, zipf:S or a "
                                                "routing histogram file (counts per expert)")] = None,
    top_k: Annotated[str | None, typer.Option("--top-k", help="with --rollup, MoE models: experts per token "
                                              "(default: the model's)")] = None,
) -> None:
    """Predict decode GEMM/GEMV time per GPU, scheme and batch with the roofline model."""
    from models.schemes import get_scheme

    for value, option in ((shape, "--shape"), (model, "--model"), (baseline, "--baseline"), (tier, "--tier")):
        cli_args.nonempty(value, option)
    if shape is not None and model is not None:
        raise InputError("give either --shape or --model, not both")
    if rollup and model is None:
        raise InputError("--rollup needs --model (e.g. --model llama-2-7b)")
    kernels = cli_args.split_list(kernel, "--kernel")
    if kernels and tier != "kernel":
        raise InputError("--kernel needs --tier kernel (the roofline tiers do not model kernels)")
    if kernels and (rollup or scheme):
        raise InputError("--kernel names the kernels (and so their schemes): give it without --scheme and --rollup")
    if csv is not None:
        cli_args.csv_path(csv, "--csv")
    gpu_keys, schemes = _resolve_names(gpu, scheme)
    get_scheme(baseline)
    batches = parse_batches(batch)
    if shape is not None:
        cli_args.parse_shape(shape)
    if model is not None:
        from models.workloads import get_model

        get_model(model)  # unknown -> InputError listing the valid ones
    if group_size is not None:
        group_size = cli_args.parse_int(group_size, "--group-size", 1, cli_args.MAX_GROUP, "128")
    from workbench.interfaces import cli_moe

    moe, routed = cli_moe.resolve(model, routing, top_k, rollup)
    data_dir = cli_args.data_dir(data_dir)
    cals = _calibrations(tier, data_dir, gpu_keys)
    if rollup:
        from models.rollup import rollup as run_rollup

        if tier == "kernel":
            raise InputError("--rollup predicts with the roofline tiers (datasheet, calibrated, floor); the kernel "
                             "tier per layer is in `workbench export FILE.csv --rollup MODEL`")
        out = run_rollup(moe or model, gpu_keys, schemes, batches, cals or None, TIERS[tier], baseline, group_size,
                         routed)
        out = out[out["scheme"].isin(schemes)].reset_index(drop=True)
        _print_rollup(out, f"{model}: linear layers per decode step ({tier} roofline)")
        if moe is not None:
            cli_moe.print_load(moe, routed, batches)
        if csv is not None:
            cli_args.write_csv(out, cli_args.csv_path(csv, "--csv"))
        return
    from workbench.analysis.kernel_tier import params_for

    if kernels:
        pred = predict_named_kernels(gpu_keys, list(dict.fromkeys(kernels)), batches, shape, model, baseline,
                                     group_size, cals, params_for(data_dir))
    else:
        pred = predict_points(gpu_keys, schemes, batches, shape, model, baseline, group_size, tier, cals,
                              params_for(data_dir) if tier == "kernel" else None)
    what = model or (shape or DEFAULT_SHAPE)
    _print_points(pred, tier, f"{what}: predicted time per GEMM ({tier} roofline)")
    if kernels:  # named kernels a GPU or batch cannot run: why, instead of a time
        for why in sorted(set(pred.loc[pred["time_kernel_s"].isna(), "kernel_params_source"].astype(str))):
            print(f"not predicted: {why}")
    elif tier == "kernel":
        for line in _unpredicted(pred):
            print(f"not predicted: {line}")
        if model is not None:  # an MoE model's expert layers as one grouped launch each
            cli_moe.print_grouped(model, gpu_keys, schemes, batches, cals, params_for(data_dir))
    if csv is not None:
        cli_args.write_csv(pred[[c for c in POINT_CSV_COLUMNS if c in pred]], cli_args.csv_path(csv, "--csv"))


def _unpredicted(pred: pd.DataFrame) -> list[str]:
    """Per GPU and scheme with no modeled kernel at some M: one line saying so (the GPU's architecture, the M)."""
    from models.hardware import get_gpu

    lines = []
    missing = pred[pred["time_kernel_s"].isna()]
    for (gpu, scheme), g in missing.groupby(["gpu", "scheme"], sort=False):
        ms = ", ".join(str(m) for m in sorted(set(g["M"])))
        lines.append(f"no modeled {scheme} kernel runs on {gpu} (sm_{get_gpu(gpu).cc_int}) at M = {ms}")
    return lines


def _print_columns(title: str, headers: list[tuple[str, str]], rows: list[list[str]], narrow_drop: tuple[str, ...],
                   wrap: tuple[str, ...] = ()) -> None:
    """A catalogue table; below NARROW columns the `narrow_drop` columns are left out (the caption says which) and
    only the `wrap` columns may wrap (at spaces), so names and numbers stay whole on a 100-column terminal."""
    console = _console()
    narrow = console.width < NARROW
    table = _table(title, narrow)
    keep = [i for i, (h, _) in enumerate(headers) if not (narrow and h in narrow_drop)]
    for i in keep:
        h, justify = headers[i]
        table.add_column(h, justify=justify, no_wrap=h not in wrap)
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    if narrow and narrow_drop:
        table.caption = f"{', '.join(narrow_drop)} left out below {NARROW} columns"
    console.print(table)


def gpus_command() -> None:
    """List the GPU catalogue (dense datasheet peaks)."""
    from models.hardware import load_gpus

    units = ("fp32", "fp16", "bf16", "int8", "fp8", "fp4")
    narrow = _console().width < NARROW
    headers = [("key", "left"), ("name", "left"), ("cc", "right"), ("SMs", "right"), ("clock", "right"),
               ("bandwidth", "right"), ("L2", "right"), *((u.upper(), "right") for u in units), ("source", "left")]
    rows = []
    for g in load_gpus().values():
        if narrow:  # one unit for every peak keeps the columns narrow
            peaks = [f"{g.peak(u) / 1e12:,.0f}" if g.peak(u) > 0 else "—" for u in units]
        else:
            peaks = [fmt_flops_rate(g.peak(u)) if g.peak(u) > 0 else "—" for u in units]
        rows.append([g.key, g.name, g.cc, str(g.sms), fmt_clock(g.boost_clock_hz), fmt_bandwidth(g.bandwidth),
                     fmt_bytes(g.l2_bytes), *peaks, g.sources["source"]])
    title = "GPU catalogue (data/gpus.toml): dense peaks at boost clock" + (" in TFLOP/s (INT8: TOP/s)" if narrow
                                                                            else "")
    _print_columns(title, headers, rows, ("name", "source"), wrap=("name", "source"))


def schemes_command() -> None:
    """List the quantization schemes and their byte accounting."""
    from models.schemes import SCHEME_PARAMS, all_schemes

    headers = [(h, "left") for h in ("name", "weights", "acts", "out bits", "bits/weight", "metadata", "compute",
                                     "dequant ops/w", "runnable", "parameters", "description")]
    rows = []
    for s in all_schemes():
        meta = s.granularity if s.granularity != "group" else f"group {s.group_size}"
        if s.scale_bits:
            meta += f", {s.scale_bits}-bit scale" + (f" + {s.zero_bits}-bit zero" if s.zero_bits else "")
        params = ", ".join(f"{k}={v}" for k, v in SCHEME_PARAMS[s.name].items()) or "—"
        rows.append([s.name, s.weight_dtype, s.act_dtype, str(s.out_bits), f"{s.bits_per_weight:.3f}", meta,
                     s.compute_unit, f"{s.dequant_ops_per_weight:g}", "yes" if s.runnable else "modeled", params,
                     s.description])
    _print_columns("Schemes (defaults; bits/weight includes group scales and zeros)", headers, rows,
                   ("parameters", "description"), wrap=("metadata", "parameters", "description"))


def register(app: typer.Typer) -> None:
    app.command("predict")(predict_command)
    app.command("gpus")(gpus_command)
    app.command("schemes")(schemes_command)
