"""Callbacks as plain functions of (state, control values), and `register(app, state)` that wires them to Dash.

Every view callback filters the precomputed frames and builds one figure; bad input never escapes as a traceback:
an InputError becomes a figure (or message) that says what was wrong.
"""

from __future__ import annotations

import base64
import binascii
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pandas as pd

from models.errors import InputError
from workbench.dashboard import ids, style, table, views
from workbench.dashboard.data import DashboardData, Frames, UploadRegistry, parse_upload, session_frames
from workbench.dashboard.layout import UPLOAD_LIMIT_BYTES
from workbench.dashboard.queries import Selection, control_options, make_selection, status_lines

CONTROLS = (ids.GPUS, ids.SCHEMES, ids.KERNELS, ids.SHAPE, ids.BATCH, ids.BASELINE, ids.TIER, ids.MODE)
HYPOTHESIS_COLUMNS = ("id", "claim", "gpu_key", "source", "verdict", "value", "low", "high", "threshold", "n",
                      "detail", "file", "line")  # fmt: skip


class AppState:
    """The loaded data, the uploads registry, and a small cache of session frames (shipped data + uploads)."""

    def __init__(self, data: DashboardData) -> None:
        self.data = data
        self.uploads = UploadRegistry()
        self._frames: OrderedDict[tuple[str, ...], Frames] = OrderedDict()
        self._hyp: OrderedDict[tuple[str, ...], pd.DataFrame] = OrderedDict()
        self._lock = threading.Lock()

    def frames(self, tokens: Any) -> Frames:
        key = tuple(t for t in (tokens or []) if isinstance(t, str))
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

    def hypotheses(self, tokens: Any) -> pd.DataFrame:
        """Verdicts on the shipped data, re-evaluated when the session has uploads."""
        key = tuple(t for t in (tokens or []) if isinstance(t, str))
        if not key or not self.uploads.get(key):
            return self.data.hypotheses
        with self._lock:
            if key in self._hyp:
                return self._hyp[key]
        from workbench.hypotheses import evaluate_all

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
def _safe(build: Callable[[], Any], title: str) -> Any:
    try:
        return build()
    except InputError as exc:
        return style.empty_figure(str(exc).splitlines()[0], title)


def view_figure(state: AppState, view: str, controls: tuple[Any, ...], tokens: Any, compare_view: str = "time"):
    """The figure of one view ("roofline", "time", "speedup", "error", "clocks", "compare", "rollup")."""
    sel = state.selection(*controls)
    frames = state.frames(tokens)
    if not sel.schemes:
        return style.empty_figure("Select at least one scheme.")
    builders = {
        "roofline": views.roofline_view,
        "time": views.time_view,
        "speedup": views.speedup_view,
        "error": views.error_view,
        "clocks": views.clocks_view,
        "rollup": views.rollup_view,
    }
    if view == "compare":
        return _safe(lambda: views.compare_view(state.data, frames, sel, compare_view), "GPU comparison")
    return _safe(lambda: builders[view](state.data, frames, sel), view)


def status(state: AppState, controls: tuple[Any, ...], tokens: Any) -> list[Any]:
    from dash import html

    sel = state.selection(*controls)
    lines = status_lines(state.data, state.frames(tokens), sel)
    return [
        html.Div(line, className="status-line predictions-only" if "predictions only" in line else "status-line")
        for line in lines
    ]


def options(state: AppState, tokens: Any) -> tuple[list, list, list, list]:
    """GPU, kernel, shape and baseline options over the shipped data and the session's uploads."""
    opts = control_options(state.data, state.frames(tokens))
    return opts["gpus"], opts["kernels"], opts["shapes"], opts["baselines"]


def hypotheses_table(state: AppState, gpus: Any, tokens: Any) -> tuple[list[dict], list[dict]]:
    verdicts = state.hypotheses(tokens)
    columns = [{"id": c, "name": c} for c in HYPOTHESIS_COLUMNS]
    if verdicts is None or verdicts.empty:
        return [{"claim": "No hypotheses evaluated (none in data/hypotheses, or they could not be read)."}], columns
    wanted = set(gpus or [])
    rows = verdicts[verdicts["gpu_key"].astype(str).isin(wanted | {""})] if wanted else verdicts
    rows = rows[[c for c in HYPOTHESIS_COLUMNS if c in rows.columns]].copy()
    for col in ("value", "low", "high", "threshold"):
        if col in rows.columns:
            rows[col] = pd.to_numeric(rows[col], errors="coerce").round(4)
    records = rows.astype(object).where(rows.notna(), None).to_dict("records")
    return records, [c for c in columns if c["id"] in rows.columns]


def table_page(
    state: AppState,
    controls: tuple[Any, ...],
    tokens: Any,
    page_current: Any,
    page_size: Any,
    sort_by: Any,
    filter_query: Any,
) -> tuple[list[dict], list[dict], int, str]:
    """One page of the data table, its columns, the page count, and a line saying what the rows are."""
    sel = state.selection(*controls)
    try:
        rows = table.table_rows(state.data, state.frames(tokens), sel, filter_query, sort_by)
    except InputError as exc:
        return [], [], 1, f"error: {str(exc).splitlines()[0]}"
    records, count = table.page(rows, page_current, page_size)
    what = (
        "measured points joined with predictions"
        if rows.source == "measured"
        else "predicted points (no measurements for the selected GPUs)"
    )
    note = f"{len(rows.shown)} rows: {what}. The CSV holds exactly these rows (all pages), in SI units."
    if rows.ignored:
        note += " Filter not understood (ignored): " + "; ".join(rows.ignored)
    return records, table.column_specs(rows.columns), count, note


