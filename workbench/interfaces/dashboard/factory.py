"""`create_app(data_dir)`: the Dash app for one data directory (no module-level app anywhere)."""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any

from workbench.interfaces.dashboard.callbacks import CONTROLS, AppState, page_outputs
from workbench.interfaces.dashboard.data import load_data
from workbench.interfaces.dashboard.layout import build_layout
from workbench.interfaces.dashboard.queries import default_selection
from workbench.interfaces.dashboard.uploads import UPLOAD_LIMIT_BYTES, UPLOAD_LIMIT_MB

ASSETS = Path(str(importlib.resources.files(__package__) / "assets"))  # package data (pyproject.toml), on disk
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050
# Uploads arrive base64-encoded (4/3) inside the callback JSON: requests up to 2x the file limit are read and answered
# with a message from the upload callback; larger ones are refused by Flask, and guard.install turns that into the
# same kind of message.
REQUEST_LIMIT_BYTES = 2 * UPLOAD_LIMIT_BYTES
# dcc.Graph uses window.Plotly when a page defines it: assets/plotly-cartesian.min.js (plotly.js's own cartesian
# bundle, the same version as plotly.py's full one; MIT) is 1.5 MB instead of 4.8 MB and holds every trace type the
# figures use (scatter, bar, heatmap), which cuts the first load by the time the browser spends running the rest.
# It is not one of the page's blocking scripts (assets_ignore): the page preloads it and runs it once the renderer has
# asked for the layout, so the ~0.3 s plotly.js takes to run overlaps the server building the first layout; until
# then window.Plotly is a promise, which dcc.Graph's loader waits on (Promise.resolve of a thenable) before drawing.
PLOTLY_ASSET = "plotly-cartesian.min.js"
PLOTLY_LOADER = """<script>
(function () {
    var done, started = false, fetch0 = window.fetch;
    window.Plotly = new Promise(function (ok) { done = ok; });
    function load() {
        if (started) { return; }
        started = true;
        var s = document.createElement("script");
        s.src = "SRC"; s.onload = function () { done(); };
        document.head.appendChild(s);
    }
    window.fetch = function (input) {
        var out = fetch0.apply(this, arguments);
        if (String((input && input.url) || input).indexOf("_dash-layout") >= 0) { setTimeout(load, 0); }
        return out;
    };
    setTimeout(load, 1500);  // in case the layout is asked for some other way
})();
</script>"""
PRELOAD = ("dash/dcc/async-graph.js", "dash/dcc/async-dropdown.js", "dash/dcc/async-slider.js",
           "dash/dcc/async-upload.js")
INDEX = """<!DOCTYPE html>
<html>
    <head>
        {%metas%}
        <title>{%title%}</title>
        <link rel="icon" href="data:,">
        {%css%}
        PRELOADS
        <link rel="preload" as="script" href="PLOTLY">
    </head>
    <body>
        {%app_entry%}
        <footer>
            {%config%}
            {%scripts%}
            {%renderer%}
            LOADER
        </footer>
    </body>
</html>"""
TOO_LARGE = f"The upload is over the {UPLOAD_LIMIT_MB} MB limit: upload a .parquet or .csv of at most that size."


def page_query() -> str:
    """The query string of the page being built: the layout request's own, or the page's (its Referer)."""
    from urllib.parse import urlsplit

    from flask import has_request_context, request

    if not has_request_context():
        return ""
    if request.query_string:
        return "?" + request.query_string.decode("latin-1")
    referrer = request.referrer or ""
    return "?" + urlsplit(referrer).query if "?" in referrer else ""


