"""The page: controls on top, a status line, download/upload, one tab per view. Ids come from `ids`."""

from __future__ import annotations

from typing import Any

from workbench.dashboard import ids
from workbench.dashboard.data import DashboardData
from workbench.dashboard.queries import Defaults, control_options

UPLOAD_LIMIT_BYTES = 20 * 1024 * 1024
BATCH_MARKS = {i: str(2**i) for i in range(9)}
TIER_OPTIONS = [
    {"label": "datasheet", "value": "datasheet"},
    {"label": "calibrated", "value": "calibrated"},
    {"label": "calibrated + floor", "value": "floor"},
]
MODE_OPTIONS = [{"label": "L2-cold", "value": "cold"}, {"label": "hot", "value": "hot"}]
COMPARE_OPTIONS = [
    {"label": "time vs batch", "value": "time"},
    {"label": "speedup vs batch", "value": "speedup"},
    {"label": "roofline", "value": "roofline"},
]
TAB_LABELS = {
    "roofline": "Roofline",
    "time": "Time vs batch",
    "speedup": "Speedup vs batch",
    "error": "Model error",
    "clocks": "Clocks",
    "compare": "GPU comparison",
    "rollup": "Whole model",
    "hypotheses": "Hypotheses",
    "table": "Data table",
}


def _control(label: str, component: Any, width: str = "220px") -> Any:
    from dash import html

    return html.Div(
        [html.Label(label, className="ctl-label"), component],
        className="ctl",
        style={"minWidth": width, "flex": f"1 1 {width}"},
    )


def _controls(data: DashboardData, defaults: Defaults) -> Any:
    from dash import dcc, html

    opts = control_options(data)
    return html.Div(
        [
            _control(
                "GPU(s)",
                dcc.Dropdown(id=ids.GPUS, options=opts["gpus"], value=list(defaults.gpus), multi=True, clearable=False),
                "260px",
            ),
            _control(
                "Scheme(s)",
                dcc.Dropdown(id=ids.SCHEMES, options=opts["schemes"], value=list(defaults.schemes), multi=True),
                "300px",
            ),
            _control(
                "Kernel(s) (empty = all)",
                dcc.Dropdown(id=ids.KERNELS, options=opts["kernels"], value=[], multi=True, placeholder="all kernels"),
                "260px",
            ),
            _control(
                "Shape N×K or model",
                dcc.Dropdown(id=ids.SHAPE, options=opts["shapes"], value=defaults.shape, clearable=False),
                "220px",
            ),
            _control(
                "Baseline",
                dcc.Dropdown(id=ids.BASELINE, options=opts["baselines"], value=defaults.baseline, clearable=False),
                "200px",
            ),
            _control(
                "Batch M range",
                dcc.RangeSlider(id=ids.BATCH, min=0, max=8, step=1, value=[0, 8], marks=BATCH_MARKS, allowCross=False),
                "280px",
            ),
            _control(
                "Prediction tier",
                dcc.RadioItems(id=ids.TIER, options=TIER_OPTIONS, value=defaults.tier, inline=True),
                "260px",
            ),
            _control(
                "Cache", dcc.RadioItems(id=ids.MODE, options=MODE_OPTIONS, value=defaults.mode, inline=True), "160px"
            ),
        ],
        className="controls",
    )


def _graph(component_id: str, height: str = "600px") -> Any:
    from dash import dcc

    return dcc.Graph(
        id=component_id, style={"height": height}, config={"displaylogo": False}, figure={"data": [], "layout": {}}
    )


def _tab(value: str, children: list[Any]) -> Any:
    from dash import dcc

    return dcc.Tab(label=TAB_LABELS[value], value=value, id=ids.tab_id(value), children=children)


def _table(component_id: str, page_size: int = 20, custom: bool = True) -> Any:
    from dash import dash_table

    action = "custom" if custom else "native"
    return dash_table.DataTable(
        id=component_id,
        columns=[],
        data=[],
        page_current=0,
        page_size=page_size,
        page_action=action,
        sort_action=action,
        sort_mode="multi",
        filter_action=action,
        style_table={"overflowX": "auto"},
        style_cell={
            "fontFamily": "system-ui, sans-serif",
            "fontSize": "13px",
            "padding": "4px 8px",
            "whiteSpace": "normal",
            "height": "auto",
            "maxWidth": "420px",
        },
        style_header={"fontWeight": "600", "backgroundColor": "#f3f4f6"},
        style_data_conditional=[
            {"if": {"filter_query": '{verdict} = "pass"', "column_id": "verdict"}, "backgroundColor": "#dcfce7"},
            {"if": {"filter_query": '{verdict} = "fail"', "column_id": "verdict"}, "backgroundColor": "#fee2e2"},
            {
                "if": {"filter_query": '{verdict} = "inconclusive"', "column_id": "verdict"},
                "backgroundColor": "#fef9c3",
            },
        ],
    )


def _views() -> Any:
    from dash import dcc, html

    return dcc.Tabs(
        id=ids.TABS,
        value="roofline",
        children=[
            _tab("roofline", [_graph(ids.ROOFLINE, "640px")]),
            _tab("time", [_graph(ids.TIME)]),
            _tab("speedup", [_graph(ids.SPEEDUP)]),
            _tab("error", [_graph(ids.ERROR, "auto")]),
            _tab("clocks", [_graph(ids.CLOCKS, "660px")]),
            _tab(
                "compare",
                [
                    dcc.RadioItems(
                        id=ids.COMPARE_VIEW,
                        options=COMPARE_OPTIONS,
                        value="time",
                        inline=True,
                        className="compare-view",
                    ),
                    _graph(ids.GPU_COMPARE, "560px"),
                ],
            ),
            _tab("rollup", [_graph(ids.ROLLUP, "560px")]),
            _tab("hypotheses", [_table(ids.HYPOTHESES, page_size=50, custom=False)]),
            _tab("table", [html.Div(id=ids.TABLE_COUNT, className="table-count"), _table(ids.TABLE)]),
        ],
    )


def _io_bar() -> Any:
    from dash import dcc, html

    return html.Div(
        [
            html.Button("Download CSV of the table rows", id=ids.DOWNLOAD_BUTTON, n_clicks=0, className="btn"),
            dcc.Download(id=ids.DOWNLOAD),
            dcc.Upload(
                id=ids.UPLOAD,
                children=html.Div(["Upload measurements (.parquet / .csv, ≤ 20 MB): drop or ", html.A("choose")]),
                accept=".parquet,.csv",
                max_size=-1,  # checked on the server, which can say why (the browser would drop it silently)
                multiple=False,
                className="upload",
            ),
            html.Div(id=ids.UPLOAD_MESSAGE, className="upload-message", role="status"),
            dcc.Store(id=ids.UPLOAD_STORE, storage_type="memory", data=[]),
        ],
        className="io-bar",
    )


def build_layout(data: DashboardData, defaults: Defaults) -> Any:
    """The whole page for one dataset (called once by the factory; callbacks fill the figures)."""
    from dash import html

    return html.Div(
        [
            html.Header(
                [
                    html.H1("Roofline workbench — LLM-decode linear layers"),
                    html.Div(f"data: {data.data_dir}", className="subtitle"),
                ]
            ),
            _controls(data, defaults),
            html.Div(id=ids.STATUS, className="status", role="status"),
            _io_bar(),
            _views(),
        ],
        className="page",
    )
