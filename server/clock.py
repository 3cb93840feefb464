"""Time: timezone-aware UTC inside, microseconds since the epoch on disk.

A clock is injected into the service so tests can fix or move time. Validity intervals are
half-open, ``[valid_from, valid_until)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import overload

from server.errors import InvalidInput

Clock = Callable[[], datetime]
_RELATIVE = re.compile(r"^\+?(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def system_clock() -> datetime:
    return datetime.now(UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@overload
def from_micros(micros: int) -> datetime: ...
@overload
def from_micros(micros: None) -> None: ...
@overload
def from_micros(micros: int | None) -> datetime | None: ...
def from_micros(micros: int | None) -> datetime | None:
    if micros is None:
        return None
    return _EPOCH + timedelta(microseconds=micros)


@overload
def iso(moment: datetime) -> str: ...
@overload
def iso(moment: None) -> None: ...
def iso(moment: datetime | None) -> str | None:
    """The one way a time is written out: ISO 8601, UTC, with a Z."""
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def parse_time(value: str | datetime, *, now: datetime, field: str) -> datetime:
    """An ISO 8601 time (a naive one is read as UTC) or a duration from now: 30m, 12h, 7d, 2w."""
    if isinstance(value, datetime):
        moment = value
    else:
        text = value.strip()
        if match := _RELATIVE.match(text):
            try:
                return now + timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
            except OverflowError:
                raise InvalidInput(f"{field} {value!r} lies past the year 9999", field=field) from None
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(
                f"{field} must be an ISO 8601 time (2026-12-31T18:00:00Z) or a duration "
                f"such as 30m, 12h, 7d; got {value!r}",
                field=field,
            ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00-01:00 is past the last moment a datetime holds
        raise InvalidInput(f"{field} {value!r} lies past the year 9999", field=field) from None


def as_of_time(value: str | datetime, *, now: datetime) -> datetime:
    """A recall's ``as_of``: an ISO 8601 time (a naive one is read as UTC), not after ``now``."""
    if isinstance(value, str) and _RELATIVE.match(value.strip()):
        raise InvalidInput(
            f"as_of must be an ISO 8601 time such as 2026-03-31T18:00:00Z, not a duration; got {value!r}",
            field="as_of",
        )
    moment = parse_time(value, now=now, field="as_of")
    if moment > now:
        raise InvalidInput(f"as_of {iso(moment)} lies in the future (now is {iso(now)})", field="as_of")
    return moment
