"""Where an MCP server stands and who calls it: fixed at start, never taken from the agent.

An agent launches ``esfis mcp`` in the folder it works in and never says where that is, so the
server reads it once, at start: ``ESFIS_SPACE`` if set, else the space whose registered folder
is the longest one containing the working directory (docs/design.md §2), else no space (personal
only). Tools take no space to recall from: an agent cannot ask to look elsewhere.

The AI is ``ESFIS_AI`` if set, else the client's name from the MCP handshake made into an AI
name ("Claude Code" → ``claude-code``), else ``unknown``. Policies apply to that name.

One stdio session is one run (docs/design.md §7): a random run name per server process marks every
step, delivery and memory of the session, so the trail can tell sessions apart and the data
barrier follows what the session read.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from server.errors import EsfisError, StoreUnavailable
from server.models import Caller
from server.settings import Settings
from server.spaces.locate import locate

if TYPE_CHECKING:
    from server.facade import Esfis

UNKNOWN_AI = "unknown"
MAX_AI_NAME = 64
_SPACES = re.compile(r"\s+")
_OUTSIDE_AI_NAME = re.compile(r"[^a-z0-9._-]")


def ai_from_client(name: object) -> str | None:
    """The AI name a client's handshake name stands for; None if nothing usable is left.

    Lower-cased, runs of whitespace become one dash, every other character outside
    ``[a-z0-9._-]`` is dropped, leading punctuation is dropped (a name starts with a letter or
    digit), and the rest is cut to 64 characters.
    """
    if not isinstance(name, str):
        return None
    slug = _OUTSIDE_AI_NAME.sub("", _SPACES.sub("-", name.strip().lower()))
    slug = slug.lstrip("._-")[:MAX_AI_NAME]
    return slug or None


def new_run_id() -> str:
    return "mcp-" + secrets.token_hex(8)


@dataclass(frozen=True)
class Standing:
    """Where this server stands, decided once at start."""

    folder: str  # the working directory the server was started in
    space: str | None  # None: no space, personal memories only
    explicit: bool  # True: the space came from ESFIS_SPACE
    ai: str | None  # ESFIS_AI; None: take the client's name from the handshake
    run_id: str
    problem: EsfisError | None = None  # why no tool can work (bad ESFIS_SPACE, unusable store)

    def ai_for(self, client_name: object) -> str:
        return self.ai or ai_from_client(client_name) or UNKNOWN_AI

    def caller(self, service: Esfis, client_name: object) -> Caller:
        """The caller of one tool call; refuses with the start-up problem, if there was one."""
        if self.problem is not None:
            raise self.problem
        return service.caller(self.ai_for(client_name), space=self.space, transport="mcp", run=self.run_id, owner="mcp")


def stand(settings: Settings, environ: Mapping[str, str], cwd: str) -> Standing:
    """Resolve where a server started in ``cwd`` stands.

    The same rule as ``Esfis.caller`` (docs/design.md §2), through the light door (``server.spaces.locate``):
    the answer to ``initialize`` must not wait for the service's vector stack, which opens in
    the background. Each tool call then builds its caller through the façade.
    """
    explicit = environ.get("ESFIS_SPACE") or None
    ai = environ.get("ESFIS_AI") or None
    space: str | None = None
    problem: EsfisError | None = None
    try:
        space = locate(settings, space=explicit, cwd=cwd, ai=ai, ai_field="ESFIS_AI")
    except EsfisError as exc:
        problem = exc
    except (OSError, sqlite3.Error) as exc:  # e.g. an ESFIS_HOME that cannot be created
        problem = StoreUnavailable(f"cannot open the esfis catalog in {settings.home}: {exc}")
    return Standing(cwd, space, explicit is not None, ai, new_run_id(), problem)


def instructions(standing: Standing) -> str:
    """What the server tells the model at the handshake: what esfis is, and where it stands."""
    about = (
        "esfis keeps memories: short, self-contained facts that should outlive this conversation "
        "(decisions, conventions, how things work here, the user's preferences). Recall before "
        "you start a task or when you lack context; remember what a later session will need."
    )
    if standing.problem is not None:
        return f"{about}\n\nThis server cannot serve memories: {standing.problem.message}"
    if standing.space is None:
        return (
            f"{about}\n\nThe folder this server was started in ({standing.folder}) belongs to no "
            "esfis space, so it works with personal memories only: recall sees the user's "
            "personal memories, and remember needs personal=true. To give this folder a space, "
            "the user runs `esfis space add <folder>` and restarts the server."
        )
    source = "set by ESFIS_SPACE" if standing.explicit else f"from the folder {standing.folder}"
    return (
        f"{about}\n\nThis server works in space {standing.space!r} ({source}). recall sees the "
        "memories of this space, of the spaces below it, and the user's personal memories; it "
        "never sees other spaces, and no argument can change that. remember writes into this "
        "space unless personal=true."
    )
