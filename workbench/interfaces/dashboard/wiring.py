"""`wire(app, state)`: every Dash callback of the page, each a thin shell over a plain function of `callbacks`.

One control change is one request: the main callback builds only the open tab's figure (or grid) and returns it with
the status line and the query string (the layout reads the query string back on a reload, so nothing loops). The
batch slider and boxes, and the figure export buttons, run in the browser (clientside).
"""

from __future__ import annotations

import json
from typing import Any

from workbench.interfaces.dashboard import callbacks as cb
from workbench.interfaces.dashboard import ids, urlstate

# Slider (log2 index) <-> boxes (batch sizes). Typed values are clamped to 1..MAX and the slider snaps around them.
BATCH_SYNC_JS = """
function(slider, lo, hi) {
    const nu = window.dash_clientside.no_update;
    const trig = (window.dash_clientside.callback_context.triggered || []).map(t => t.prop_id);
    const ok = v => typeof v === 'number' && isFinite(v);
    if (trig.some(p => p.startsWith('%(slider)s.'))) {
        if (!Array.isArray(slider) || slider.length !== 2) { return [nu, nu, nu]; }
        const a = Math.pow(2, slider[0]), b = Math.pow(2, slider[1]);
        return [nu, a === lo ? nu : a, b === hi ? nu : b];
    }
    if (!ok(lo) || !ok(hi)) { return [nu, nu, nu]; }
    const clamp = v => Math.min(%(max)d, Math.max(1, Math.round(v)));
    let l = clamp(lo), h = clamp(hi);
    if (l > h) { const t = l; l = h; h = t; }
    const top = %(top)d;
    const lo2 = Math.floor(Math.log2(l)), hi2 = Math.ceil(Math.log2(h));
    const s = [Math.min(top, Math.max(0, lo2)), Math.min(top, Math.max(0, hi2))];
    const same = Array.isArray(slider) && s[0] === slider[0] && s[1] === slider[1];
    return [same ? nu : s, l === lo ? nu : l, h === hi ? nu : h];
}
"""
# GPUs -> the primary GPU box: the selected GPUs (queries.make_selection's rule: unknown ones dropped, none left: the
# default ones), its value kept while still selected, else the first selected GPU. In the browser: the main callback
# reads the primary GPU, so a server callback here held it back for a round trip on every GPU change.
PRIMARY_JS = """
function(gpus, primary) {
    const labels = new Map(%(labels)s), nu = window.dash_clientside.no_update;
    let chosen = Array.isArray(gpus) ? [...new Set(gpus.filter(g => labels.has(g)))] : [];
    if (!chosen.length) { chosen = %(fallback)s; }
    const value = chosen.includes(primary) ? primary : (chosen.length ? chosen[0] : null);
    return [chosen.map(g => ({label: labels.get(g), value: g})), value === primary ? nu : value];
}
"""
# Tab -> the open pane (only the pane that closes and the one that opens change class) and the open view the main
# callback draws; a grid view's first visit loads AG Grid's bundle first (factory.lazy_grid_bundle keeps it off the
# page until then), so the grid the main callback mounts can render.
PANES_JS = """
function(view) {
    const views = %(views)s, grids = %(grids)s, nu = window.dash_clientside.no_update;
    const open = document.querySelector('#%(panes)s > .pane.open');
    const was = open ? open.id.replace('pane-', '') : null;
    const out = [...views.map(v => v === view ? (v === was ? nu : 'pane open') : (v === was ? 'pane' : nu)), view];
    if (!grids.includes(view) || window.%(grid_ns)s) { return out; }
    window.__gridBundle = window.__gridBundle || new Promise((ok, fail) => {
        const s = document.createElement('script');
        s.src = '%(grid_url)s'; s.onload = ok; s.onerror = fail;
        document.head.appendChild(s);
    });
    return window.__gridBundle.then(() => out);
}
"""
# The page's tokens changed (or it loaded): once the open view has drawn and the page is idle, ask for the next
# figure view the page does not hold yet, which the main callback mounts in its hidden pane; a tab's first visit then
# shows it at once (or updates it in place when the selection changed since). The request goes out through set_props
# from a timer: an output of this callback would close a loop (main -> tokens -> here -> main) that Dash cuts.
PREFETCH_JS = """
function(held, open) {
    const views = %(views)s, nu = window.dash_clientside.no_update;
    const next = views.find(v => v !== open && !(held && v in held));
    const last = window.__prefetching, now = Date.now();
    if (!next || (last === next && now - window.__prefetchedAt < 2000)) { return nu; }  // in flight
    // the one asked before has arrived: go on at once (no gap the page could mistake for idle); else (first, or
    // an answer to a change crossed it) wait for the open view to draw and the page to be idle
    const chained = last && last !== next && held && last in held;
    window.__prefetching = next;
    window.__prefetchedAt = now;
    // drawn: the open view's figure is on screen (a grid view: its grid is mounted)
    const drawn = () => document.querySelector('#%(panes)s > .pane.open ' + (views.includes(open) || open === 'moe'
        ? '.main-svg' : '.ag-root-wrapper'));
    const ask = () => window.dash_clientside.set_props('%(store)s', {data: next});
    const wait = () => drawn() ? (window.requestIdleCallback || setTimeout)(ask, {timeout: 500}) : setTimeout(wait, 50);
    setTimeout(chained ? ask : wait, 0);
    return nu;
}
"""
EXPORT_JS = """
function(svg, png) {
    const trig = (window.dash_clientside.callback_context.triggered || []).map(t => t.prop_id);
    if (!trig.length) { return window.dash_clientside.no_update; }
    const format = trig[0].startsWith('%(svg)s') ? 'svg' : 'png';
    const graphs = Array.from(document.querySelectorAll('#%(panes)s > .pane.open .js-plotly-plot'));
    if (!graphs.length) { return 'No figure on this tab to export.'; }
    const view = (graphs[0].closest('[id^=fig-]') || {id: 'figure'}).id.replace('fig-', '');
    const scale = format === 'png' ? 2 : 1;
    window.Plotly.downloadImage(graphs[0], {format: format, filename: 'workbench-' + view, scale: scale});
    return 'Exported ' + view + ' as ' + format.toUpperCase() + '.';
}
"""


