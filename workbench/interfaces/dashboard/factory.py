"""`create_app(data_dir)`: the Dash app for one data directory (no module-level app anywhere), and the page shell
around it: which scripts the first view loads, and how its first layout arrives.

What a fresh page does before its first figure is almost all main-thread work in the browser (running scripts,
rendering the layout, drawing the figure), so the shell keeps off the page every script the first view does not run,
and has the server work (the first layout) overlap the browser's:

- Scripts: Dash's Babel polyfill (100 kB, core-js; a current browser has every built-in it provides) and dash_table's
  bundle (no DataTable on this page) are dropped from the page. What the polyfill gave Dash's bundles that a browser
  does not have is `regeneratorRuntime` (their lazy-component loaders are compiled to it): assets/regenerator-runtime.js
  (regenerator-runtime 0.14.1, MIT, license kept in its header), carried in the page's HTML, defines it. AG Grid's
  bundle loads on a grid view's first visit (`lazy_grid_bundle`). plotly.js (assets/plotly-workbench.min.js) is
  preloaded and run once the renderer has asked for the layout (PLOTLY_LOADER).
- The first layout and the callback graph (`_dash-layout`, `_dash-dependencies`) are asked for by a script in the
  page's head (EARLY_FETCH) while the browser is still running Dash's scripts, and handed to the renderer when it
  asks; the server keeps each layout it built per query string (`cache_layouts`: the data does not change while the
  server runs, and a first layout holds no session state), so a reload or another page with the same URL is served
  at once.
"""

from __future__ import annotations

import importlib.resources
import re
from collections import OrderedDict
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
TOO_LARGE = f"The upload is over the {UPLOAD_LIMIT_MB} MB limit: upload a .parquet or .csv of at most that size."

