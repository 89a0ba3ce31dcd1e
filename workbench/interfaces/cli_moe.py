"""MoE options of `workbench predict --model M --rollup`: `--routing` (uniform, zipf:S or a routing histogram file)
and `--top-k`, checked against the model's expert layers before anything is computed or written, and the table of
touched experts per batch printed beside the roll-up (models/moe.py holds the routing model); `workbench profile
--moe` (profile_moe: the expert layers measured with the grouped kernels, workbench.measure.moe_points)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from models.errors import InputError


def resolve(model_key: str | None, routing: str | None, top_k: str | None, rollup: bool) -> tuple[Any, Any]:
    """(the model to roll up, the routing) or (None, None) without MoE options; InputError on bad input."""
    if routing is None and top_k is None:
        return None, None
    if model_key is None or not rollup:
        raise InputError("--routing and --top-k need --model and --rollup (e.g. --model qwen3-30b-a3b --rollup)")
    from models.moe import moe_model
    from models.workloads import get_model
    from workbench.interfaces import cli_args

    k = cli_args.parse_int(top_k, "--top-k", 1, 1 << 16, "8") if top_k is not None else None
    if routing is not None:
        cli_args.nonempty(routing, "--routing")
    return moe_model(get_model(model_key), routing, k)


def print_load(model: Any, routing: Any, batches: list[int]) -> None:
    """Touched experts and rows per expert of each expert layer at each batch."""
    from rich.console import Console
    from rich.table import Table

    from models.moe import load_table

    table = Table(title=f"{model.key}: expert layers under {routing.label} routing (expected per step)")
    for h in ("layer", "E", "top-k", "batch", "touched experts", "rows/expert", "busiest expert"):
        table.add_column(h, justify="left" if h == "layer" else "right")
    for name, e, k, b, touched, mean, busiest in load_table(model, routing, batches):
        table.add_row(name, str(e), str(k), str(b), f"{touched:.1f}", f"{mean:.2f}", f"{busiest:.1f}")
    Console().print(table)


def print_grouped(model_key: str, gpus: list[str], schemes: list[str], batches: list[int], calibrations: Any,
                  table: Any) -> None:
    """`predict --tier kernel --model M` on an MoE model: each expert layer as one grouped launch (kernel tier of
    the grouped kernels, expected uniform routing) per GPU, scheme and batch; nothing for a dense model."""
    from rich.console import Console
    from rich.table import Table

    from models.workloads import get_model
    from workbench.analysis import moe_tier

    model = get_model(model_key)
    frames = [moe_tier.layers(model, g, schemes, batches, None, calibrations, table) for g in gpus]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return
    t = Table(title=f"{model_key}: expert layers as one grouped launch (kernel tier, uniform routing)")
    for h in ("gpu", "layer", "scheme", "kernel", "batch", "touched", "rows/pass", "µs", "GB/s", "parameters"):
        t.add_column(h, justify="left" if h in ("gpu", "layer", "scheme", "kernel", "parameters") else "right")
    for f in frames:
        for r in f.itertuples(index=False):
            t.add_row(str(r.gpu), str(r.layer), str(r.scheme), str(r.kernel), str(r.batch), f"{r.touched:.1f}",
                      f"{r.pass_rows:.0f}", f"{r.time_kernel_s * 1e6:.1f}", f"{r.bytes / r.time_kernel_s / 1e9:.0f}",
                      str(r.kernel_params_source))
    Console(width=200).print(t)


def profile_moe(moe: str | None, routing: str | None, routing_seed: str | None, *, scheme: list[str] | None,
                kernel: list[str] | None, batch: list[str] | None, out: Path | None, hot: bool, budget: float,
                graph: bool, fresh: bool, progress: bool, data_root: str | None, calibration_dir: Path | None,
                wait: bool, others: dict[str, Any], remeasure: bool = False) -> None:
    """`workbench profile --moe MODEL[,MODEL] [--routing R] [--routing-seed N]`: the models' expert layers with the
    grouped kernels (workbench.measure.moe_points); every argument checked before the GPU is touched."""
    import sys

    from models.paths import dataset_dir
    from workbench.interfaces import cli_args
    from workbench.interfaces.sweep_report import default_out, report
    from workbench.measure import moe_points
    from workbench.measure.profiler import DEFAULT_BATCHES, calibration_clock, run_sweep
    from workbench.measure.timing import TimingConfig
    from workbench.storage import locks, store

    if moe is None:
        raise InputError("--routing and --routing-seed apply to --moe MODEL[,MODEL] (e.g. --moe mixtral-8x7b)")
    given = [k for k, v in others.items() if v not in (None, False, [])]
    if given:
        raise InputError(f"--moe measures the models' expert layers on one GPU; leave out {', '.join(given)}")
    models = moe_points.parse_models(moe)
    seed = cli_args.parse_int(routing_seed, "--routing-seed", 0, 2**32 - 1, "0") if routing_seed is not None else 0
    if routing is not None:
        cli_args.nonempty(routing, "--routing")
    layers = moe_points.setups(models, routing, seed)
    specs = moe_points.select(cli_args.split_list(scheme or [], "--scheme"), cli_args.split_list(kernel or [],
                                                                                                "--kernel"))
    batches = cli_args.parse_batches(batch, DEFAULT_BATCHES)
    cfg = TimingConfig(hot=hot, budget_s=budget, use_graph=graph).validate()
    root = Path(cli_args.nonempty(data_root, "--data-dir")) if data_root is not None else dataset_dir()
    cli_args.writable_target(root, "--data-dir")
    if out is not None:
        if out.suffix != ".parquet":
            raise InputError(f"--out {out}: give a file name ending in .parquet")
        cli_args.writable_target(out, "--out")
        cli_args.check_out_path(out, "--out")
    from workbench.measure.environment import detect, free_device_bytes, require_gpu

    require_gpu()
    env = detect()
    out = out or default_out(env, hot, root).with_name(f"moe-{'hot' if hot else 'cold'}.parquet")
    locks.hold_sweep(env.gpu_uuid, out, wait=wait, on_wait=lambda m: print(m, file=sys.stderr))
    points = moe_points.plan(specs, [x for x in layers], batches, env.cc)
    if not points:
        raise InputError(f"no grouped kernel runs on compute capability {env.compute_capability}")
    moe_points.check_memory(points, free_device_bytes(), env.l2_bytes)
    store.check_writable(out)
    from workbench.measure.nvml import NvmlSampler
    from workbench.measure.timing import CudaTimer

    print(f"{env.gpu_name} ({env.gpu_uuid}) cc {env.compute_capability}, {len(points)} MoE points "
          f"({layers[0][1].routing.label}, seed {seed}) -> {out}")
    result = run_sweep(points, out, env, cfg=cfg, timer=CudaTimer(use_graph=graph),
                       sampler=NvmlSampler(uuid=env.gpu_uuid or None), runner_factory=moe_points.runner_factory,
                       calibration_sm_clock_hz=calibration_clock(env, calibration_dir or root / "calibration"),
                       fresh=fresh, progress=progress, remeasure=remeasure)
    report(result, out)