def download_csv(
    state: AppState, controls: tuple[Any, ...], tokens: Any, sort_by: Any, filter_query: Any
) -> dict[str, Any]:
    """The dcc.Download payload: the table's rows (every page, current filter and sort), raw SI columns."""
    sel = state.selection(*controls)
    rows = table.table_rows(state.data, state.frames(tokens), sel, filter_query, sort_by)
    name = f"workbench-{rows.source}-{'-'.join(sel.gpus)}-{sel.shape.replace(':', '-')}.csv"
    return {"content": table.to_csv(rows), "filename": name, "type": "text/csv", "base64": False}


def upload(state: AppState, contents: Any, filename: Any, tokens: Any) -> tuple[list[str] | None, str]:
    """Validate an uploaded measurement file; on success add it to the session (new token list), else say why and
    return None for the tokens (unchanged). Bytes are only decoded and parsed as Parquet/CSV: never unpickled."""
    tokens = [t for t in (tokens or []) if isinstance(t, str)]
    name = str(filename or "upload")
    if not contents or not isinstance(contents, str) or "," not in contents:
        return None, f"{name}: nothing was uploaded."
    try:
        raw = base64.b64decode(contents.split(",", 1)[1], validate=True)
    except (binascii.Error, ValueError):
        return None, f"{name}: the upload could not be decoded."
    if len(raw) > UPLOAD_LIMIT_BYTES:
        return None, f"{name}: {len(raw) / 1e6:.1f} MB is over the {UPLOAD_LIMIT_BYTES / 1e6:.0f} MB upload limit."
    try:
        parsed = parse_upload(state.data, name, raw)
    except InputError as exc:
        return None, f"Upload rejected — {str(exc).splitlines()[0]}"
    token = state.uploads.add(parsed)
    gpus = ", ".join(sorted(set(parsed.comparison["gpu_key"].astype(str))))
    return [*tokens, token], f"Added {name}: {len(parsed.measurements)} measured points ({gpus})."


# ---------------------------------------------------------------------------------------------------- wiring
def register(app: Any, state: AppState) -> None:
    """Attach every callback to `app` (called by the factory; nothing here runs at import)."""
    from dash import Input, Output, State, no_update

    control_inputs = [Input(c, "value") for c in CONTROLS]
    store = Input(ids.UPLOAD_STORE, "data")

    for view, component in ids.FIGURES.items():
        if view == "compare":
            continue

        def make(view: str = view) -> Callable[..., Any]:
            def callback(*values: Any) -> Any:
                return view_figure(state, view, values[:-1], values[-1])

            return callback

        app.callback(Output(component, "figure"), *control_inputs, store)(make())

    @app.callback(Output(ids.GPU_COMPARE, "figure"), *control_inputs, store, Input(ids.COMPARE_VIEW, "value"))
    def _compare(*values: Any) -> Any:
        return view_figure(state, "compare", values[:-2], values[-2], values[-1])

    @app.callback(Output(ids.STATUS, "children"), *control_inputs, store)
    def _status(*values: Any) -> Any:
        return status(state, values[:-1], values[-1])

    @app.callback(
        Output(ids.GPUS, "options"),
        Output(ids.KERNELS, "options"),
        Output(ids.SHAPE, "options"),
        Output(ids.BASELINE, "options"),
        store,
        prevent_initial_call=True,
    )
    def _options(tokens: Any) -> Any:
        return options(state, tokens)

    @app.callback(Output(ids.HYPOTHESES, "data"), Output(ids.HYPOTHESES, "columns"), Input(ids.GPUS, "value"), store)
    def _hypotheses(gpus: Any, tokens: Any) -> Any:
        return hypotheses_table(state, gpus, tokens)

    @app.callback(
        Output(ids.TABLE, "data"),
        Output(ids.TABLE, "columns"),
        Output(ids.TABLE, "page_count"),
        Output(ids.TABLE_COUNT, "children"),
        *control_inputs,
        store,
        Input(ids.TABLE, "page_current"),
        Input(ids.TABLE, "page_size"),
        Input(ids.TABLE, "sort_by"),
        Input(ids.TABLE, "filter_query"),
    )
    def _table(*values: Any) -> Any:
        return table_page(state, values[:8], values[8], *values[9:])

    @app.callback(
        Output(ids.DOWNLOAD, "data"),
        Input(ids.DOWNLOAD_BUTTON, "n_clicks"),
        *[State(c, "value") for c in CONTROLS],
        State(ids.UPLOAD_STORE, "data"),
        State(ids.TABLE, "sort_by"),
        State(ids.TABLE, "filter_query"),
        prevent_initial_call=True,
    )
    def _download(n_clicks: Any, *values: Any) -> Any:
        if not n_clicks:
            return no_update
        return download_csv(state, values[:8], values[8], values[9], values[10])

    @app.callback(
        Output(ids.UPLOAD_STORE, "data"),
        Output(ids.UPLOAD_MESSAGE, "children"),
        Output(ids.UPLOAD_MESSAGE, "className"),
        Input(ids.UPLOAD, "contents"),
        State(ids.UPLOAD, "filename"),
        State(ids.UPLOAD_STORE, "data"),
        prevent_initial_call=True,
    )
    def _upload(contents: Any, filename: Any, tokens: Any) -> Any:
        new_tokens, message = upload(state, contents, filename, tokens)
        if new_tokens is None:
            return no_update, message, "upload-message"
        return new_tokens, message, "upload-message ok"