def wire(app: Any, state: cb.AppState, guard: Any, grid_bundle: tuple[str, str]) -> None:
    """`grid_bundle`: (the namespace AG Grid's bundle defines, its URL), loaded on a grid view's first visit."""
    from dash import ALL, Input, Output, Patch, State, callback_context, no_update

    from workbench.interfaces.dashboard.queries import BATCH_SIZES, MAX_BATCH

    safe = guard.safe
    controls = [Input(c, "value") for c in cb.CONTROLS]
    store = Input(ids.UPLOAD_STORE, "data")
    tab = Input(ids.OPEN_VIEW, "data")

    def nothing(value: Any) -> Any:
        return no_update if value is None else value

    keyed = list(urlstate.KEYS.items())
    # the page's first layout carries these for the view it opens on (factory.layout), so nothing fires on load;
    # then the slots (filled on a view's first visit), the mounted graphs and grids (ALL: whichever exist), the rest
    slots = [(ids.SLOTS[v], "children") for v in ids.TAB_VALUES]
    mounted_outputs = [Output({"type": ids.GRAPH, "view": ALL}, "figure"),
                       Output({"type": ids.GRID, "view": ALL}, "rowData"),
                       Output({"type": ids.GRID, "view": ALL}, "columnDefs"),
                       Output({"type": ids.GRID_NOTE, "view": ALL}, "children")]  # fmt: skip
    tail = [(ids.STATUS, "children"), (ids.URL, "search"), (ids.FIGURE_KEYS, "data")]
    moe = [Input(c, "value") for c in (ids.MOE_MODEL, ids.MOE_LAYER, ids.MOE_ROUTING)]

    @app.callback([*[Output(c, p) for c, p in slots], *mounted_outputs, *[Output(c, p) for c, p in tail]], *controls,
                  store, tab, Input(ids.COMPARE_VIEW, "value"), *moe, Input(ids.PREFETCH, "data"),
                  State(ids.URL, "search"), State(ids.FIGURE_KEYS, "data"), prevent_initial_call=True)  # fmt: skip
    @safe
    def _main(*values: Any) -> Any:
        """Everything one control change needs, in one request: the open tab's figure or grid (unless the page
        already holds it; mounted in its slot on the first visit, updated in place after), the status line and the
        query string."""
        n = cb.N_CONTROLS
        controls_, tokens, view, compare, *moe, prefetch, search, held = values[:n], *values[n : n + 9]
        present = [[o["id"]["view"] for o in spec] for spec in callback_context.outputs_list[len(slots):-len(tail)]]
        if callback_context.triggered_id == ids.PREFETCH:  # a hidden view drawn ahead of its first visit
            if prefetch not in ids.PREFETCHED or prefetch == view or prefetch in present[0]:
                return no_update
            out = cb.page_outputs(state, prefetch, controls_, tokens, compare, held, moe, {*present[0]})
            token = Patch()  # only this view's token: an answer to a change that crossed this one keeps its own
            token[prefetch] = out[(ids.FIGURE_KEYS, "data")][prefetch]
            slot = (ids.SLOTS[prefetch], "children")
            return [*[out[slot] if key == slot else no_update for key in slots],
                    *[[no_update] * len(p) for p in present], no_update, no_update, token]  # fmt: skip
        out = cb.page_outputs(state, view, controls_, tokens, compare, held, moe, {*present[0], *present[1]})
        by_id = dict(zip(cb.CONTROLS, controls_, strict=True)) | {ids.TABS: view, ids.COMPARE_VIEW: compare}
        by_id |= dict(zip((ids.MOE_MODEL, ids.MOE_LAYER, ids.MOE_ROUTING), moe, strict=True))
        query = urlstate.encode({key: by_id.get(cid) for key, (cid, _) in keyed})
        out[(ids.URL, "search")] = query if query != search else None
        if out[(ids.FIGURE_KEYS, "data")] == held:
            out[(ids.FIGURE_KEYS, "data")] = None
        grids = {v: out.get((ids.GRID, v), (None, None)) for v in present[1]}
        mounted = [[nothing(out.get((ids.GRAPH, v))) for v in present[0]],
                   [nothing(grids[v][0]) for v in present[1]], [nothing(grids[v][1]) for v in present[2]],
                   [nothing(out.get((ids.GRID_NOTE, v))) for v in present[3]]]  # fmt: skip
        return [*[nothing(out.get(key)) for key in slots], *mounted, *[nothing(out.get(key)) for key in tail]]

    app.clientside_callback(
        PREFETCH_JS % {"views": json.dumps(list(ids.PREFETCHED)), "panes": ids.PANES, "store": ids.PREFETCH},
        Output(ids.PREFETCHED_VIEW, "data"), Input(ids.FIGURE_KEYS, "data"), State(ids.OPEN_VIEW, "data"),
    )  # fmt: skip
    app.clientside_callback(
        PANES_JS % {"views": json.dumps(list(ids.TAB_VALUES)), "panes": ids.PANES, "grids": json.dumps(list(ids.GRIDS)),
                    "grid_ns": grid_bundle[0], "grid_url": grid_bundle[1]},
        [Output(ids.pane_id(v), "className") for v in ids.TAB_VALUES], Output(ids.OPEN_VIEW, "data"),
        Input(ids.TABS, "value"), prevent_initial_call=True,
    )  # fmt: skip

    @app.callback(Output(ids.GPUS, "options"), Output(ids.KERNELS, "options"), Output(ids.SHAPE, "options"),
                  Output(ids.BASELINE, "options"), store, prevent_initial_call=True)  # fmt: skip
    @safe
    def _options(tokens: Any) -> Any:
        return cb.options(state, tokens)

    labels, fallback = cb.primary_choices(state)
    app.clientside_callback(
        PRIMARY_JS % {"labels": json.dumps(list(labels.items())), "fallback": json.dumps(list(fallback))},
        Output(ids.PRIMARY, "options"), Output(ids.PRIMARY, "value"), Input(ids.GPUS, "value"),
        State(ids.PRIMARY, "value"), prevent_initial_call=True,
    )  # fmt: skip

    @app.callback(Output(ids.DOWNLOAD, "data"), Input(ids.DOWNLOAD_BUTTON, "n_clicks"),
                  *[State(c, "value") for c in cb.CONTROLS], State(ids.UPLOAD_STORE, "data"),
                  State({"type": ids.GRID, "view": ALL}, "filterModel"),
                  State({"type": ids.GRID, "view": ALL}, "columnState"), prevent_initial_call=True)  # fmt: skip
    @safe
    def _download(n_clicks: Any, *values: Any) -> Any:
        """The table grid's filters and sort apply (none when the table tab was never opened)."""
        if not isinstance(n_clicks, int) or n_clicks < 1:
            return no_update
        n = cb.N_CONTROLS
        grids = [s["id"]["view"] for s in callback_context.states_list[-1]]
        filters, sorts = (dict(zip(grids, v, strict=True)).get("table") for v in values[n + 1 : n + 3])
        return cb.download_csv(state, values[:n], values[n], filters, sorts)

    @app.callback(Output(ids.UPLOAD_STORE, "data"), Output(ids.UPLOAD_MESSAGE, "children"),
                  Output(ids.UPLOAD_MESSAGE, "className"), Input(ids.UPLOAD, "contents"),
                  State(ids.UPLOAD, "filename"), State(ids.UPLOAD_STORE, "data"),
                  prevent_initial_call=True)  # fmt: skip
    @safe
    def _upload(contents: Any, filename: Any, tokens: Any) -> Any:
        new_tokens, message = cb.upload(state, contents, filename, tokens)
        if new_tokens is None:
            return no_update, message, "upload-message"
        return new_tokens, message, "upload-message ok"

    app.clientside_callback(
        BATCH_SYNC_JS % {"slider": ids.BATCH, "max": MAX_BATCH, "top": len(BATCH_SIZES) - 1},
        Output(ids.BATCH, "value"), Output(ids.BATCH_LO, "value"), Output(ids.BATCH_HI, "value"),
        Input(ids.BATCH, "value"), Input(ids.BATCH_LO, "value"), Input(ids.BATCH_HI, "value"),
    )  # fmt: skip
    app.clientside_callback(
        EXPORT_JS % {"svg": ids.EXPORT_SVG, "panes": ids.PANES},
        Output(ids.EXPORT_SINK, "children"), Input(ids.EXPORT_SVG, "n_clicks"), Input(ids.EXPORT_PNG, "n_clicks"),
        prevent_initial_call=True,
    )  # fmt: skip
