"""Spaces and who sees what: the tree of spaces with their folders and memory counts, adding a
folder (which makes the space) or a space by name, removing one (purge behind a confirmation),
and for each space — and everywhere — each AI's rule and the effective decision with its reason.

Each change is one façade call; nothing is cached, so it applies to the next request of every
interface (MCP, HTTP, CLI). A refused change shows the core's message on the page it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Depends, Request
from fastapi.responses import Response

from server.errors import EsfisError, SpaceNotEmpty
from server.facade import EVERYWHERE
from server.web.pages import (
    Posted,
    WebError,
    operator,
    operator_of,
    page,
    posted,
    redirect,
    service_of,
    settings_router,
    url,
)
from server.web.routes_memories import space_plots

router = settings_router()


@dataclass
class Node:
    """A place in the tree: a registered space, or an unregistered name above one."""

    name: str
    segment: str
    space: object | None = None  # the Space, None when only spaces below it are registered
    children: list[Node] = field(default_factory=list)


def space_tree(spaces: list) -> list[Node]:
    """Spaces nested by containment (whole segments); a missing parent is shown as a name."""
    roots: list[Node] = []
    nodes: dict[str, Node] = {}
    for space in sorted(spaces, key=lambda s: s.name):
        segments = space.name.split("/")
        level = roots
        for depth in range(1, len(segments) + 1):
            name = "/".join(segments[:depth])
            if name not in nodes:
                nodes[name] = Node(name, segments[depth - 1])
                level.append(nodes[name])
            level = nodes[name].children
        nodes[space.name].space = space
    return roots


def _rules_by_space(service) -> dict[str | None, list]:
    out: dict[str | None, list] = {}
    for rule in service.operator.policies():
        out.setdefault(rule.space, []).append(rule)
    return out


def _spaces_page(request: Request, *, status: int = 200, error: str | None = None, form: dict | None = None):
    service = service_of(request)
    spaces = service.operator.spaces()
    return page(
        request,
        "spaces.html",
        status=status,
        error=error,
        section="spaces",
        tree=space_tree(spaces),
        count=len(spaces),
        rules=_rules_by_space(service),
        form=form or {},
    )


def _space_page(
    request: Request,
    name: str,
    *,
    status: int = 200,
    error: str | None = None,
    confirm_purge: bool = False,
    form: dict | None = None,
):
    service = service_of(request)
    spaces = service.operator.spaces()
    space = next((s for s in spaces if s.name == name), None)
    if space is None:
        service.operator.access(name)  # raises the core's own error: invalid name, or no such space
    below = [s for s in spaces if s.name.startswith(name + "/")]
    parts = name.split("/")
    crumbs = ["/".join(parts[: i + 1]) for i in range(len(parts) - 1)]
    return page(
        request,
        "space.html",
        status=status,
        error=error,
        section="spaces",
        space=space,
        below=below,
        crumbs=crumbs,
        rows=service.operator.access(name),
        confirm_purge=confirm_purge,
        form=form or {},
        **(space_plots(request, name) if space is not None else {}),
    )


@router.get("/spaces")
def spaces(request: Request, _=Depends(operator)) -> Response:
    return _spaces_page(request)


@router.post("/spaces/folder")
def add_folder(request: Request, done: Posted = Depends(posted)) -> Response:
    folder, name = done.field("folder"), done.optional("name")
    back = done.field("back")
    try:
        if not folder:
            raise WebError(422, "give the path of a folder on this machine")
        space = operator_of(request).add_space(folder, name)
    except (EsfisError, WebError) as exc:
        if back and name:
            return _space_page(request, name, status=exc.status, error=exc.message, form=done.form)
        return _spaces_page(request, status=exc.status, error=exc.message, form=done.form)
    return redirect(request, url(request, "spaces", space.name), f"folder {folder} belongs to space {space.name}")


@router.post("/spaces/name")
def add_named(request: Request, done: Posted = Depends(posted)) -> Response:
    name = done.field("name")
    try:
        space = operator_of(request).create_space(name)
    except EsfisError as exc:
        return _spaces_page(request, status=exc.status, error=exc.message, form=done.form)
    return redirect(request, url(request, "spaces", space.name), f"space {space.name} created")


@router.post("/spaces/remove")
def remove(request: Request, done: Posted = Depends(posted)) -> Response:
    name, purge = done.field("name"), done.field("purge") == "yes"
    service = service_of(request)
    try:
        if purge and done.field("confirm") != name:
            return _space_page(
                request, name, status=422, confirm_purge=True, error="to purge, type the space's name exactly as shown"
            )
        purged = service.operator.remove_space(name, purge=purge)
    except SpaceNotEmpty as exc:
        return _space_page(request, name, status=exc.status, error=exc.message, confirm_purge=True)
    except EsfisError as exc:
        return _space_page(request, name, status=exc.status, error=exc.message)
    said = f"space {name} removed" + (
        f" and its {purged} {'memory' if purged == 1 else 'memories'} forgotten for good" if purged else ""
    )
    return redirect(request, url(request, "spaces"), said)


@router.get("/everywhere")
def everywhere(request: Request, _=Depends(operator)) -> Response:
    return _everywhere_page(request)


def _everywhere_page(request: Request, *, status: int = 200, error: str | None = None):
    service = service_of(request)
    return page(
        request,
        "everywhere.html",
        status=status,
        error=error,
        section="everywhere",
        rows=service.operator.access(EVERYWHERE),
        rules=service.operator.policies(),
    )


@router.post("/access")
def set_access(request: Request, done: Posted = Depends(posted)) -> Response:
    """One rule: ``ai`` (or '*') at ``space`` ('' for everywhere), allow | deny | inherit."""
    ai, space, effect = done.field("ai"), done.optional("space"), done.field("effect")
    back = done.field("back")
    try:
        operator_of(request).set_access(ai, EVERYWHERE if space is None else space, effect)
    except EsfisError as exc:
        if back == "everywhere" or space is None:
            return _everywhere_page(request, status=exc.status, error=exc.message)
        return _space_page(request, space, status=exc.status, error=exc.message, form=done.form)
    who = "everyone" if ai == "*" else ai
    where = "everywhere" if space is None else f"in {space}"
    said = (
        f"{who}: no rule of its own {where} now; it inherits"
        if effect == "inherit"
        else f"{who} is now {effect}ed {where}"
        if effect == "allow"
        else f"{who} is now denied {where}"
    )
    if back == "everywhere" or space is None:
        return redirect(request, url(request, "everywhere"), said)
    return redirect(request, url(request, "spaces", space), said)


@router.get("/spaces/{name:path}")
def space(name: str, request: Request, _=Depends(operator)) -> Response:
    return _space_page(request, name)
