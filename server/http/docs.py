"""``/docs``: Swagger UI over ``/openapi.json``, served from a packaged copy, never a CDN.

FastAPI's own ``/docs`` and ``/redoc`` load their scripts from a CDN at a floating version with
no integrity check, on the origin that also serves the operator's settings pages. Here they
are off (``create_app``), and ``/docs`` is this page: the Swagger UI files that the pinned
``fastapi-offline`` package ships (its static folder only; none of its code runs), an
initializer of ours (``static/docs.js``) instead of an inline script, and a Content-Security-
Policy that lets scripts, styles and requests come from this origin only. ReDoc is not served:
it needs inline styles. ``/openapi.json`` is the reference either way (docs/http.md).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response

DOCS_PATH = "/docs"
OURS = Path(__file__).parent / "static"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>esfis · HTTP API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/docs.js"></script>
</body>
</html>
"""


def swagger_files() -> Path:
    """The Swagger UI files of the pinned ``fastapi-offline`` package (located, not imported)."""
    spec = importlib.util.find_spec("fastapi_offline")
    if spec is None or spec.origin is None:
        raise RuntimeError("the package fastapi-offline (Swagger UI's files for /docs) is not installed")
    return Path(spec.origin).parent / "static"


def mount_docs(app: FastAPI) -> None:
    """``/docs`` and the three files it loads; nothing else of the package is served."""
    files = swagger_files()
    served = {
        "swagger-ui-bundle.js": (files / "swagger-ui-bundle.js", "text/javascript"),
        "swagger-ui.css": (files / "swagger-ui.css", "text/css"),
        "docs.js": (OURS / "docs.js", "text/javascript"),
    }

    @app.get(DOCS_PATH, include_in_schema=False)
    def docs() -> Response:
        return HTMLResponse(PAGE, headers={**HEADERS, "Cache-Control": "no-cache"})

    for name, (path, kind) in served.items():
        app.add_api_route(f"{DOCS_PATH}/{name}", _file(path, kind), methods=["GET"], include_in_schema=False)


def _file(path: Path, kind: str) -> Callable[[], Response]:
    def serve() -> Response:
        return FileResponse(path, media_type=kind, headers={**HEADERS, "Cache-Control": "max-age=3600"})

    return serve
