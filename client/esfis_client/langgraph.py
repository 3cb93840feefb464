"""``EsfisStore``: LangGraph's ``BaseStore`` over esfis, so a graph's long-term memory lives in
esfis's spaces, behind its policies and its barrier.

How an item maps (docs in client/README.md, "The LangGraph store"):

- **namespace ↔ space**: ``("acme", "platform")`` is the space ``acme/platform``. Each label must
  be a space segment (``[a-z0-9][a-z0-9_-]{0,62}``; LangGraph itself refuses ``.``), 1 to 8 of
  them; anything else is refused with ``InvalidNamespaceError`` naming the rule, never rewritten.
  The store never creates a space (an agent token cannot): a namespace whose space does not exist,
  or that the token may not write, raises esfis's error (``SpaceNotFound``, ``OutOfReach``,
  ``PolicyDenied``) with the namespace in its message.
- **an item is a memory**: its text (what recall embeds) is the value's fields named by the put's
  ``index`` or the store's ``fields`` (LangGraph's paths: ``"text"``, ``"a.b"``, ``"tags[*]"``),
  by default the whole value as JSON; its ``data`` is ``{"key", "namespace", "value",
  "created_at"}``, so the value and key travel with the memory and recall's filter reaches them.
  The value must fit esfis's metadata limits (4 KiB as compact JSON with the key, nested at most 3
  deep inside ``value``); a key is at most ``MAX_KEY_CHARS`` characters.
- **put** of a key the namespace holds replaces that memory (the old version is superseded, not
  erased); **put of None / delete** forgets it for good. A write esfis holds for a person raises
  ``HeldForApproval`` (its ``held`` can be waited on).
- **get** is a recall with the filter ``{"key": …, "namespace": …}`` and no query, in that space.
- **search** is a recall in the prefix's space, which reaches the spaces below it (and never one
  beside it); ``query`` ranks by recall's relevance, without one the newest come first; ``filter``
  runs on the value through esfis's metadata filter (``{"status": "active"}`` tests
  ``value.status``) inside the partitions, before ranking. ``limit + offset`` is at most 100.
  An empty prefix searches the store's ``roots`` (else the token's own place: a token scoped to a
  space stands in it).
- **list_namespaces** lists the namespaces the token reads under each root or prefix: every space
  it reads from there (``GET /v1/browse/spaces``, followed page by page, however many), whether or
  not it holds items yet. It reads no memory, so the run carries nothing from listing them (a
  listing of items would be read by the run, as recall's results are, and could bar its writes).
- ``ttl`` is not supported (``supports_ttl = False``): an esfis memory's ``valid_until`` does not
  refresh on read.

The sync and async paths share each operation, written once as a generator of client calls.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        get_text_at_path,
    )
except ImportError as missing:  # the extra was not installed
    raise ImportError("esfis_client.langgraph needs LangGraph: pip install 'esfis-client[langgraph]'") from missing

from esfis_client.aio import AsyncEsfis
from esfis_client.client import Esfis
from esfis_client.errors import EsfisError, Forbidden, HeldForApproval, InvalidInput, NotFound
from esfis_client.models import Memory, Recalled

SEGMENT = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
MAX_DEPTH = 8  # a space's segments
MAX_KEY_CHARS = 512
MAX_RESULTS = 100  # recall's limit: a search's limit + offset
SPACES_PAGE = 200  # spaces read a page at a time by list_namespaces
WHOLE_VALUE = "$"


@dataclass(frozen=True)
class Ask:
    """One client call an operation needs: the verb's name and its arguments."""

    verb: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


Steps = Generator[Ask, Any, Result]


def space_of(namespace: tuple[str, ...]) -> str:
    """The space a namespace names, or ``InvalidNamespaceError`` stating the rule."""
    if not namespace:
        raise InvalidNamespaceError("a namespace names a space: it cannot be empty")
    if len(namespace) > MAX_DEPTH:
        raise InvalidNamespaceError(
            f"namespace {namespace!r} is {len(namespace)} deep; a space has at most {MAX_DEPTH}"
        )
    for label in namespace:
        if not isinstance(label, str) or not SEGMENT.fullmatch(label):
            raise InvalidNamespaceError(
                f"namespace label {label!r} in {namespace!r} is not a space segment: lower-case ASCII "
                "letters, digits, '-' and '_', starting with a letter or digit, at most 63 characters"
            )
    return "/".join(namespace)


