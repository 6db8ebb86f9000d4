"""Due times: ``after`` and ``at`` turned into the scripts' "r<ms>" and "a<ms>"."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Optional, Tuple, Union

from ._wire import MAX_DUE_MS
from .errors import InvalidMessage

Delay = Union[int, float, Decimal, timedelta]
Instant = Union[int, float, Decimal, datetime]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def delay_ms(after: Delay) -> int:
    """A delay in whole ms, rounded up; seconds when a number."""
    if isinstance(after, timedelta):
        us = (after.days * 86400 + after.seconds) * 1_000_000 + after.microseconds
        if us < 0:
            raise InvalidMessage(f"delaystream: negative delay {after}")
        return -(-us // 1000)
    if isinstance(after, bool) or not isinstance(after, (int, float, Decimal)):
        raise TypeError(f"delaystream: after must be seconds or a timedelta, got {type(after).__name__}")
    if not math.isfinite(after) or after < 0:
        raise InvalidMessage(f"delaystream: delay {after!r} s is negative or not finite")
    ms = math.ceil(Decimal(str(after)) * 1000) if isinstance(after, float) else math.ceil(Decimal(after) * 1000)
    if ms > MAX_DUE_MS:
        raise InvalidMessage(f"delaystream: delay {after!r} s reaches beyond year 9999")
    return ms


def instant_ms(at: Instant) -> int:
    """An absolute time in Unix ms, rounded up, never below 0.

    A naive datetime is refused: its zone would be a guess.
    """
    if isinstance(at, datetime):
        if at.tzinfo is None or at.tzinfo.utcoffset(at) is None:
            raise InvalidMessage("delaystream: at is a naive datetime; give it a time zone (datetime.now(timezone.utc))")
        d = at - _EPOCH
        us = (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
        ms = -(-us // 1000)
    elif isinstance(at, bool) or not isinstance(at, (int, float, Decimal)):
        raise TypeError(f"delaystream: at must be a datetime or Unix seconds, got {type(at).__name__}")
    else:
        if not math.isfinite(at):
            raise InvalidMessage(f"delaystream: at {at!r} is not finite")
        ms = math.ceil(Decimal(str(at)) * 1000) if isinstance(at, float) else math.ceil(Decimal(at) * 1000)
    if ms > MAX_DUE_MS:
        raise InvalidMessage(f"delaystream: due time {at!r} is after year 9999")
    return max(ms, 0)


def when_arg(after: Optional[Delay], at: Optional[Instant]) -> Tuple[str, bool, int]:
    """The scripts' when argument, whether it is relative, and its ms."""
    if after is not None and at is not None:
        raise InvalidMessage("delaystream: give after or at, not both")
    if at is not None:
        ms = instant_ms(at)
        return f"a{ms}", False, ms
    ms = delay_ms(after if after is not None else 0)
    return f"r{ms}", True, ms


def from_ms(ms: int) -> datetime:
    """Unix ms as an aware UTC datetime."""
    return _EPOCH + timedelta(milliseconds=ms)


def now_ms() -> int:
    return int(datetime.now(timezone.utc).timestamp() * 1000)


class HasDue:
    """A record with ``due_ms`` (Unix ms) that also reads it as an aware UTC datetime."""

    due_ms: int

    @property
    def due(self) -> datetime:
        return from_ms(self.due_ms)
