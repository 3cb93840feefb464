"""Who calls, from where, in which run: the one place a caller is resolved and checked, for every
interface (``Esfis.caller``)."""

from __future__ import annotations

import os
import re
import secrets
from typing import Any

from server.errors import Forbidden, InvalidInput, OutOfReach
from server.models import Caller, Token
from server.records import run_id_for, standing_run
from server.spaces import contains, validate_space_name
from server.spaces.policies import validate_ai
from server.spaces.registry import Registry

RUN_NAME_RULE = "a run name is 1 to 128 of [A-Za-z0-9._:-]"
_RUN_NAME = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def resolve_caller(
    registry: Registry,
    ai: str | None,
    *,
    space: str | None,
    cwd: str | os.PathLike[str] | None,
    transport: str,
    run: str | None,
    owner: str | None,
    scope: str | None,
    token: Token | None,
) -> Caller:
    """The one place a caller is resolved and checked, for every interface: standing in
    ``space`` if named, else where ``cwd`` lies, else in its token's scope, else nowhere.

    The run is the platform's choice, never the caller's (``server.barrier.runs``). With a
    ``token`` (HTTP), the token decides: a run token is its one run; an agent token's
    requests are its standing run. Otherwise ``run`` names an interface's session (an MCP
    process, a CLI ``--run``; None: this call is a run of its own), and ``owner`` is who the
    name belongs to (default: the transport and the AI)."""
    if token is not None:
        if token.ai is None or token.kind not in ("agent", "run"):
            raise Forbidden("this endpoint acts as an AI: use an agent token or a run token")
        ai, scope = token.ai, token.space
    if ai is None:
        raise InvalidInput("an AI name is required", field="ai")
    validate_ai(ai)
    if run is not None and not _RUN_NAME.fullmatch(run):
        raise InvalidInput(f"invalid run name {run[:40]!r}: {RUN_NAME_RULE}", field="run")
    if space is not None and cwd is not None:
        raise InvalidInput("give space or cwd, not both", field="space")
    if scope is not None and space is None and cwd is None:
        space = scope  # a token confined to a subtree stands in its own space by default
    if space is not None:
        where: str | None = validate_space_name(space)
    elif cwd is not None:
        where = registry.space_at(cwd)
    else:
        where = None
    if scope is not None and (where is None or not contains(scope, where)):
        # Before a named space is looked up: a scoped caller learns nothing of other spaces.
        raise OutOfReach(f"this token acts only inside space {scope!r}")
    if space is not None:
        registry.require(space)
    common: dict[str, Any] = dict(ai=ai, space=where, transport=transport, scope=scope)
    if token is not None and token.run_id is not None:
        return Caller(
            **common,
            run_id=token.run_id,
            run_name="token",
            run_kind="token",
            run_parent=token.parent_run,
            token_id=token.id,
            run_expires=token.expires_at,
        )
    if token is not None:
        run_id, name = standing_run(token)
        return Caller(
            **common,
            run_id=run_id,
            run_name=name,
            run_kind="standing",
            token_id=token.id,
        )
    name = run if run is not None else "once-" + secrets.token_hex(8)
    return Caller(
        **common,
        run_id=run_id_for(owner or f"{transport}:{ai}", name),
        run_name=name,
        run_kind="session" if run is not None else "once",
    )
