"""Callbacks as plain functions of (state, control values); `wiring.wire(app, state, guard)` attaches them to Dash.

Only the visible view recomputes: one callback owns every figure and fills the open tab's (the others get no update);
figures are cached per (view, selection, uploads). Every input is validated (queries.make_selection drops values of
the wrong type); a payload that still cannot be served is a no-op (guard.safe), never an HTTP 500.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pandas as pd

from models.errors import InputError
from workbench.interfaces.dashboard import (
    guard,
    ids,
    style,
    table,
    views,
    views_breakdown,
    views_lessons,
    views_moe,
    views_public,
)
from workbench.interfaces.dashboard.data import DashboardData, Frames, UploadRegistry, parse_upload, session_frames
from workbench.interfaces.dashboard.queries import (
    Selection,
    control_options,
    default_selection,
    make_selection,
    status_lines,
)
from workbench.interfaces.dashboard.uploads import MB, UPLOAD_LIMIT_BYTES, UPLOAD_LIMIT_MB

CONTROLS = (ids.GPUS, ids.PRIMARY, ids.SCHEMES, ids.KERNELS, ids.KERNEL_VIEW, ids.SHAPE, ids.BATCH_LO, ids.BATCH_HI,
            ids.BASELINE, ids.TIER, ids.MODE)  # fmt: skip
N_CONTROLS = len(CONTROLS)
HYPOTHESIS_COLUMNS = ("id", "claim", "gpu_key", "source", "verdict", "value", "low", "high", "threshold", "n",
                      "detail", "file", "line")  # fmt: skip
FIGURE_CACHE = 128  # entries: a view's Figure and its JSON dict are one each
TOKEN_SALT = os.urandom(16)  # per server process: a page open across a restart (other data, maybe) gets new figures


class AppState:
    """The loaded data, the uploads registry, and small caches of session frames and figures."""

    def __init__(self, data: DashboardData) -> None:
        self.data = data
        self.uploads = UploadRegistry()
        self._frames: OrderedDict[tuple[str, ...], Frames] = OrderedDict()
        self._hyp: OrderedDict[tuple[str, ...], pd.DataFrame] = OrderedDict()
        self._figures: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(tokens: Any) -> tuple[str, ...]:
        return tuple(t for t in (tokens if isinstance(tokens, list | tuple) else []) if isinstance(t, str))

    def frames(self, tokens: Any) -> Frames:
        key = self.key(tokens)
        with self._lock:
            if key in self._frames:
                self._frames.move_to_end(key)
                return self._frames[key]
        frames = session_frames(self.data, self.uploads.get(key))
        with self._lock:
            self._frames[key] = frames
            while len(self._frames) > 8:
                self._frames.popitem(last=False)
        return frames

    def figure(self, key: tuple, build: Callable[[], Any]) -> Any:
        """A figure's JSON-ready dict, built once per key (a tab revisited with the same controls is free)."""
        with self._lock:
            if key in self._figures:
                self._figures.move_to_end(key)
                return self._figures[key]
        fig = build()
        with self._lock:
            self._figures[key] = fig
            while len(self._figures) > FIGURE_CACHE:
                self._figures.popitem(last=False)
        return fig

    def hypotheses(self, tokens: Any) -> pd.DataFrame:
        """Verdicts on the shipped data, re-evaluated when the session has uploads."""
        key = self.key(tokens)
        if not key or not self.uploads.get(key):
            return self.data.hypotheses
        with self._lock:
            if key in self._hyp:
                return self._hyp[key]
        from workbench.analysis.hypotheses import evaluate_all

        try:
            verdicts = evaluate_all(data_dir=self.data.data_dir, comparison=self.frames(key).latest)
        except (InputError, OSError):
            verdicts = self.data.hypotheses
        with self._lock:
            self._hyp[key] = verdicts
        return verdicts

    def selection(self, *controls: Any) -> Selection:
        return make_selection(self.data, *controls)


# ---------------------------------------------------------------------------------------------------- views
FAILED_FIGURE = "This figure could not be drawn for this selection"


