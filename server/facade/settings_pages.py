"""What the operator's settings pages read and change (``server.web``), over the books: the AIs
esfis knows, each one's access at a place and the rule that sets it, and pages of deliveries and
runs with their totals.

``Operator`` names each as a verb of its own (``service.operator.access(…)``); the bodies live
here, as the memories' live in ``server.facade.curation`` and the bulk verbs' in
``server.facade.bulk``. Each is a call on one book: the web layer calls only the façade.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from server.errors import InvalidInput
from server.models import EVERYWHERE, Delivery, Place
from server.records import RUN_ID, Run
from server.spaces import validate_space_name
from server.spaces.access import Access, access_rows
from server.spaces.policies import validate_ai

if TYPE_CHECKING:
    from server.facade.parts import Parts

Everywhere = Literal[Place.EVERYWHERE]
MAX_PAGE = 100_000  # the furthest page a settings page may ask for
MAX_PER_PAGE = 100


def rule_place(space: str | Everywhere) -> str | None:
    """A rule's place as the registry keeps it: None for everywhere."""
    if space is EVERYWHERE:
        return None
    if not isinstance(space, str):  # None, say: everywhere is named, never implied
        raise InvalidInput("a rule's place is a space's name or EVERYWHERE", field="space")
    return space


def known_ais(parts: Parts) -> list[str]:
    """The AIs that have used esfis (every recall, write, get, share and open is a step of a
    run), hold an active AI token, or have a rule."""
    ais = set(parts.runs.ais())
    ais |= {t.ai for t in parts.tokens.list() if t.ai is not None and t.active}
    ais |= {r.ai for r in parts.registry.policies().rules() if r.ai != "*"}
    return sorted(ais)


def access(parts: Parts, space: str | Everywhere) -> list[Access]:
    """For a space (or everywhere, where personal memories are), each known AI and everyone:
    its rule there and the effective decision with the rule that makes it (DESIGN §3)."""
    place = rule_place(space)
    if place is not None:
        parts.registry.require(place)
    return access_rows(parts.registry.policies(), known_ais(parts), place)


def set_access(parts: Parts, ai: str, space: str | Everywhere, effect: str) -> None:
    """``allow`` or ``deny`` sets the rule for the AI (or '*') at this place; ``inherit``
    removes it, if there is one, so the order of DESIGN §3 decides from further up."""
    place = rule_place(space)
    if effect == "inherit":
        validate_ai(ai, wildcard=True)
        parts.registry.clear_rule(ai, place)
    elif effect == "allow":
        parts.registry.set_rule(ai, place, "allow")
    elif effect == "deny":
        parts.registry.set_rule(ai, place, "deny")
    else:
        raise InvalidInput(f"effect must be allow, deny or inherit, got {str(effect)[:20]!r}", field="effect")


def delivery_page(
    parts: Parts,
    *,
    ai: str | None = None,
    space: str | None = None,
    run: str | None = None,
    page: int = 1,
    per_page: int = 25,
) -> tuple[list[Delivery], int]:
    """Deliveries newest first, filtered by AI, caller's space and run; one page, and the
    number that match in all."""
    if ai is not None:
        validate_ai(ai)
    if space is not None:
        validate_space_name(space)
    if run is not None and not RUN_ID.fullmatch(run):
        raise InvalidInput(f"malformed run id {run[:40]!r}: run ids look like run_ and 24 hex digits", field="run")
    offset = page_offset(page, per_page)
    return parts.deliveries.page(ai=ai, space=space, run=run, offset=offset, limit=per_page)


def run_page(parts: Parts, *, ai: str | None = None, page: int = 1, per_page: int = 25) -> tuple[list[Run], int]:
    """Runs newest first, optionally one AI's; one page, and the number that match in all."""
    if ai is not None:
        validate_ai(ai)
    return parts.runs.page(ai=ai, offset=page_offset(page, per_page), limit=per_page)


def page_offset(page: object, per_page: object) -> int:
    """Where a page starts, both numbers checked (a form or a query string hands in anything)."""
    if isinstance(page, bool) or not isinstance(page, int) or not 1 <= page <= MAX_PAGE:
        raise InvalidInput(f"page must be an integer from 1 to {MAX_PAGE}", field="page")
    if isinstance(per_page, bool) or not isinstance(per_page, int) or not 1 <= per_page <= MAX_PER_PAGE:
        raise InvalidInput(f"per_page must be an integer from 1 to {MAX_PER_PAGE}", field="per_page")
    return (page - 1) * per_page