def create_app(data_dir: str | Path | None = None) -> Any:
    """Load the data once (cached per directory), build the layout and register the callbacks."""
    from dash import Dash

    from workbench.interfaces.dashboard import guard, urlstate
    from workbench.interfaces.dashboard.wiring import wire

    data = load_data(data_dir)
    app = Dash(
        __name__,
        title="Roofline workbench",
        assets_folder=str(ASSETS),
        assets_ignore=PLOTLY_ASSET.replace(".", r"\."),  # served, not a blocking script: PLOTLY_LOADER runs it
        update_title=None,
        suppress_callback_exceptions=False,
    )
    defaults = default_selection(data)

    state = AppState(data)

    def fill(values: dict[str, Any], view: str, compare: str, moe: Any) -> dict[tuple[str, str], Any]:
        return page_outputs(state, view, tuple(values[c] for c in CONTROLS), [], compare,
                            moe=(moe.model, moe.layer, moe.routing))

    def layout() -> Any:
        return build_layout(data, defaults, urlstate.decode(page_query(), data), fill)

    # Dash embeds the validation layout in every page's config; without this it would be the first layout, figure
    # and all (built once more at start): the bare page (no figure, no grid) validates the same callbacks
    app.validation_layout = build_layout(data, defaults)
    app.layout = layout
    prefix = app.config.requests_pathname_prefix + "_dash-component-suites/"
    links = "\n        ".join(f'<link rel="preload" as="script" href="{prefix}{path}">' for path in PRELOAD)
    plotly = app.get_asset_url(PLOTLY_ASSET)
    app.index_string = INDEX.replace("PRELOADS", links).replace("PLOTLY", plotly).replace(
        "LOADER", PLOTLY_LOADER.replace("SRC", plotly))
    grid_bundle = lazy_grid_bundle(app, data)
    wire(app, state, guard, grid_bundle)  # every callback: wiring imports callbacks, never the other way
    warm_up(state, defaults)
    app.server.config["MAX_CONTENT_LENGTH"] = REQUEST_LIMIT_BYTES
    guard.install(app.server, TOO_LARGE)
    return app


def lazy_grid_bundle(app: Any, data: Any) -> tuple[str, str]:
    """Keep AG Grid's 1.3 MB bundle off the page (its `_js_dist` entry marked dynamic: still served, not loaded) and
    say where it is: the page loads it on a grid view's first visit (wiring.PANES_JS), or up front when the URL
    opens on a grid view (the first layout then holds the grid). Returns (its namespace, its URL)."""
    import dash_ag_grid

    from workbench.interfaces.dashboard import ids, urlstate

    name = "dash_ag_grid.min.js"
    for resource in dash_ag_grid._js_dist:  # one list, shared by the package's components
        if resource.get("relative_package_path") == name:
            resource["dynamic"] = True
    url = f"{app.config.requests_pathname_prefix}_dash-component-suites/dash_ag_grid/{name}"
    interpolate = app.interpolate_index

    def index(**parts: Any) -> str:
        if urlstate.decode(page_query(), data).get("view") in ids.GRIDS:
            parts["scripts"] = parts.get("scripts", "") + f'\n<script src="{url}"></script>'
        return interpolate(**parts)

    app.interpolate_index = index
    return "dash_ag_grid", url


def warm_up(state: AppState, defaults: Any) -> None:
    """Build every view once for the default selection, so the first page load does not pay for Plotly's lazy
    imports and validators (and the default roofline is served from the figure cache)."""
    from workbench.interfaces.dashboard import ids
    from workbench.interfaces.dashboard.callbacks import view_figure

    controls = (list(defaults.gpus), defaults.gpus[0] if defaults.gpus else None, list(defaults.schemes), [], "best",
                defaults.shape, 1, 256, defaults.baseline, defaults.tier, defaults.mode)  # fmt: skip
    for view in (v for v in ids.FIGURES if v not in ids.LAZY):
        view_figure(state, view, controls, []).to_plotly_json()


def serve(
    host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, data_dir: str | Path | None = None, debug: bool = False
) -> None:
    """Build the app and serve it (blocking)."""
    app = create_app(data_dir)
    print(f"workbench dashboard on http://{host}:{port}/ (data: {load_data(data_dir).data_dir})", flush=True)
    app.run(host=host, port=port, debug=debug)