def _safe(build: Callable[[], Any], title: str) -> Any:
    """The view's figure; an input it refuses, or a figure that fails to build, is a figure saying so in one line
    (an exception escaping to guard.safe would leave the previous figure on the page with no word why)."""
    try:
        return build()
    except InputError as exc:
        return style.empty_figure(str(exc).splitlines()[0], title)
    except Exception as exc:  # noqa: BLE001 - shown to the user and logged, not raised
        guard.LOG.warning("%s: %s: %s: %s", FAILED_FIGURE, title, type(exc).__name__, guard.first_line(exc))
        return style.empty_figure(f"{FAILED_FIGURE} ({type(exc).__name__}: {guard.first_line(exc)}).", title)


BUILDERS = {
    "roofline": views.roofline_view,
    "time": views.time_view,
    "speedup": views.speedup_view,
    "error": views.error_view,
    "clocks": views.clocks_view,
    "rollup": views_breakdown.rollup_view,
    "attribution": views_breakdown.attribution_view,
    "recommend": views_lessons.recommend_view,
    "quant": views_lessons.quant_error_view,
    "ladder": views_lessons.ladder_view,
}


def _figure_key(state: AppState, view: str, controls: tuple[Any, ...], tokens: Any, compare_view: Any,
                moe: Any = None) -> tuple:
    """(view, selection, uploads, the view's own option: the comparison view, or the MoE view's MoeOptions)."""
    if view not in ids.FIGURES:
        raise InputError(f"unknown view {view!r}")
    if view == "moe":
        option: Any = views_moe.options(*(moe if isinstance(moe, list | tuple) and len(moe) == 3 else ()))
    else:
        option = (compare_view if compare_view in ids.COMPARE_VIEWS else "time") if view == "compare" else ""
    return (view, state.selection(*controls), state.key(tokens), option)


def figure_token(key: tuple) -> str:
    """A short name of a figure key, stable within this process: the page keeps the token of each figure it holds
    (FIGURE_KEYS), so a figure the browser already has is not sent again."""
    import hashlib

    return hashlib.blake2b(repr(key).encode(), digest_size=8, salt=TOKEN_SALT).hexdigest()


def view_figure(state: AppState, view: str, controls: tuple[Any, ...], tokens: Any, compare_view: Any = "time",
                moe: Any = None):
    """The figure of one view (a key of ids.FIGURES) for raw control values in CONTROLS order (`moe`: the MoE
    view's model, layer and routing)."""
    key = _figure_key(state, view, controls, tokens, compare_view, moe)
    _, sel, _, option = key
    compare_view = option if view == "compare" else ""

    def build() -> Any:
        frames = state.frames(tokens)
        if not sel.schemes:
            return style.empty_figure("Select at least one scheme.")
        if view == "compare" and compare_view == "public":
            return _safe(lambda: views_public.public_view(state.data, sel), "GPU comparison")
        if view == "compare":
            return _safe(lambda: views.compare_view(state.data, frames, sel, compare_view or "time"), "GPU comparison")
        if view == "moe":
            return _safe(lambda: views_moe.moe_view(state.data, frames, sel, option), "MoE experts")
        return _safe(lambda: BUILDERS[view](state.data, frames, sel), view)

    return state.figure(key, build)


def view_json(state: AppState, view: str, controls: tuple[Any, ...], tokens: Any, compare_view: Any = "time",
              moe: Any = None) -> dict[str, Any]:
    """`view_figure` as the plain JSON dict the page is sent, made once per figure key: a callback answering with a
    figure it made before sends this dict as it is (a Figure would be converted and encoded again on every answer)."""
    key = ("json", *_figure_key(state, view, controls, tokens, compare_view, moe))
    return state.figure(key, lambda: figure_dict(view_figure(state, view, controls, tokens, compare_view, moe)))


def figure_dict(fig: Any) -> dict[str, Any]:
    """A Figure as plain JSON types, numeric arrays base64-encoded as plotly.py sends them (plotly.io's encoder, no
    validation: the builders make known-good figures)."""
    import plotly.io as pio

    return json.loads(pio.to_json(fig, validate=False))