def namespace_of(space: str) -> tuple[str, ...]:
    return tuple(space.split("/"))


class EsfisStore(BaseStore):
    """LangGraph's store over esfis: ``EsfisStore(Esfis(url, token))``, or ``EsfisStore.connect``
    for both sync and async use. ``fields``: what an item's text is made of (default: the whole
    value). ``roots``: the namespaces an empty prefix searches and lists (default: the token's
    own place)."""

    supports_ttl = False

    def __init__(
        self,
        client: Esfis | None = None,
        *,
        aclient: AsyncEsfis | None = None,
        fields: Sequence[str] | None = None,
        roots: Iterable[tuple[str, ...]] = (),
    ) -> None:
        if client is None and aclient is None:
            raise ValueError("EsfisStore needs an Esfis client, an AsyncEsfis client, or both")
        self.client = client
        self.aclient = aclient
        self.fields = tuple(fields or (WHOLE_VALUE,))
        self.roots = tuple(space_of(r) for r in roots)

    @classmethod
    def connect(cls, url: str, token: str, **options: Any) -> EsfisStore:
        """A store with a blocking and an async client on one server and token."""
        return cls(Esfis(url, token), aclient=AsyncEsfis(url, token), **options)

    # -- BaseStore ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self.client is None:
            raise RuntimeError("this EsfisStore has an async client only: use its a* methods")
        return [_drive(self._steps(op), self.client) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self.aclient is None:
            assert self.client is not None
            return await asyncio.to_thread(self.batch, list(ops))
        return [await _adrive(self._steps(op), self.aclient) for op in ops]

    # -- each operation, as the client calls it needs -------------------------------------

    def _steps(self, op: Op) -> Steps:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            return self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list(op)
        raise TypeError(f"unknown store operation {op!r}")

    def _found(self, namespace: tuple[str, ...], key: str) -> Generator[Ask, Any, Recalled | None]:
        space, key = space_of(namespace), _key(key)
        found = yield Ask("recall", (None,), {"filter": {"key": key, "namespace": space}, "limit": 1, "space": space})
        return found[0] if found else None

    def _get(self, op: GetOp) -> Steps:
        found = yield from self._found(op.namespace, op.key)
        return None if found is None else _item(found, Item)

    def _put(self, op: PutOp) -> Steps:
        space = space_of(op.namespace)
        old = yield from self._found(op.namespace, op.key)
        if op.value is None:
            if old is not None:
                _applied((yield Ask("forget", (old.id,), {"space": space})))
            return None
        value = dict(op.value)
        created = old.data.get("created_at") if old is not None else None
        data = {"key": _key(op.key), "namespace": space, "value": value, "created_at": created or _now()}
        text = self._text(value, op.index)
        if old is None:
            _applied((yield Ask("remember", (text,), {"data": data, "space": space})))
        else:
            _applied((yield Ask("replace", (old.id, text), {"data": data, "space": space})))
        return None

    def _search(self, op: SearchOp) -> Steps:
        if op.limit + op.offset > MAX_RESULTS:
            raise InvalidInput(f"a search's limit + offset is at most {MAX_RESULTS} (esfis's recall limit)")
        where: dict[str, Any] = {"namespace": {"$exists": True}}
        for name, condition in (op.filter or {}).items():
            where[f"value.{name}"] = condition
        wanted = op.limit + op.offset
        found: list[Recalled] = []
        for space in self._spaces(op.namespace_prefix):
            found += yield Ask("recall", (op.query or None,), {"filter": where, "limit": wanted, "space": space})
        prefix = op.namespace_prefix
        found = [r for r in found if _under(r, prefix)]
        if len(self._spaces(prefix)) > 1:  # several roots: one order over them all
            found.sort(key=(lambda r: -r.score) if op.query else (lambda r: r.created_at), reverse=not op.query)
        chosen = found[op.offset : op.offset + op.limit]
        return [_item(r, SearchItem, score=r.score if op.query else None) for r in chosen]

    def _list(self, op: ListNamespacesOp) -> Steps:
        conditions = op.match_conditions or ()
        prefix: tuple[str, ...] = ()
        for c in conditions:
            if c.match_type == "prefix":
                prefix = tuple(_literal_head(c.path))
        seen: set[tuple[str, ...]] = set()
        for space in self._spaces(prefix):
            cursor: str | None = None
            while True:  # every page: the store lists every space, however many
                page = yield Ask("list_spaces", (), {"cursor": cursor, "limit": SPACES_PAGE, "space": space})
                seen.update(namespace_of(name) for name in page.spaces)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
        matching = sorted(n for n in seen if all(_matches(n, c.match_type, c.path) for c in conditions))
        if op.max_depth is not None:
            matching = sorted({n[: op.max_depth] for n in matching})
        return list(matching[op.offset : op.offset + op.limit])

    def _spaces(self, prefix: tuple[str, ...]) -> list[str | None]:
        if prefix:
            return [space_of(prefix)]
        return list(self.roots) or [None]

    def _text(self, value: dict[str, Any], index: Any) -> str:
        fields = index if isinstance(index, list) and index else self.fields
        parts = [t for path in fields for t in get_text_at_path(value, path) if t]
        text = "\n".join(parts).strip()
        if not text:  # the fields named are absent: the whole value still gives the memory a text
            text = "\n".join(get_text_at_path(value, WHOLE_VALUE))
        return text


def _key(key: str) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidInput("an item's key is a non-empty string")
    if len(key) > MAX_KEY_CHARS:
        raise InvalidInput(f"an item's key is at most {MAX_KEY_CHARS} characters, this one has {len(key)}")
    return key


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _applied(result: Any) -> None:
    """A write the store made: a held one (nothing applied yet) is raised, with its ``held``."""
    if result is not None and not isinstance(result, Memory):
        raise HeldForApproval(
            f"esfis held this write for a person (approval {result.id}); nothing is applied until "
            "the operator approves it: wait on the error's held, or withdraw it",
            held=result,
        )


def _item(found: Recalled, kind: type[Item], **extra: Any) -> Any:
    data = found.data
    created, value = data.get("created_at"), data.get("value")
    return kind(
        namespace=namespace_of(found.space or ""),
        key=str(data.get("key", found.id)),
        value=value if isinstance(value, dict) else {"text": found.text},
        created_at=datetime.fromisoformat(created) if isinstance(created, str) else found.created_at,
        updated_at=found.created_at,
        **extra,
    )


def _under(found: Recalled, prefix: tuple[str, ...]) -> bool:
    if found.space is None:  # a personal memory reaches every caller; no namespace names personal
        return False
    return namespace_of(found.space)[: len(prefix)] == prefix


def _literal_head(path: Sequence[str]) -> list[str]:
    head = []
    for label in path:
        if label == "*":
            break
        head.append(label)
    return head


def _matches(namespace: tuple[str, ...], how: str, path: Sequence[str]) -> bool:
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if how == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part))


def _with_namespace(error: EsfisError, ask: Ask) -> EsfisError:
    space = ask.kwargs.get("space")
    if space is not None and isinstance(error, Forbidden | NotFound):
        error.message = f"namespace {namespace_of(space)!r} (esfis space {space!r}): {error.message}"
        error.args = (error.message,)
    return error


def _drive(steps: Steps, client: Esfis) -> Result:
    try:
        ask = next(steps)
        while True:
            try:
                answer = getattr(client, ask.verb)(*ask.args, **ask.kwargs)
            except EsfisError as error:
                raise _with_namespace(error, ask) from None
            ask = steps.send(answer)
    except StopIteration as done:
        return done.value


async def _adrive(steps: Steps, client: AsyncEsfis) -> Result:
    try:
        ask = next(steps)
        while True:
            try:
                answer = await getattr(client, ask.verb)(*ask.args, **ask.kwargs)
            except EsfisError as error:
                raise _with_namespace(error, ask) from None
            ask = steps.send(answer)
    except StopIteration as done:
        return done.value


__all__ = ["EsfisStore", "space_of", "namespace_of", "MAX_KEY_CHARS"]
