"""delaystream for Python: schedule into, and consume from, delaystream queues on Redis.

The same queues as the Go library (github.com/delaystream/delaystream), with
the same Lua scripts and the same guarantees: a message scheduled here is
delivered once to every consumer group, Go or Python; a Python consumer's
work shows in the Go operator tools as a Go consumer's. The wire format is
the Go repository's docs/wire.md.

    import redis, delaystream

    r = redis.Redis()
    q = delaystream.Queue(r, "orders")
    q.schedule({"order": 5001}, id="order:5001:cancel", after=30 * 60)
"""

from ._wire import MAX_HEADERS, RESERVED_HEADER_PREFIX, WireError, shard_of
from .consumer import Consumer, Counters, Delivery, constant_backoff, exponential_backoff
from .errors import (
    DataLost,
    DeadLetter,
    DelaystreamError,
    Drop,
    Duplicate,
    HandlerOutcome,
    InvalidMessage,
    Retry,
    ShardCountError,
    Snooze,
    Unsupported,
)
from .locate import Location, Place
from .producer import AsyncQueue, Message, Queue, Scheduled, Waiting
from .retryafter import parse_retry_after

__version__ = "1.0.0"

__all__ = [
    "AsyncQueue",
    "Consumer",
    "Counters",
    "DataLost",
    "DeadLetter",
    "DelaystreamError",
    "Delivery",
    "Drop",
    "Duplicate",
    "HandlerOutcome",
    "InvalidMessage",
    "Location",
    "MAX_HEADERS",
    "Message",
    "Place",
    "Queue",
    "RESERVED_HEADER_PREFIX",
    "Retry",
    "Scheduled",
    "ShardCountError",
    "Snooze",
    "Unsupported",
    "Waiting",
    "WireError",
    "constant_backoff",
    "exponential_backoff",
    "parse_retry_after",
    "shard_of",
]
