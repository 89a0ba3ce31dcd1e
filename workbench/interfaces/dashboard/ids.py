"""Every component id of the dashboard, in one place (layout, callbacks and the browser test import these)."""

from __future__ import annotations

# controls (each one is a query-string key too: see urlstate)
GPUS = "ctl-gpus"
PRIMARY = "ctl-primary"
SCHEMES = "ctl-schemes"
KERNELS = "ctl-kernels"
KERNEL_VIEW = "ctl-kernel-view"
SHAPE = "ctl-shape"
BATCH = "ctl-batch"  # the log2 slider (UI only; BATCH_LO / BATCH_HI hold the batch sizes the views read)
BATCH_LO = "ctl-batch-lo"
BATCH_HI = "ctl-batch-hi"
BASELINE = "ctl-baseline"
TIER = "ctl-tier"
MODE = "ctl-mode"
COMPARE_VIEW = "ctl-compare-view"
COMPARE_VIEWS = ("time", "speedup", "roofline", "public")  # the values of COMPARE_VIEW
MOE_MODEL = "ctl-moe-model"  # the MoE view's own controls (views_moe)
MOE_LAYER = "ctl-moe-layer"
MOE_ROUTING = "ctl-moe-routing"
URL = "url"

# status lines
STATUS = "status-banner"
UPLOAD_MESSAGE = "upload-message"

# views: the tab headers (dcc.Tabs, no children) over one pane per view, each pane kept once drawn (shown or hidden by
# its class); a pane's slot (the ids below, a Div) is filled on the view's first visit with its dcc.Graph or grid,
# whose ids are pattern-matching dicts so the one callback can update whichever are mounted (ALL)
TABS = "view-tabs"
OPEN_VIEW = "store-open-view"  # the view the callbacks draw: set from TABS once what the view needs is loaded
PANES = "view-panes"
GRAPH = "view-graph"  # {"type": GRAPH, "view": v}: the dcc.Graph of view v
GRID = "view-grid"  # {"type": GRID, "view": v}: the AG Grid of view v
GRID_NOTE = "view-grid-note"  # {"type": GRID_NOTE, "view": v}: the line above a grid
ROOFLINE = "fig-roofline"
TIME = "fig-time"
SPEEDUP = "fig-speedup"
ERROR = "fig-error"
ATTRIBUTION = "fig-attribution"
RECOMMEND = "fig-recommend"
QUANT = "fig-quant"
LADDER = "fig-ladder"
CLOCKS = "fig-clocks"
GPU_COMPARE = "fig-gpu-compare"
ROLLUP = "fig-rollup"
MOE = "fig-moe"
HYPOTHESES = "tbl-hypotheses"
TABLE = "tbl-comparison"
TABLE_COUNT = "tbl-count"
EXPORT_SVG = "btn-export-svg"
EXPORT_PNG = "btn-export-png"
EXPORT_SINK = "export-sink"

# download / upload
DOWNLOAD_BUTTON = "btn-download"
DOWNLOAD = "dl-csv"
UPLOAD = "upload"
UPLOAD_STORE = "store-upload"
FIGURE_KEYS = "store-figure-keys"  # view -> token of the figure the page holds (callbacks.figure_token)

TAB_VALUES = (
    "roofline",
    "time",
    "speedup",
    "error",
    "attribution",
    "recommend",
    "quant",
    "ladder",
    "clocks",
    "compare",
    "rollup",
    "moe",
    "hypotheses",
    "table",
)
FIGURES = {
    "roofline": ROOFLINE,
    "time": TIME,
    "speedup": SPEEDUP,
    "error": ERROR,
    "attribution": ATTRIBUTION,
    "recommend": RECOMMEND,
    "quant": QUANT,
    "ladder": LADDER,
    "clocks": CLOCKS,
    "compare": GPU_COMPARE,
    "rollup": ROLLUP,
    "moe": MOE,
}
LAZY = ("moe",)  # views not built before their tab is first opened (factory.warm_up leaves them out)
GRIDS = {"hypotheses": HYPOTHESES, "table": TABLE}
PREFETCH = "store-prefetch"  # the hidden view the page asks to be drawn ahead of its first visit (wiring.PREFETCH_JS)
PREFETCHED_VIEW = "store-prefetched"  # the output PREFETCH_JS needs (never written: it asks through set_props)
PREFETCHED = tuple(v for v in FIGURES if v not in LAZY)  # every figure view but the lazy ones; grids: on their visit
SLOTS = {**FIGURES, **GRIDS}  # view -> the id of the Div its graph or grid is mounted in


def tab_id(value: str) -> str:
    """The id of the dcc.Tab showing one view."""
    return f"tab-{value}"


def pane_id(value: str) -> str:
    """The id of the Div holding one view (its own controls and its slot)."""
    return f"pane-{value}"


def graph_id(view: str) -> dict[str, str]:
    return {"type": GRAPH, "view": view}


def grid_id(view: str) -> dict[str, str]:
    return {"type": GRID, "view": view}


def grid_note_id(view: str) -> dict[str, str]:
    return {"type": GRID_NOTE, "view": view}
