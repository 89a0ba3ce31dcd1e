"""Every component id of the dashboard, in one place (layout, callbacks and the browser test import these)."""

from __future__ import annotations

# controls
GPUS = "ctl-gpus"
SCHEMES = "ctl-schemes"
KERNELS = "ctl-kernels"
SHAPE = "ctl-shape"
BATCH = "ctl-batch"
BASELINE = "ctl-baseline"
TIER = "ctl-tier"
MODE = "ctl-mode"
COMPARE_VIEW = "ctl-compare-view"

# status lines
STATUS = "status-banner"
UPLOAD_MESSAGE = "upload-message"

# views
TABS = "view-tabs"
ROOFLINE = "fig-roofline"
TIME = "fig-time"
SPEEDUP = "fig-speedup"
ERROR = "fig-error"
CLOCKS = "fig-clocks"
GPU_COMPARE = "fig-gpu-compare"
ROLLUP = "fig-rollup"
HYPOTHESES = "tbl-hypotheses"
TABLE = "tbl-comparison"
TABLE_COUNT = "tbl-count"

# download / upload
DOWNLOAD_BUTTON = "btn-download"
DOWNLOAD = "dl-csv"
UPLOAD = "upload"
UPLOAD_STORE = "store-upload"

TAB_VALUES = (
    "roofline",
    "time",
    "speedup",
    "error",
    "clocks",
    "compare",
    "rollup",
    "hypotheses",
    "table",
)
FIGURES = {
    "roofline": ROOFLINE,
    "time": TIME,
    "speedup": SPEEDUP,
    "error": ERROR,
    "clocks": CLOCKS,
    "compare": GPU_COMPARE,
    "rollup": ROLLUP,
}


def tab_id(value: str) -> str:
    """The id of the dcc.Tab showing one view."""
    return f"tab-{value}"
