"""The page: controls on top, a status line, download/upload, one tab per view. Ids come from `ids`.

Batch range: a log2 slider (marks 1…256) beside two number boxes in batch sizes; a clientside callback keeps them in
step (callbacks.BATCH_SYNC_JS), and the views read the boxes. The URL (dcc.Location) carries every control.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from workbench.interfaces.dashboard import ids
from workbench.interfaces.dashboard.data import DashboardData
from workbench.interfaces.dashboard.queries import BATCH_SIZES, MAX_BATCH, Defaults, control_options, tier_options
from workbench.interfaces.dashboard.style import GRAPH_CONFIG
from workbench.interfaces.dashboard.uploads import UPLOAD_LIMIT_BYTES, UPLOAD_LIMIT_MB

__all__ = ["UPLOAD_LIMIT_BYTES", "build_layout", "TAB_LABELS"]

BATCH_MARKS = {i: str(2**i) for i in range(len(BATCH_SIZES))}
MODE_OPTIONS = [{"label": "L2-cold", "value": "cold"}, {"label": "hot", "value": "hot"}]
KERNEL_VIEW_OPTIONS = [
    {"label": "best kernel per scheme", "value": "best"},
    {"label": "every kernel", "value": "all"},
]
COMPARE_LABELS = {"time": "time vs batch", "speedup": "speedup vs batch", "roofline": "roofline",
                  "public": "predicted vs public timings"}  # fmt: skip
COMPARE_OPTIONS = [{"label": COMPARE_LABELS[v], "value": v} for v in ids.COMPARE_VIEWS]
TAB_LABELS = {
    "roofline": "Roofline",
    "time": "Time vs batch",
    "speedup": "Speedup vs batch",
    "error": "Model error",
    "attribution": "Attribution",
    "recommend": "Scheme per batch",
    "quant": "Quantization error",
    "ladder": "Tricks ladder",
    "clocks": "Clocks",
    "compare": "GPU comparison",
    "rollup": "Whole model",
    "moe": "MoE experts",
    "hypotheses": "Hypotheses",
    "table": "Data table",
}
GRAPH_HEIGHTS = {"roofline": "640px", "error": "auto", "attribution": "auto", "recommend": "560px", "quant": "600px",
                 "ladder": "680px", "clocks": "660px",
                 "compare": "560px", "rollup": "auto", "moe": "740px"}  # fmt: skip


def _control(label: str, component: Any, width: str = "220px") -> Any:
    from dash import html

    return html.Div(
        [html.Label(label, className="ctl-label"), component],
        className="ctl",
        style={"minWidth": width, "flex": f"1 1 {width}"},
    )


def _log2(m: int, top: int, up: bool = False) -> int:
    exp = math.log2(max(1, m))
    return min(top, max(0, math.ceil(exp) if up else math.floor(exp)))


def _batch_control(lo: int, hi: int) -> Any:
    from dash import dcc, html

    top = len(BATCH_SIZES) - 1

    def box(cid: str, value: int, label: str) -> Any:
        return dcc.Input(id=cid, type="number", min=1, max=MAX_BATCH, step=1, value=value, debounce=True,
                         className="batch-box", name=label, placeholder=label)  # fmt: skip

    return html.Div(
        [
            box(ids.BATCH_LO, lo, "smallest batch M"),
            html.Div(
                dcc.RangeSlider(id=ids.BATCH, min=0, max=top, step=1, value=[_log2(lo, top), _log2(hi, top, True)],
                                marks=BATCH_MARKS, allowCross=False, allow_direct_input=False),  # fmt: skip
                className="batch-slider",
            ),
            box(ids.BATCH_HI, hi, "largest batch M"),
        ],
        className="batch-control",
    )


def control_values(data: DashboardData, defaults: Defaults, init: dict[str, Any]) -> dict[str, Any]:
    """Control id -> the value the page opens with: from `init` (the URL) or the defaults."""
    gpus = init.get("gpus") or list(defaults.gpus)
    lo, hi = sorted((init.get("m_lo", 1), init.get("m_hi", BATCH_SIZES[-1])))
    return {
        ids.GPUS: gpus,
        ids.PRIMARY: init.get("primary") if init.get("primary") in gpus else gpus[0] if gpus else None,
        ids.SCHEMES: init.get("schemes", list(defaults.schemes)),
        ids.KERNELS: init.get("kernels", []),
        ids.KERNEL_VIEW: init.get("kernel_view", "best"),
        ids.SHAPE: init.get("shape", defaults.shape),
        ids.BATCH_LO: lo,
        ids.BATCH_HI: hi,
        ids.BASELINE: init.get("baseline", defaults.baseline),
        ids.TIER: init.get("tier", defaults.tier),
        ids.MODE: init.get("mode", defaults.mode),
    }


def _controls(data: DashboardData, values: dict[str, Any]) -> Any:
    from dash import dcc, html

    opts = control_options(data)
    gpus = values[ids.GPUS]
    primary = [o for o in opts["gpus"] if o["value"] in gpus]
    first, lo, hi = values[ids.PRIMARY], values[ids.BATCH_LO], values[ids.BATCH_HI]
    return html.Div(
        [
            _control(
                "GPU(s)",
                dcc.Dropdown(id=ids.GPUS, options=opts["gpus"], value=gpus, multi=True, clearable=False),
                "260px",
            ),
            _control(
                "Primary GPU (single-GPU views)",
                dcc.Dropdown(id=ids.PRIMARY, options=primary, value=first, clearable=False),
                "220px",
            ),
            _control(
                "Scheme(s)",
                dcc.Dropdown(id=ids.SCHEMES, options=opts["schemes"], value=values[ids.SCHEMES],
                             multi=True),  # fmt: skip
                "300px",
            ),
            _control(
                "Measured points",
                dcc.RadioItems(id=ids.KERNEL_VIEW, options=KERNEL_VIEW_OPTIONS, value=values[ids.KERNEL_VIEW],
                               inline=True),  # fmt: skip
                "300px",
            ),
            _control(
                "Kernel(s) (empty = all)",
                dcc.Dropdown(id=ids.KERNELS, options=opts["kernels"], value=values[ids.KERNELS], multi=True,
                             placeholder="all kernels"),  # fmt: skip
                "260px",
            ),
            _control(
                "Shape N×K or model",
                dcc.Dropdown(id=ids.SHAPE, options=opts["shapes"], value=values[ids.SHAPE],
                             clearable=False),  # fmt: skip
                "220px",
            ),
            _control(
                "Baseline",
                dcc.Dropdown(id=ids.BASELINE, options=opts["baselines"], value=values[ids.BASELINE],
                             clearable=False),  # fmt: skip
                "200px",
            ),
            _control("Batch M range (type a batch size or drag)", _batch_control(lo, hi), "380px"),
            _control(
                "Prediction tier",
                dcc.RadioItems(id=ids.TIER, options=tier_options(data), value=values[ids.TIER],
                               inline=True),  # fmt: skip
                "300px",
            ),
            _control(
                "Cache",
                dcc.RadioItems(id=ids.MODE, options=MODE_OPTIONS, value=values[ids.MODE], inline=True),
                "160px",
            ),
        ],
        className="controls",
    )


def view_graph(view: str, figure: Any) -> list[Any]:
    """What a figure view's slot holds once visited: its dcc.Graph (ids.graph_id), drawn with `figure`."""
    from dash import dcc

    height = GRAPH_HEIGHTS.get(view, "600px")
    return [dcc.Graph(
        id=ids.graph_id(view),
        style={"height": height},
        config={**GRAPH_CONFIG, "toImageButtonOptions": {**GRAPH_CONFIG["toImageButtonOptions"], "filename": view}},
        figure=figure,
    )]  # fmt: skip


