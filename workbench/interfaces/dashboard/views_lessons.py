"""The chapter's closing lessons as dashboard views (issue 20): which scheme to pick per batch, what accuracy each
byte of a quantization format buys, and what each production trick of a W4A16 kernel buys (issue 14: the rungs of
models.ladder.RUNGS, from the measured rows). Figures come from `fig_lessons`; the tables from
`workbench.analysis.recommend` and `workbench.analysis.quant_error` (the same functions as `workbench recommend` and
`workbench quant-error`)."""

from __future__ import annotations

import functools

import pandas as pd

from models.errors import InputError
from workbench.interfaces.dashboard import fig_lessons
from workbench.interfaces.dashboard.data import DashboardData, Frames
from workbench.interfaces.dashboard.queries import Selection, gpu_label

# The explorer's default weights for the view: Gaussian with 1 % outlier input channels at 20x, 128 x 4096 (rows only
# scale the cost; K = 4096 holds every group size). `workbench quant-error` explores any size or a real matrix.
QUANT_VIEW_SHAPE = (128, 4096)


@functools.cache
def _quant_table() -> pd.DataFrame:
    from workbench.analysis import quant_error

    w = quant_error.make_weights("outliers", *QUANT_VIEW_SHAPE, seed=0)
    return quant_error.explore(w)


def quant_error_view(data: DashboardData, frames: Frames, sel: Selection):
    n, k = QUANT_VIEW_SHAPE
    return fig_lessons.error_vs_bytes(
        _quant_table(), title=f"Quantization error of y = Wx vs bits per weight — Gaussian {n}×{k} weights with 1 % "
        "outlier channels at 20× (workbench quant-error explores others)")


def recommend_view(data: DashboardData, frames: Frames, sel: Selection):
    from workbench.analysis import recommend

    if sel.model:
        raise InputError("scheme per batch is per layer shape: pick a shape N×K in the shape box")
    n, k = (int(v) for v in sel.shape.split("x"))
    table = recommend.by_batch(frames.latest, sel.primary, n, k, schemes=sel.schemes, mode=sel.mode)
    switch = recommend.describe(recommend.switch_points(table))
    title = f"Fastest scheme per batch — {gpu_label(data, sel.primary)} · {n}×{k} · {sel.mode} · measured: {switch}"
    return fig_lessons.scheme_per_batch(table, title=title)


def ladder_view(data: DashboardData, frames: Frames, sel: Selection):
    from models.ladder import RUNGS  # the rung order and tricks (not the kernel registry)

    if sel.model:
        raise InputError("the tricks ladder is per layer shape: pick a shape N×K in the shape box")
    n, k = (int(v) for v in sel.shape.split("x"))
    df = frames.latest
    rows = df[(df["gpu_key"].astype(str) == sel.primary) & (df["N"] == n) & (df["K"] == k)
              & (df["mode"].astype(str) == sel.mode)]
    title = (f"W4A16 production-tricks ladder — {gpu_label(data, sel.primary)} · {n}×{k} · {sel.mode}: "
             "what each trick buys over the chapter's kernel")
    return fig_lessons.ladder(rows, RUNGS, title=title)