def page_outputs(state: AppState, view: Any, controls: tuple[Any, ...], tokens: Any, compare: Any,
                 held: Any = None, moe: Any = None, mounted: Any = ()) -> dict[tuple[Any, str], Any]:
    """What one control change updates, as (component id, prop) -> value: the open view's graph or grid — its slot's
    children (layout.view_graph / view_grid) when the page has not mounted it yet (`mounted`: the views whose slot
    is filled), else its figure, rows or note in place ((ids.GRAPH | ids.GRID | ids.GRID_NOTE, view) keys) — unless
    the page holds it already (`held`: view -> token, FIGURE_KEYS); the status line unless unchanged; and the page's
    tokens after this answer. The page's first layout carries the same (nothing mounted)."""
    from workbench.interfaces.dashboard import layout

    held = dict(held) if isinstance(held, dict) else {}
    out: dict[tuple[Any, str], Any] = {}
    if view in ids.FIGURES:
        token = figure_token(_figure_key(state, view, controls, tokens, compare, moe))
        if view not in mounted:
            out[(ids.SLOTS[view], "children")] = layout.view_graph(view, view_json(state, view, controls, tokens,
                                                                                   compare, moe))  # fmt: skip
        elif held.get(view) != token:
            out[(ids.GRAPH, view)] = view_json(state, view, controls, tokens, compare, moe)
        held[view] = token
    elif view in ids.GRIDS:
        token = figure_token(("grid", view, state.selection(*controls), state.key(tokens)))
        if view not in mounted or held.get(view) != token:
            if view == "table":
                rows, columns, note = grid_rows(state, controls, tokens)
            else:
                (rows, columns), note = hypotheses_table(state, controls[0], tokens), None
            if view not in mounted:
                out[(ids.SLOTS[view], "children")] = layout.view_grid(view, rows, columns, note)
            else:
                out |= {(ids.GRID, view): (rows, columns), (ids.GRID_NOTE, view): note}
        held[view] = token
    status_token = figure_token(("status", state.selection(*controls), state.key(tokens)))
    if held.get("status") != status_token:
        out[(ids.STATUS, "children")] = status(state, controls, tokens)
    held["status"] = status_token
    out[(ids.FIGURE_KEYS, "data")] = held
    return out


def status(state: AppState, controls: tuple[Any, ...], tokens: Any) -> list[Any]:
    from dash import html

    sel = state.selection(*controls)
    lines = status_lines(state.data, state.frames(tokens), sel)
    if sel.best and not sel.kernels:
        lines.append("Measured points: the fastest kernel of each scheme at each batch (choose 'every kernel' to see "
                     "them all).")  # fmt: skip
    return [
        html.Div(line, className="status-line predictions-only" if "predictions only" in line else "status-line")
        for line in lines
    ]


def options(state: AppState, tokens: Any) -> tuple[list, list, list, list]:
    """GPU, kernel, shape and baseline options over the shipped data and the session's uploads."""
    opts = control_options(state.data, state.frames(tokens))
    return opts["gpus"], opts["kernels"], opts["shapes"], opts["baselines"]


def primary_choices(state: AppState) -> tuple[dict[str, str], tuple[str, ...]]:
    """What the primary-GPU box is filled from in the browser (wiring.PRIMARY_JS): every GPU key with its label in
    the GPU boxes, and the GPUs a selection of none falls back to (queries.default_selection)."""
    labels = {o["value"]: o["label"] for o in control_options(state.data)["gpus"]}
    return labels, default_selection(state.data).gpus


