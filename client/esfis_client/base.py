"""What both clients share: the settings they are made with, where a call stands, and the HTTP
client's options. The verbs' requests and answers are ``calls``'; the retry rule is ``retrying``'."""

from __future__ import annotations

from typing import Any

import httpx

from esfis_client.calls import Call, Place
from esfis_client.retrying import Retries

USER_AGENT = "esfis-client/0.1.0"


class Settings:
    """A client's settings: the server, its token, where it stands by default, and its manners."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        space: str | None = None,
        cwd: str | None = None,
        timeout: float = 60.0,
        retries: Retries | None = None,
        raise_held: bool = False,
    ) -> None:
        if not token:
            raise ValueError("a token is required: esfis token create --ai NAME (or a run token from open_run)")
        self.url = url.rstrip("/")
        self.token = token
        self.place = Place(space, cwd)
        self.timeout = timeout
        self.retries = retries or Retries()
        self.raise_held = raise_held

    def http_options(self, transport: Any = None) -> dict[str, Any]:
        return {
            "base_url": self.url,
            "headers": {"Authorization": f"Bearer {self.token}", "User-Agent": USER_AGENT},
            "timeout": httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
            **({"transport": transport} if transport is not None else {}),
        }

    def at(self, space: str | None, cwd: str | None) -> Place:
        """A call's place: what it names, else the client's."""
        return Place(space, cwd) if space is not None or cwd is not None else self.place

    def for_token(self, token: str, space: str | None) -> Settings:
        """The same server and manners with another token (a run token), standing in ``space``."""
        return Settings(
            self.url,
            token,
            space=space,
            timeout=self.timeout,
            retries=self.retries,
            raise_held=self.raise_held,
        )

    def attempts(self, call: Call[Any]) -> Retries:
        # A streamed body is read once: it is never sent again, whatever happened.
        return Retries(attempts=1) if call.content is not None else self.retries


def request_options(call: Call[Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if call.json is not None:
        options["json"] = call.json
    if call.params:
        options["params"] = call.params
    if call.content is not None:
        options["content"] = call.content
    if call.headers:
        options["headers"] = call.headers
    return options