PLOTLY_ASSET = "plotly-workbench.min.js"
REGENERATOR_ASSET = "regenerator-runtime.js"
STYLE_ASSET = "style.css"
# served from assets/, but not linked from the page: PLOTLY_LOADER runs plotly.js; the page carries the other two in
# its HTML (8 kB and 2 kB: a linked stylesheet or script would hold the page's scripts back for a round trip to the
# server, which revalidates each asset, while the server is busy with the page's first layout)
ASSETS_IGNORE = "|".join(re.escape(name) for name in (PLOTLY_ASSET, REGENERATOR_ASSET, STYLE_ASSET))
DROPPED_SCRIPTS = re.compile(r'\s*<script src="[^"]*/(?:deps/polyfill@[^"]*|dash_table/bundle[^"]*)"></script>')
LAYOUT_CACHE = 32  # first layouts kept, and at most this many bytes of them (a grid view's holds its rows):
LAYOUT_CACHE_BYTES = 32_000_000
# dcc.Graph uses window.Plotly when a page defines it: assets/plotly-workbench.min.js (plotly.js, the version
# plotly.py bundles, built by scripts/build_plotly.sh with the trace types the figures use: scatter, bar, heatmap; MIT)
# is 1.26 MB instead of 4.8 MB, and runs in half the time plotly.js's cartesian bundle takes (no world-calendars).
# Until it has run, window.Plotly is a promise, which dcc.Graph's loader waits on (Promise.resolve of a thenable).
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
# The renderer's first two requests, sent from the head: each answer is handed over once, to the renderer's own GET
# of the same URL (a later GET, e.g. after a server restart, goes to the server as usual).
EARLY_FETCH = """<script>
(function () {
    var early = {}, fetch0 = window.fetch;
    ["_dash-layout", "_dash-dependencies"].forEach(function (name) {
        early["PREFIX" + name] = fetch0("PREFIX" + name, {credentials: "same-origin",
            headers: {"Accept": "application/json", "Content-Type": "application/json"}});
    });
    window.fetch = function (input, init) {
        var url = typeof input === "string" ? input : "";
        if (url in early && !(init && init.method && init.method !== "GET")) {
            var out = early[url];
            delete early[url];
            return out;
        }
        return fetch0.apply(this, arguments);
    };
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
        EARLY
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


def index_string(app: Any) -> str:
    """The page's HTML template: the early requests and preloads in its head, plotly.js's loader after the renderer."""
    prefix = app.config.requests_pathname_prefix
    suites = prefix + "_dash-component-suites/"
    links = "\n        ".join(f'<link rel="preload" as="script" href="{suites}{path}">' for path in PRELOAD)
    plotly = app.get_asset_url(PLOTLY_ASSET)
    return (INDEX.replace("EARLY", EARLY_FETCH.replace("PREFIX", prefix)).replace("PRELOADS", links)
            .replace("PLOTLY", plotly).replace("LOADER", PLOTLY_LOADER.replace("SRC", plotly)))  # fmt: skip


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
        assets_ignore=ASSETS_IGNORE,  # served, not blocking scripts of every page: install loads them
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
    grid_bundle = install(app, data, page_query)
    wire(app, state, guard, grid_bundle)  # every callback: wiring imports callbacks, never the other way
    warm_up(state, defaults)
    app.server.config["MAX_CONTENT_LENGTH"] = REQUEST_LIMIT_BYTES
    guard.install(app.server, TOO_LARGE)
    return app


def install(app: Any, data: Any, page_query: Any) -> tuple[str, str]:
    """Shape the page of `app`: its HTML template, its scripts (polyfill and dash_table off, regenerator-runtime on,
    AG Grid's bundle only when the URL opens on a grid view) and the first-layout cache. `page_query()`: the query
    string of the page being built. Returns (AG Grid's namespace, its bundle's URL) for the grid views' first visit."""
    from workbench.interfaces.dashboard import ids, urlstate

    app.index_string = index_string(app)
    grid_ns, grid_url = lazy_grid_bundle(app)
    regenerator = f"<script>{(ASSETS / REGENERATOR_ASSET).read_text(encoding='utf-8')}</script>"
    style = f"<style>{(ASSETS / STYLE_ASSET).read_text(encoding='utf-8')}</style>"
    interpolate = app.interpolate_index

    def index(**parts: Any) -> str:
        scripts = regenerator + DROPPED_SCRIPTS.sub("", parts.get("scripts", ""))
        if urlstate.decode(page_query(), data).get("view") in ids.GRIDS:
            scripts += f'\n<script src="{grid_url}"></script>'
        return interpolate(**{**parts, "css": parts.get("css", "") + style, "scripts": scripts})

    app.interpolate_index = index
    cache_layouts(app, page_query)
    return grid_ns, grid_url


def lazy_grid_bundle(app: Any) -> tuple[str, str]:
    """Keep AG Grid's 1.3 MB bundle off the page (its `_js_dist` entry marked dynamic: still served, not loaded) and
    say where it is: the page loads it on a grid view's first visit (wiring.PANES_JS), or up front when the URL
    opens on a grid view (the first layout then holds the grid). Returns (its namespace, its URL)."""
    import dash_ag_grid

    name = "dash_ag_grid.min.js"
    for resource in dash_ag_grid._js_dist:  # one list, shared by the package's components
        if resource.get("relative_package_path") == name:
            resource["dynamic"] = True
    return "dash_ag_grid", f"{app.config.requests_pathname_prefix}_dash-component-suites/dash_ag_grid/{name}"


def cache_layouts(app: Any, page_query: Any) -> None:
    """Serve `_dash-layout` from a small cache of finished responses, one per page query string (the layout is a
    function of the URL and the data, which is loaded once), and `_dash-dependencies` from one built at the first
    request."""
    import threading

    views = app.server.view_functions
    prefix = app.config.routes_pathname_prefix
    layout_view, deps_view = views[prefix + "_dash-layout"], views[prefix + "_dash-dependencies"]
    layouts: OrderedDict[str, tuple[bytes, int, str]] = OrderedDict()
    deps: list[tuple[bytes, int, str]] = []
    lock = threading.Lock()

    def keep(response: Any) -> tuple[bytes, int, str]:
        return response.get_data(), response.status_code, response.mimetype

    def answer(kept: tuple[bytes, int, str]) -> Any:
        body, status, mimetype = kept
        return app.server.response_class(body, status=status, mimetype=mimetype)

    def layout(*args: Any, **kwargs: Any) -> Any:
        key = page_query()
        with lock:
            if key in layouts:
                layouts.move_to_end(key)
                return answer(layouts[key])
        response = app.server.make_response(layout_view(*args, **kwargs))
        if response.status_code == 200:
            with lock:
                layouts[key] = keep(response)
                while len(layouts) > LAYOUT_CACHE or sum(len(v[0]) for v in layouts.values()) > LAYOUT_CACHE_BYTES:
                    layouts.popitem(last=False)
        return response

    def dependencies(*args: Any, **kwargs: Any) -> Any:
        if deps:
            return answer(deps[0])
        response = app.server.make_response(deps_view(*args, **kwargs))
        if response.status_code == 200:
            deps[:] = [keep(response)]
        return response

    views[prefix + "_dash-layout"], views[prefix + "_dash-dependencies"] = layout, dependencies


def warm_up(state: AppState, defaults: Any) -> None:
    """Build every view once for the default selection, so the first page load does not pay for Plotly's lazy
    imports and validators (and the default roofline is served from the figure cache)."""
    from workbench.interfaces.dashboard import ids
    from workbench.interfaces.dashboard.callbacks import view_json

    controls = (list(defaults.gpus), defaults.gpus[0] if defaults.gpus else None, list(defaults.schemes), [], "best",
                defaults.shape, 1, 256, defaults.baseline, defaults.tier, defaults.mode)  # fmt: skip
    for view in (v for v in ids.FIGURES if v not in ids.LAZY):
        view_json(state, view, controls, [])


def serve(
    host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, data_dir: str | Path | None = None, debug: bool = False
) -> None:
    """Build the app and serve it (blocking)."""
    app = create_app(data_dir)
    print(f"workbench dashboard on http://{host}:{port}/ (data: {load_data(data_dir).data_dir})", flush=True)
    app.run(host=host, port=port, debug=debug)
