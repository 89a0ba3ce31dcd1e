"""Callback inputs that no browser sends but any HTTP client can: every callback runs behind `safe`, and the
callback endpoint answers malformed requests with HTTP 400, never 500.

`safe(fn)` turns an exception escaping a callback (a payload of the wrong shape that validation did not catch) into
a no-op (Dash's PreventUpdate -> HTTP 204) and logs one line; `install(server)` adds the 400 / 413 handlers.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

LOG = logging.getLogger("workbench.interfaces.dashboard")
DISPATCH = "/_dash-update-component"


def first_line(exc: BaseException, limit: int = 200) -> str:
    """The first non-blank line of an exception's message (plotly's start with a blank one), at most `limit` long."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), "")[:limit]


def safe(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The callback, with any exception other than Dash's own no-update signals turned into a no-op."""
    from dash.exceptions import PreventUpdate

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PreventUpdate:
            raise
        except Exception as exc:  # noqa: BLE001 - a malformed payload must not become an HTTP 500
            LOG.warning("callback %s ignored a malformed payload: %s: %s", fn.__name__, type(exc).__name__,
                        first_line(exc))  # fmt: skip
            raise PreventUpdate from None

    return wrapper


def too_large_response(message: str) -> Any:
    """The answer to an upload over the request cap: a normal callback response that shows the message."""
    from flask import Response

    from workbench.interfaces.dashboard import ids

    body = {"multi": True, "response": {ids.UPLOAD_MESSAGE: {"children": message, "className": "upload-message"}}}
    return Response(json.dumps(body), status=200, mimetype="application/json")


def install(server: Any, limit_message: str) -> None:
    """Error handlers on the Flask server: a request too large for the cap gets the upload message (HTTP 200 with
    the message, so the page shows it); anything that still fails on the callback endpoint is a 400."""
    from flask import Response, request
    from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

    @server.errorhandler(RequestEntityTooLarge)
    def _too_large(exc: Exception) -> Any:
        if request.path.endswith(DISPATCH):
            return too_large_response(limit_message)
        return Response(limit_message, status=413, mimetype="text/plain")

    @server.errorhandler(Exception)
    def _failed(exc: Exception) -> Any:
        if isinstance(exc, HTTPException):
            return exc
        if request.path.endswith(DISPATCH):
            LOG.warning("malformed callback request: %s: %s", type(exc).__name__, first_line(exc))
            return Response("malformed callback request", status=400, mimetype="text/plain")
        LOG.exception("request failed")
        return Response("internal error", status=500, mimetype="text/plain")
