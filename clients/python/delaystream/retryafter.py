"""Parsing an HTTP Retry-After header (Go's ParseRetryAfter)."""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Optional


def parse_retry_after(value: str, now: Optional[float] = None) -> float:
    """Seconds to wait from a Retry-After header: delay-seconds or an HTTP date (RFC 9110 10.2.3).

    A date in the past gives 0. Raises ValueError for anything else.
    """
    v = value.strip()
    if v.isdigit():
        return float(int(v))
    try:
        at = parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError) as e:
        raise ValueError(f"delaystream: Retry-After {value!r} is neither seconds nor an HTTP date") from e
    if at is None or at.tzinfo is None:
        raise ValueError(f"delaystream: Retry-After {value!r} is neither seconds nor an HTTP date")
    now = time.time() if now is None else now
    return max(at.timestamp() - now, 0.0)
