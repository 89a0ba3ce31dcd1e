"""MoE options of `workbench predict --model M --rollup`: `--routing` (uniform, zipf:S or a routing histogram file)
and `--top-k`, checked against the model's expert layers before anything is computed or written, and the table of
touched experts per batch printed beside the roll-up (models/moe.py holds the routing model)."""

from __future__ import annotations

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