GRID_PAGES = {"hypotheses": 50, "table": 25}


def view_grid(view: str, rows: list[dict], columns: list[dict], note: Any = None) -> list[Any]:
    """What a grid view's slot holds once visited: the line saying what the rows are (the table) and its AG Grid."""
    from dash import html

    grid = _grid(ids.grid_id(view), "720px", GRID_PAGES[view], rows, columns)
    if view != "table":
        return [grid]
    return [html.Div(html.Div(note, id=ids.grid_note_id(view)), id=ids.TABLE_COUNT, className="table-count"), grid]


def _grid(component_id: Any, height: str, page_size: int, rows: list[dict], columns: list[dict]) -> Any:
    import dash_ag_grid as dag

    return dag.AgGrid(
        id=component_id,
        columnDefs=columns,
        rowData=rows,
        defaultColDef={"sortable": True, "filter": True, "resizable": True, "floatingFilter": True,
                       "wrapHeaderText": True, "autoHeaderHeight": True, "width": 118, "minWidth": 70},  # fmt: skip
        dashGridOptions={"pagination": True, "paginationPageSize": page_size, "enableCellTextSelection": True,
                         "ensureDomOrder": True, "paginationPageSizeSelector": False},  # fmt: skip
        style={"height": height, "width": "100%"},
        className="ag-theme-alpine",
    )


def _moe_controls(moe: Any) -> Any:
    """The MoE view's own controls: model, layer(s), routing (views_moe)."""
    from dash import dcc, html

    from workbench.interfaces.dashboard import views_moe
    from workbench.interfaces.dashboard.views_moe import LAYER_LABELS, ROUTINGS

    models = [{"label": m, "value": m} for m in views_moe.moe_models()]
    return html.Div([
        _control("MoE model", dcc.Dropdown(id=ids.MOE_MODEL, options=models, value=moe.model, clearable=False),
                 "220px"),
        _control("Expert layer(s)", dcc.RadioItems(id=ids.MOE_LAYER, value=moe.layer, inline=True,
                                                   options=[{"label": v, "value": k} for k, v in LAYER_LABELS.items()]),
                 "300px"),
        _control("Routing", dcc.RadioItems(id=ids.MOE_ROUTING, value=moe.routing, inline=True,
                                           options=[{"label": r, "value": r} for r in ROUTINGS]), "300px"),
    ], className="controls moe-controls")  # fmt: skip