def hypotheses_table(state: AppState, gpus: Any, tokens: Any) -> tuple[list[dict], list[dict]]:
    """AG Grid rows and column definitions of the verdicts for the selected GPUs (empty columns left out; the file
    shown by name, not by its path on the server)."""
    verdicts = state.hypotheses(tokens)
    if verdicts is None or verdicts.empty:
        return [{"claim": "No hypotheses evaluated (none in data/hypotheses, or they could not be read)."}], [
            {"field": "claim", "headerName": "claim", "flex": 1}
        ]
    wanted = {g for g in (gpus if isinstance(gpus, list) else []) if isinstance(g, str)}
    rows = verdicts[verdicts["gpu_key"].astype(str).isin(wanted | {""})] if wanted else verdicts
    rows = rows[[c for c in HYPOTHESIS_COLUMNS if c in rows.columns]].copy()
    for col in ("value", "low", "high", "threshold"):
        if col in rows.columns:
            rows[col] = pd.to_numeric(rows[col], errors="coerce").round(4)
    if "file" in rows.columns:
        rows["file"] = rows["file"].astype("string").str.replace(r"^.*[\\/]", "", regex=True)
    rows = rows[[c for c in rows.columns if rows[c].astype("string").fillna("").str.len().gt(0).any()]]
    records = rows.astype(object).where(rows.notna(), None).to_dict("records")
    return records, table.hypothesis_columns(list(rows.columns))


def grid_rows(state: AppState, controls: tuple[Any, ...], tokens: Any) -> tuple[list[dict], list[dict], str]:
    """The data grid's rows (display units), column definitions, and a line saying what the rows are."""
    sel = state.selection(*controls)
    try:
        rows = table.table_rows(state.data, state.frames(tokens), sel, None, None)
    except InputError as exc:
        return [], [], f"error: {str(exc).splitlines()[0]}"
    records = table.records(rows)
    what = (
        "measured points joined with predictions"
        if rows.source == "measured"
        else "predicted points (no measurements for the selected GPUs)"
    )
    note = f"{len(rows.shown)} rows: {what}. The CSV holds exactly the rows the grid's filters and sort keep "
    note += "(all pages), in SI units."
    if len(records) < len(rows.shown):
        note += f" The grid holds the first {len(records)}; narrow the selection to page through the rest."
    return records, table.grid_columns(rows.columns), note


def download_csv(
    state: AppState, controls: tuple[Any, ...], tokens: Any, filter_model: Any, column_state: Any
) -> dict[str, Any]:
    """The dcc.Download payload: the grid's rows under its filters and sort (every page), raw SI columns."""
    sel = state.selection(*controls)
    query, _ = table.grid_filter(filter_model)
    rows = table.table_rows(state.data, state.frames(tokens), sel, query, table.grid_sort(column_state))
    name = f"workbench-{rows.source}-{'-'.join(sel.gpus)}-{sel.shape.replace(':', '-')}.csv"
    return {"content": table.to_csv(rows), "filename": name, "type": "text/csv", "base64": False}


def upload(state: AppState, contents: Any, filename: Any, tokens: Any) -> tuple[list[str] | None, str]:
    """Validate an uploaded measurement file; on success add it to the session (new token list), else say why and
    return None for the tokens (unchanged). Bytes are only decoded and parsed as Parquet/CSV: never unpickled."""
    tokens = list(AppState.key(tokens))
    name = filename if isinstance(filename, str) and 0 < len(filename) <= 255 else "upload"
    if not contents or not isinstance(contents, str) or "," not in contents:
        return None, f"{name}: nothing was uploaded."
    if len(contents) * 3 / 4 > UPLOAD_LIMIT_BYTES * 1.01 + 1024:
        return None, f"{name}: {len(contents) * 3 / 4 / MB:.1f} MB is over the {UPLOAD_LIMIT_MB} MB upload limit."
    try:
        raw = base64.b64decode(contents.split(",", 1)[1], validate=True)
    except (binascii.Error, ValueError):
        return None, f"{name}: the upload could not be decoded."
    try:
        parsed = parse_upload(state.data, name, raw)
    except InputError as exc:
        return None, f"Upload rejected — {str(exc).splitlines()[0]}"
    token = state.uploads.add(parsed)
    gpus = ", ".join(sorted(set(parsed.comparison["gpu_key"].astype(str))))
    return [*tokens, token], (
        f"Added {name}: {len(parsed.measurements)} measured points ({gpus}), shown beside the shipped data as "
        f"kernels named '<kernel> @{name}'."
    )

