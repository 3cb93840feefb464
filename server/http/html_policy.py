"""Every HTML answer carries a Content-Security-Policy.

The pages that are HTML name their own (the settings pages: no script at all; ``/docs``: scripts
from this origin only); any other HTML answer, present or future, gets ``STRICT`` here: nothing
runs, nothing loads from elsewhere, nothing frames it, and forms post to this origin only.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

STRICT = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
_CSP = b"content-security-policy"


class HtmlPolicy:
    """Pure ASGI middleware: adds ``STRICT`` to an HTML answer that has no policy of its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower(): v for k, v in headers}
                if names.get(b"content-type", b"").lower().startswith(b"text/html") and _CSP not in names:
                    message = {**message, "headers": [*headers, (_CSP, STRICT.encode())]}
            await send(message)

        await self.app(scope, receive, sending)
