"""Errors raised by the delaystream client."""

from __future__ import annotations


class DelaystreamError(Exception):
    """The base of every error this package raises on its own."""


class InvalidMessage(DelaystreamError, ValueError):
    """A message, id or time the scripts must not be given; nothing was written."""


class Duplicate(DelaystreamError):
    """A message with this id is already waiting and the policy is ``"reject"``."""

    def __init__(self, msg_id: str, due_ms: int) -> None:
        super().__init__(f"delaystream: message {msg_id!r} is already waiting (due {due_ms} ms)")
        self.id, self.due_ms = msg_id, due_ms


class ShardCountError(DelaystreamError):
    """The queue's shard count recorded in Redis differs from the one given."""


class DataLost(DelaystreamError):
    """Redis lost the queue's data while this process used it (its epoch changed)."""


class Unsupported(DelaystreamError):
    """The group uses something this client does not implement (e.g. Go's flow limits)."""


# --- what a handler raises to say how its message ends -----------------------


class HandlerOutcome(Exception):
    """The base of the exceptions a handler raises to choose its message's outcome."""


class Retry(HandlerOutcome):
    """Retry after ``after`` seconds (a counted attempt: the group's max attempts apply).

    For an HTTP 429 or 503 with a Retry-After header:
    ``raise Retry(parse_retry_after(resp.headers["Retry-After"]), "rate limited")``.
    """

    def __init__(self, after: float, message: str = "retry requested") -> None:
        super().__init__(message)
        self.after = float(after)


class Snooze(HandlerOutcome):
    """Deliver again after ``after`` seconds without counting an attempt (the message waits, unfailed)."""

    def __init__(self, after: float) -> None:
        super().__init__(f"snoozed for {after} s")
        self.after = float(after)


class DeadLetter(HandlerOutcome):
    """Dead-letter the message now, with this error text ("handler asked to dead-letter")."""


class Drop(HandlerOutcome):
    """Acknowledge the message without handling it: counted as dropped, no retry, no dead letter."""