def pane_class(value: str, view: str) -> str:
    return "pane open" if value == view else "pane"


def _views(view: str, compare: str, filled: dict[tuple[str, str], Any], moe: Any) -> list[Any]:
    """The tab headers, then one pane per view: its own controls (comparison view, MoE) and its slot, which holds
    the view's graph or grid from its first visit on (the open view's comes filled: `filled`); a pane is hidden by
    its class, never unmounted, so a revisited tab shows what it drew without drawing it again."""
    from dash import dcc, html

    panes = []
    for value in ids.TAB_VALUES:
        slot = html.Div(filled.get((ids.SLOTS[value], "children")), id=ids.SLOTS[value], className="slot")
        if value == "compare":
            radio = dcc.RadioItems(id=ids.COMPARE_VIEW, options=COMPARE_OPTIONS, value=compare, inline=True,
                                   className="compare-view")  # fmt: skip
            children = [radio, slot]
        elif value == "moe":
            children = [_moe_controls(moe), slot]
        else:
            children = [slot]
        panes.append(html.Div(children, id=ids.pane_id(value), className=pane_class(value, view)))
    tabs = [dcc.Tab(label=TAB_LABELS[v], value=v, id=ids.tab_id(v)) for v in ids.TAB_VALUES]
    # the stores start empty (""), not None: dcc.Store mounts None as a change of its data (undefined -> null),
    # which would fire the main callback before the first figure is drawn
    return [dcc.Tabs(id=ids.TABS, value=view, children=tabs), dcc.Store(id=ids.OPEN_VIEW, data=view),
            dcc.Store(id=ids.PREFETCH, data=""), dcc.Store(id=ids.PREFETCHED_VIEW, data=""),
            html.Div(panes, id=ids.PANES)]


def _io_bar(filled: dict[tuple[str, str], Any]) -> Any:
    from dash import dcc, html

    return html.Div(
        [
            html.Button("Download CSV of the table rows", id=ids.DOWNLOAD_BUTTON, n_clicks=0, className="btn"),
            dcc.Download(id=ids.DOWNLOAD),
            dcc.Upload(
                id=ids.UPLOAD,
                children=html.Div(
                    [f"Upload measurements (.parquet / .csv, ≤ {UPLOAD_LIMIT_MB} MB): drop or ", html.A("choose")]
                ),
                max_size=-1,  # checked on the server, which can say why (the browser would drop it silently)
                multiple=False,
                className="upload",
            ),
            html.Div(id=ids.UPLOAD_MESSAGE, className="upload-message", role="status"),
            dcc.Store(id=ids.UPLOAD_STORE, storage_type="memory", data=[]),
            dcc.Store(id=ids.FIGURE_KEYS, storage_type="memory", data=filled.get((ids.FIGURE_KEYS, "data"), {})),
            html.Span("Export the figure shown:", className="export-label"),
            html.Button("SVG", id=ids.EXPORT_SVG, n_clicks=0, className="btn btn-light"),
            html.Button("PNG", id=ids.EXPORT_PNG, n_clicks=0, className="btn btn-light"),
            html.Span(id=ids.EXPORT_SINK, className="export-sink"),
        ],
        className="io-bar",
    )


def build_layout(data: DashboardData, defaults: Defaults, init: dict[str, Any] | None = None,
                 fill: Callable[[dict[str, Any], str, str, Any], dict[tuple[str, str], Any]] | None = None) -> Any:
    """The whole page for one dataset, its controls set from `init` (urlstate.decode of the page's query string,
    so a reload or a shared link restores the view) or the defaults. `fill(control values, view, compare view)`
    gives (id, prop) -> value of what the open view shows (its figure or grid, the status line), so the page draws
    with its first layout; callbacks fill the rest on a change."""
    from dash import dcc, html

    init = init or {}
    values = control_values(data, defaults, init)
    from workbench.interfaces.dashboard.views_moe import options as moe_options

    view, compare = init.get("view", "roofline"), init.get("compare", "time")
    moe = moe_options(init.get("moe_model"), init.get("moe_layer"), init.get("moe_routing"))
    filled = fill(values, view, compare, moe) if fill else {}
    return html.Div(
        [
            dcc.Location(id=ids.URL, refresh=False),
            html.Header(
                [
                    html.H1("Roofline workbench — LLM-decode linear layers"),
                    html.Div(f"data: {data.data_dir.name}/ ({len(data.comparison)} measured rows)",
                             className="subtitle"),  # fmt: skip
                ]
            ),
            _controls(data, values),
            html.Div(filled.get((ids.STATUS, "children")), id=ids.STATUS, className="status", role="status"),
            _io_bar(filled),
            *_views(view, compare, filled, moe),
        ],
        className="page",
    )
