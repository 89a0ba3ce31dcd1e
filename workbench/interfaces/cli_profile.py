"""`workbench profile`, `workbench calibrate` and `workbench env`: the commands that need a GPU.

Every argument is validated (names, shapes, output path) before the GPU is touched; without a GPU the commands say
in one line what still works (exit 2).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from models.errors import InputError
from models.paths import dataset_dir
from models.schemes import GROUP_SIZES
from workbench.interfaces import cli_args
from workbench.interfaces.sweep_report import default_out, report
from workbench.measure.environment import Environment, detect, require_gpu
from workbench.measure.profiler import (
    DEFAULT_BATCHES,
    SweepAborted,
    calibration_clock,
    check_memory,
    dedupe_shapes,
    default_shapes,
    model_shapes,
    parse_shapes,
    plan,
    run_sweep,
    select_kernels,
    unsupported,
)
from workbench.measure.timing import TimingConfig
from workbench.storage import locks, store


def profile(
    scheme: Annotated[list[str] | None, typer.Option("--scheme", "-s", help="scheme(s); default: all")] = None,
    kernel: Annotated[list[str] | None, typer.Option("--kernel", "-k", help="kernel name(s); default: all")] = None,
    exclude: Annotated[list[str] | None, typer.Option("--exclude", "-x", help="kernel name(s) to leave out")] = None,
    batch: Annotated[list[str] | None, typer.Option("--batch", "-M", "-m", help="batch sizes M (repeatable, comma "
                                                    "list); default 1..256")] = None,
    shape: Annotated[list[str] | None, typer.Option("--shape", help="NxK weight shape, repeatable")] = None,
    model: Annotated[str | None, typer.Option("--model", help="an LLM's layers, e.g. llama-2-7b")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="output .parquet")] = None,
    hot: Annotated[bool, typer.Option("--hot", help="one input set (L2-warm) instead of rotating >= 3x L2")] = False,
    budget: Annotated[float, typer.Option("--budget", help="seconds of timing loop per point")] = 0.12,
    graph: Annotated[bool, typer.Option("--graph/--no-graph", help="replay a CUDA graph of launches")] = True,
    fresh: Annotated[bool, typer.Option("--fresh", help="discard what the output holds instead of resuming")] = False,
    remeasure: Annotated[bool, typer.Option("--remeasure", help="measure the selected points again, also those the "
                                            "output holds; the new rows replace theirs (after a kernel change)")]
    = False,
    stale: Annotated[bool, typer.Option("--stale", help="measure again the points of --out whose kernel code changed "
                                        "since they were measured (`workbench stale`); their rows are replaced")]
    = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
    calibration_dir: Annotated[Path | None, typer.Option("--calibration-dir")] = None,
    group_size: Annotated[int | None, typer.Option(
        "--group-size", "-g", help=f"w4a16 group size G, one of {GROUP_SIZES} (default 128); kernels that cannot "
        "run it are skipped with the reason")] = None,
    gpus: Annotated[str | None, typer.Option("--gpus", help="all, or NVML indices/UUIDs (0,2)")] = None,
    split: Annotated[bool, typer.Option("--split", help="--gpus/--ray: share one plan between the GPUs")] = False,
    ray: Annotated[str | None, typer.Option("--ray", help="Ray address: local, auto, HOST:PORT")] = None,
    data_root: Annotated[str | None, typer.Option("--data-dir", "--data", help="default --out and calibration root "
                                                  "(default $WORKBENCH_DATA, else the checkout's data/)")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="wait for a sweep holding this GPU or output to finish")]
    = False,
    moe: Annotated[str | None, typer.Option("--moe", help="MoE model(s), e.g. mixtral-8x7b,qwen3-30b-a3b: their "
                                            "expert layers with the grouped kernels (default out: moe-cold.parquet)")]
    = None,
    routing: Annotated[str | None, typer.Option("--routing", help="--moe: uniform (default), zipf:S or a routing "
                                                "histogram file")] = None,
    routing_seed: Annotated[str | None, typer.Option("--routing-seed", help="--moe: seed of the drawn routing "
                                                     "(default 0)")] = None,
) -> None:
    """Measure kernels x batches x shapes on this GPU; each point is appended as soon as it is measured."""
    if not 0 < budget <= 3600:  # also refuses nan and inf
        raise InputError(f"--budget {budget}: give seconds per point in (0, 3600], e.g. --budget 0.12")
    for value, option in ((gpus, "--gpus"), (ray, "--ray")):  # empty: refused, not read as "one local GPU"
        cli_args.nonempty(value, option)
    if remeasure and fresh:
        raise InputError("--remeasure with --fresh: --fresh already measures every point and drops the rest of the "
                         "output; give one of them")
    if remeasure and (gpus or ray or split):
        raise InputError("--remeasure runs on one GPU; leave out --gpus, --split and --ray")
    stale_kernels = None
    if stale:
        stale_kernels = _check_stale(out, kernel, {
            "--fresh": fresh, "--remeasure": remeasure, "--gpus": gpus, "--split": split, "--ray": ray, "--moe": moe,
            "--shape": shape, "--model": model, "--batch": batch, "--scheme": scheme, "--exclude": exclude})
    if moe is not None or routing is not None or routing_seed is not None:
        from workbench.interfaces.cli_moe import profile_moe

        return profile_moe(moe, routing, routing_seed, scheme=scheme, kernel=kernel, batch=batch, out=out, hot=hot,
                           budget=budget, graph=graph, fresh=fresh, progress=progress, data_root=data_root,
                           calibration_dir=calibration_dir, wait=wait, remeasure=remeasure,
                           others={"--exclude": exclude, "--shape": shape, "--model": model,
                                   "--group-size": group_size, "--gpus": gpus, "--split": split, "--ray": ray})
    if group_size is not None and group_size not in GROUP_SIZES:
        raise InputError(f"--group-size {group_size}: accepted group sizes are {', '.join(map(str, GROUP_SIZES))}")
    cfg = TimingConfig(hot=hot, budget_s=budget, use_graph=graph).validate()
    data_root = Path(cli_args.nonempty(data_root, "--data-dir")) if data_root is not None else dataset_dir()
    cli_args.writable_target(data_root, "--data-dir")
    calibration_dir = calibration_dir or data_root / "calibration"
    for value in shape or []:
        cli_args.parse_shape(value)  # limits and malformed values, before the profiler's parser
    cli_args.nonempty(model, "--model")
    shapes = parse_shapes(shape or [])
    if model:
        shapes += model_shapes(model)
    shapes = dedupe_shapes(shapes) if shapes else default_shapes()
    specs = [] if stale else select_kernels(scheme or [], kernel or [], exclude or [])
    batches = cli_args.parse_batches(batch, DEFAULT_BATCHES)
    if out is not None:
        if out.suffix != ".parquet":
            raise InputError(f"--out {out}: give a file name ending in .parquet")
        cli_args.writable_target(out, "--out")
        cli_args.check_out_path(out, "--out")  # creates nothing: no folder is made before a GPU is found
    if gpus or ray or split:  # several GPUs: workbench.interfaces.cli_scale (one worker per GPU, each its own file)
        from workbench.interfaces.cli_scale import profile_many

        return profile_many(specs, shapes, batches, cfg, gpus=gpus, split=split, ray=ray, out=out, fresh=fresh,
                            calibration_dir=calibration_dir,
                            default_out=lambda env, hot: default_out(env, hot, data_root),
                            data_dir=data_root, group_size=group_size)
    require_gpu()
    env = detect()
    out = out or default_out(env, hot, data_root)
    # this GPU and this output are ours until the command ends; taken before any CUDA context (a waiting sweep must
    # not sit on the GPU): a second sweep is refused naming the holder, or waits with --wait
    locks.hold_sweep(env.gpu_uuid, out, wait=wait, on_wait=lambda m: print(m, file=sys.stderr))
    if stale:
        points, group_size = _stale_points(out, env, hot, stale_kernels, group_size)
        if not points:
            return
        remeasure = True
    else:
        points = plan(specs, shapes, batches, env.cc)
    skipped = [] if stale else unsupported(specs, env.cc)
    if not points:
        cc = env.compute_capability
        why = f" ({skipped[0]}{'; ...' if len(skipped) > 1 else ''})" if skipped else ""
        raise InputError(f"no selected kernel supports batches {batches} on compute capability {cc}{why}")
    for line in skipped:
        print(f"skipped: {line}")
    from workbench.measure import moe_points
    from workbench.measure.environment import free_device_bytes

    check_memory([p for p in points if p.setup is None], free_device_bytes(), env.l2_bytes, cfg)
    moe_points.check_memory([p for p in points if p.setup is not None], free_device_bytes(), env.l2_bytes)
    store.check_writable(out)
    from workbench.measure.nvml import NvmlSampler
    from workbench.measure.timing import CudaTimer

    print(f"{env.gpu_name} ({env.gpu_uuid}) cc {env.compute_capability}, {len(points)} points -> {out}")
    try:
        result = run_sweep(
            points, out, env, cfg=cfg, timer=CudaTimer(use_graph=graph), sampler=NvmlSampler(uuid=env.gpu_uuid or None),
            calibration_sm_clock_hz=calibration_clock(env, calibration_dir), fresh=fresh, progress=progress,
            group_size=group_size, remeasure=remeasure,
            **({"runner_factory": moe_points.runner_factory} if stale else {}),  # its points may be MoE layers
        )
    except SweepAborted as exc:
        print(f"error: {exc}", file=sys.stderr)
        if exc.context_lost:  # CuPy's destructors would print a screen of errors from the dead context
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
        raise typer.Exit(1) from None
    report(result, out)


def _check_stale(out: Path | None, kernel: list[str] | None, others: dict[str, object]) -> set[str] | None:
    """--stale's arguments, before a GPU is looked for: an existing --out, none of the options it decides itself;
    returns the kernels it is limited to (--kernel: any kernel this workbench declares, grouped ones too)."""
    from kernels.fingerprint import kernel_code

    given = [k for k, v in others.items() if v not in (None, False, [])]
    if given:
        raise InputError(f"--stale takes its points from --out and measures them again on one GPU; leave out "
                         f"{', '.join(given)}")
    if out is None or not out.is_file():
        raise InputError(f"--stale needs --out FILE, a measurement file that exists (got {out}); "
                         "`workbench stale` lists the files whose rows measure changed code")
    names = cli_args.split_list(kernel, "--kernel")
    for name in names:
        if kernel_code(name) is None:
            raise InputError(f"--kernel {name}: not a kernel of this workbench (`workbench kernel-facts` lists them)")
    return set(names) or None


def _stale_points(out: Path, env: Environment, hot: bool, kernels: set[str] | None,
                  group_size: int | None) -> tuple[list, int | None]:
    """The points of `out` to measure again (workbench.measure.stale.stale_points), what is left said in one line
    each, and the group size they take."""
    from workbench.measure.stale import stale_points

    points, measured_at, notes = stale_points(store.read_measurement_file(out), env, "hot" if hot else "cold",
                                              kernels)
    for line in notes:
        print(f"left: {line}")
    if group_size is not None and measured_at is not None and group_size != measured_at:
        raise InputError(f"--group-size {group_size}: the changed w4a16 rows of {out} were measured at "
                         f"{measured_at}; leave --group-size out")
    if not points:
        print(f"nothing to measure again: no row of {out} measures changed code on {env.gpu_key or env.gpu_uuid} "
              f"({'hot' if hot else 'cold'})")
    return points, group_size if group_size is not None else measured_at


def calibrate(
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="folder for the calibration JSON (default: "
                                                 "the data directory's calibration/)")] = None,
    data_dir: cli_args.DataDirOpt = None,
) -> None:
    """Measure this GPU's ceilings (bandwidths, launch floor, FMA and mma.sync peaks, cuBLAS) and store them."""
    from workbench.measure.calibrate import calibrate as run_calibration

    if out_dir is None:
        root = Path(cli_args.nonempty(data_dir, "--data-dir")) if data_dir is not None else dataset_dir()
        out_dir = root / "calibration"
    cli_args.writable_target(out_dir, "--out")

    require_gpu()  # before anything is created
    env = detect()
    locks.hold_sweep(env.gpu_uuid, None)  # no sweep may run beside the calibration (one line naming the holder)
    store.check_writable(out_dir / ".probe.json")
    run_calibration(out_dir, env)


def env() -> None:
    """Print the environment the profiler records with every row."""
    require_gpu()
    for k, v in detect().columns().items():
        print(f"{k:<20} {v}")


def register(app: typer.Typer) -> None:
    app.command("profile")(profile)
    app.command("calibrate")(calibrate)
    app.command("env")(env)
