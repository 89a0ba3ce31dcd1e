"""`create_app(data_dir)`: the Dash app for one data directory (no module-level app anywhere)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.dashboard.callbacks import AppState, register
from workbench.dashboard.data import load_data
from workbench.dashboard.layout import UPLOAD_LIMIT_BYTES, build_layout
from workbench.dashboard.queries import default_selection

ASSETS = Path(__file__).resolve().parent / "assets"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050


def create_app(data_dir: str | Path | None = None) -> Any:
    """Load the data once (cached per directory), build the layout and register the callbacks."""
    from dash import Dash

    data = load_data(data_dir)
    app = Dash(
        __name__,
        title="Roofline workbench",
        assets_folder=str(ASSETS),
        update_title=None,
        suppress_callback_exceptions=False,
    )
    defaults = default_selection(data)
    app.layout = build_layout(data, defaults)
    state = AppState(data)
    register(app, state)
    warm_up(state, defaults)
    # Uploads arrive base64-encoded inside the callback JSON; anything far above the limit is refused outright,
    # anything between is read and answered with a message.
    app.server.config["MAX_CONTENT_LENGTH"] = 8 * UPLOAD_LIMIT_BYTES
    return app


def warm_up(state: AppState, defaults: Any) -> None:
    """Build every view once for the default selection, so the first page load does not pay for Plotly's lazy
    imports and validators."""
    from workbench.dashboard import ids
    from workbench.dashboard.callbacks import view_figure

    controls = (
        list(defaults.gpus),
        list(defaults.schemes),
        [],
        defaults.shape,
        [0, 8],
        defaults.baseline,
        defaults.tier,
        defaults.mode,
    )
    for view in ids.FIGURES:
        view_figure(state, view, controls, []).to_plotly_json()


def serve(
    host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, data_dir: str | Path | None = None, debug: bool = False
) -> None:
    """Build the app and serve it (blocking)."""
    app = create_app(data_dir)
    print(f"workbench dashboard on http://{host}:{port}/ (data: {load_data(data_dir).data_dir})", flush=True)
    app.run(host=host, port=port, debug=debug)
