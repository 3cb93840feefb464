"""A memory's data: a small JSON object its writer sets, for recall's filter to select by
(``server.memories.data_filter``).

The catalog keeps it beside the memory (``memories.data``) as compact JSON, NULL when there is
none: most memories carry none, and a filter reads only the rows that do. The limits are
``server.inputs``' (size as compact JSON, depth, keys at the top, a key's name); a key may not
start with ``$``, so a filter's operators (``$eq``, ``$in``, …) never name a key. Forget clears
it with the text (``server.memories.forgetting``).
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from server.errors import InvalidInput
from server.inputs import MAX_DATA_BYTES, MAX_DATA_DEPTH, MAX_DATA_KEY_CHARS, MAX_DATA_KEYS, size

Data = dict[str, Any]  # a JSON object: str keys; str, int, float, bool, None, list or Data values


def check_data(value: object, *, field: str = "data") -> Data:
    """``value`` as a memory's data ({} for None), or ``InvalidInput`` naming what is wrong."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"{field} must be a JSON object, got {_kind(value)}", field=field)
    if len(value) > MAX_DATA_KEYS:
        raise InvalidInput(f"{field} has {len(value)} keys at the top; the limit is {MAX_DATA_KEYS}", field=field)
    _check_value(value, path=field, depth=1, field=field)
    stored = compact(value)
    if len(stored.encode("utf-8")) > MAX_DATA_BYTES:
        raise InvalidInput(
            f"{field} is {len(stored.encode('utf-8'))} bytes as compact JSON; the limit is {size(MAX_DATA_BYTES)}",
            field=field,
        )
    return value


def _check_value(value: object, *, path: str, depth: int, field: str) -> None:
    if isinstance(value, dict | list) and depth > MAX_DATA_DEPTH:
        raise InvalidInput(f"{path} is nested too deep: {field} may nest at most {MAX_DATA_DEPTH} levels", field=field)
    if isinstance(value, dict):
        for key, inner in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{path} has a key that is not a string: {key!r}", field=field)
            if not 1 <= len(key) <= MAX_DATA_KEY_CHARS:
                raise InvalidInput(
                    f"{path} has a key of {len(key)} characters; keys are 1 to {MAX_DATA_KEY_CHARS}", field=field
                )
            if key.startswith("$"):
                raise InvalidInput(f"{path} has the key {key!r}: a key may not start with $", field=field)
            _check_text(key, path=path, field=field)
            _check_value(inner, path=f"{path}.{key}", depth=depth + 1, field=field)
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            _check_value(inner, path=f"{path}[{i}]", depth=depth + 1, field=field)
    elif isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"{path} is {value}: JSON has no such number", field=field)
    elif isinstance(value, str):
        _check_text(value, path=path, field=field)
    elif value is not None and not isinstance(value, bool | int | float):
        raise InvalidInput(f"{path} is {_kind(value)}, not a JSON value", field=field)


def _check_text(text: str, *, path: str, field: str) -> None:
    if "\x00" in text:
        raise InvalidInput(f"{path} holds a NUL character", field=field)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{path} is not valid Unicode (it holds a lone surrogate)", field=field) from None


def compact(data: object) -> str:
    """The one written form (of data, and of a filter's values when matched against it): compact
    JSON, keys in the writer's order, non-ASCII kept."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def stored(data: Data | None) -> str | None:
    """What the catalog's ``data`` column holds: compact JSON, or NULL for none."""
    return compact(data) if data else None


def loaded(column: str | None) -> Data:
    """A catalog's ``data`` column as the object it holds ({} for NULL)."""
    return {} if column is None else json.loads(column)


MISSING: Any = object()  # what ``at_path`` finds where the data holds no such field


def at_path(data: Data, field: str) -> Any:
    """The value at ``field`` in ``data``: a key of it, else a dotted path through objects (a
    key that itself holds a dot is found first, as written); ``MISSING`` where there is none."""
    if field in data:
        return data[field]
    value: Any = data
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


def is_number(value: object) -> bool:
    """A finite JSON number; a boolean is none."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def instant(value: object) -> datetime | None:
    """``value`` as an instant, when it is a string in ISO 8601 with a timezone."""
    if not isinstance(value, str) or len(value) < 16 or not value[:4].isdigit():
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None and moment.utcoffset() is not None else None


def _kind(value: object) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )
