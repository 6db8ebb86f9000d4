"""Consuming a delaystream queue as one consumer of a group, beside Go consumers.

The consumer follows docs/wire.md's "Consumer obligations": it settles only
through the Go module's scripts and the commands named there, so a group's
Go consumers, its dead letters and the operator tools (``delaystream
locate``, ``dlq``, the web view) see its work as a Go consumer's.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import secrets
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from redis.exceptions import ResponseError

from . import _raw
from . import _scripts as S
from . import _wire as W
from ._subscriber import Subscriber
from ._time import HasDue
from .errors import DataLost, DeadLetter, Drop, Retry, ShardCountError, Snooze, Unsupported

log = logging.getLogger("delaystream")

#: Dead-letter reasons, as Go writes them (field ``r``).
REASON_ATTEMPTS = "attempts exhausted"
REASON_DELIVERIES = "max deliveries exceeded"
REASON_HANDLER = "handler asked to dead-letter"
REASON_UNDECODABLE = "undecodable entry"
REASON_DELETED = "entry deleted while pending"
REASON_EXPIRED = "expired"

_LEASE_TTL_MS = 1250
_MOVER_TTL_MS = _LEASE_TTL_MS - _LEASE_TTL_MS // 3
_PROMOTE_LIMIT = 256
_RECLAIM_EVERY = 1.0
_TRIM_EVERY = 5.0
_PAUSE_EVERY = 5.0
_STALE_EVERY = 300.0
_STALE_IDLE_MS = 3_600_000
_HEAD_EVERY = 60.0
_HAND_BACK_EXTRA_MS = 86_400_000


def exponential_backoff(base: float = 1.0, limit: float = 600.0) -> Callable[[int], float]:
    """Go's ExponentialBackoff: before attempt a >= 2, base * 2**(a-2) capped at limit, within -20 %..+20 % (never above limit)."""

    def backoff(attempt: int) -> float:
        d = min(base, limit)
        if d <= 0:
            return 0.0
        for _ in range(2, attempt):
            if d >= limit:
                break
            d = limit if d > limit / 2 else d * 2
        lo = d - d / 5
        return lo + random.uniform(0, min(d / 5 * 2, limit - lo))

    return backoff


def constant_backoff(seconds: float) -> Callable[[int], float]:
    """The same wait before every retry."""
    return lambda attempt: seconds


@dataclass
class Delivery(HasDue):
    """One message as a handler receives it (Go's ``delaystream.Delivery``).

    ``cancelled`` is set when the handler should give up: another consumer took
    its entry over (its hold lapsed), or the consumer stopped and the drain
    timeout passed. A handler that goes on anyway is not killed; its result
    is then discarded. Times are Unix ms (0: none).
    """

    id: str
    payload: bytes
    headers: Dict[str, str]
    attempt: int
    deliveries: int
    due_ms: int
    created_ms: int
    deadline_ms: int
    group: str
    stream: str
    entry_id: str
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False)

    def json(self) -> Any:
        """The payload decoded as JSON."""
        return json.loads(self.payload)

    def msgpack(self) -> Any:
        """The payload decoded as msgpack (Go's default codec)."""
        import msgpack

        return msgpack.unpackb(self.payload, raw=False)


@dataclass
class Counters:
    """What this consumer did since it was built."""

    handled: int = 0
    dropped: int = 0
    retried: int = 0
    snoozed: int = 0
    dead_lettered: int = 0
    reclaimed: int = 0
    lost: int = 0
    handed_back: int = 0


@dataclass
class _Flight:
    shard: int
    stream: str
    retry_lane: bool
    entry_id: str
    fields: Dict[bytes, bytes]
    deliveries: int
    started: bool = False
    done: bool = False
    extended: float = 0.0
    delivery: Optional[Delivery] = None
    cancelled: threading.Event = field(default_factory=threading.Event)


def _default_name() -> str:
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:64] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


def _s(v: Any) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else ("" if v is None else str(v))


def _b(v: Any) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogateescape")


class Consumer:
    """One consumer of a group of a delaystream queue, handling messages on threads.

    ``handler(delivery)`` returning settles the message as handled; raising
    :class:`~delaystream.Retry`, :class:`~delaystream.Snooze`,
    :class:`~delaystream.DeadLetter` or :class:`~delaystream.Drop` chooses the
    outcome; any other exception retries with ``backoff`` until
    ``max_attempts``, then dead-letters. The options are those of the Go group
    (``WithVisibilityTimeout``, ``WithMaxAttempts``...) with the same
    defaults; every consumer of one group must use the same ones.

    By default the consumer also moves the queue's due messages into its
    stream (as a Go consumer does), so a queue with only Python consumers
    delivers; ``move=False`` leaves that to other processes. It always
    promotes its own group's retries.
    """

    def __init__(
        self,
        client: Any,
        queue: str,
        group: str,
        handler: Callable[[Delivery], Any],
        *,
        name: Optional[str] = None,
        prefix: str = "ds",
        shards: Optional[int] = None,
        concurrency: int = 8,
        visibility_timeout: float = 2.0,
        max_attempts: int = 10,
        max_deliveries: int = 5,
        backoff: Callable[[int], float] = exponential_backoff(),
        dead_letter_cap: int = 0,
        drain_timeout: float = 10.0,
        start_from: str = "oldest",
        poll_interval: float = 1.0,
        keep_handled: Optional[float] = None,
        history: bool = True,
        move: bool = True,
    ) -> None:
        for kind, v in (("prefix", prefix), ("queue", queue), ("group", group)):
            W.validate_name(kind, v)
        self.name = name or _default_name()
        W.validate_name("consumer", self.name)
        if not callable(handler):
            raise TypeError("delaystream: handler must be callable")
        if shards is not None and not 1 <= shards <= W.MAX_SHARDS:
            raise ValueError(f"delaystream: shards must be 1 to {W.MAX_SHARDS}")
        if not 1 <= concurrency <= 10000:
            raise ValueError("delaystream: concurrency must be 1 to 10000")
        if visibility_timeout < 0.1:
            raise ValueError("delaystream: visibility_timeout must be at least 0.1 s")
        if max_attempts < 1 or max_deliveries < 1:
            raise ValueError("delaystream: max_attempts and max_deliveries must be at least 1")
        if start_from not in ("oldest", "newest"):
            raise ValueError('delaystream: start_from is "oldest" or "newest"')
        if keep_handled is not None and keep_handled <= 0:
            raise ValueError("delaystream: keep_handled must be a positive number of seconds")
        _check_bytes_client(client)
        self.client, self.queue, self.group, self.handler = client, queue, group, handler
        self.prefix, self._shards = prefix, shards
        self.concurrency, self.visibility = concurrency, visibility_timeout
        self.max_attempts, self.max_deliveries, self.backoff = max_attempts, max_deliveries, backoff
        self.dead_letter_cap, self.drain_timeout = dead_letter_cap, drain_timeout
        self.start_from, self.poll_interval = start_from, poll_interval
        self.keep_handled, self.history, self.move = keep_handled, history, move
        self.counters = Counters()
        self._keys: List[W.ShardKeys] = []
        self._held: Dict[Tuple[str, str], _Flight] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._stopping = False
        self._done = threading.Event()
        self._dirty: set = set()
        self._retry_due: Dict[int, float] = {}
        self._main_due: Dict[int, float] = {}
        self._owned: List[int] = []
        self._lease = secrets.token_hex(12)
        self._mover_token = secrets.token_hex(12)
        self._beat_now = False
        self._settled_streams: set = set()
        self._channels: Dict[str, Tuple[str, int]] = {}
        self._paused = False
        self._next_pause = 0.0
        self._epoch = ""
        self._executor: Optional[ThreadPoolExecutor] = None
        self._sub: Optional[Subscriber] = None

    # -- public ----------------------------------------------------------------

    def run(self) -> None:
        """Consume until :meth:`stop` is called (or an error it cannot go on after), then stop cleanly."""
        try:
            self._start()
            self._loop()
        finally:
            self._shutdown()

    def stop(self) -> None:
        """Ask :meth:`run` to stop: no more reads; running handlers get ``drain_timeout`` to finish."""
        self._stop.set()
        self._wake.set()

    def wait_stopped(self, timeout: Optional[float] = None) -> bool:
        """Wait until :meth:`run` has returned."""
        return self._done.wait(timeout)

    # -- start -----------------------------------------------------------------

    def _sharded(self) -> bool:
        return len(self._keys) > 1

    def _start(self) -> None:
        home = W.home(self.prefix, self.queue)
        shards = self._shards
        if shards is None:
            v = self.client.hget(home + ":q", "shards")
            shards = int(v) if v is not None and _s(v).isdigit() and int(v) >= 1 else 1
        reply = S.META(self.client, [home + ":q", home + ":z", home + ":s"], [shards, secrets.token_hex(12)])
        if int(reply[0]) != shards:
            raise ShardCountError(f"delaystream: queue {self.queue!r} has {reply[0]} shard(s) in Redis, this consumer was given {shards}")
        self._epoch = _s(reply[1])
        self._keys = [W.ShardKeys(self.prefix, self.queue, i, shards) for i in range(shards)]
        start_id = "0" if self.start_from == "oldest" else "$"
        for k in self._keys:
            for stream in (k.main().s, k.retry(self.group).s):
                self._create_group(stream, start_id)
            self.client.sadd(k.groups(), self.group)
        self._check_pause()
        sharded = self._sharded()
        chans: List[Tuple[str, bool]] = []
        for i, k in enumerate(self._keys):
            main, retry = k.main(), k.retry(self.group)
            self._channels[main.n] = ("arrival", i)
            self._channels[retry.n] = ("arrival", i)
            self._channels[retry.w] = ("retry-wake", i)
            chans += [(main.n, sharded), (retry.n, sharded), (retry.w, sharded)]
            if self.move:
                self._channels[main.w] = ("main-wake", i)
                chans.append((main.w, sharded))
        chans.append((self._keys[0].presence(self.group, self.name), True))
        if self.move and sharded:
            self._channels[home + ":o:w"] = ("movers", 0)
            chans.append((home + ":o:w", False))
        self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="delaystream-handler")
        self._sub = Subscriber(self.client, chans, self._notice, self._look_everywhere)
        self._sub.start()
        if self.move and sharded:
            self._beat()
        elif self.move:
            self._owned = [0]

    def _create_group(self, stream: str, start_id: str) -> None:
        try:
            self.client.xgroup_create(stream, self.group, id=start_id, mkstream=True)
        except ResponseError as e:
            msg = str(e)
            if "BUSYGROUP" in msg:
                return
            if msg.startswith("OOM") and any(_s(g.get("name")) == self.group for g in self.client.xinfo_groups(stream)):
                return
            raise

    def _look_everywhere(self) -> None:
        now = time.monotonic()
        with self._lock:
            self._dirty = set(range(len(self._keys)))
            self._retry_due = {i: now for i in range(len(self._keys))}
            self._main_due = {i: now for i in range(len(self._keys))}
            self._beat_now = True
        self._wake.set()

    def _notice(self, channel: str, payload: bytes) -> None:
        kind, shard = self._channels.get(channel, ("", 0))
        now = time.monotonic()
        with self._lock:
            if kind == "arrival":
                p = _s(payload)
                if p == "p":
                    self._next_pause = 0.0
                elif p.startswith("f:"):
                    pass
                else:
                    self._dirty.add(shard)
            elif kind in ("retry-wake", "main-wake"):
                due = self._retry_due if kind == "retry-wake" else self._main_due
                try:
                    ms = int(payload)
                except ValueError:
                    return
                at = now if ms == 0 else now + max(ms / 1000 - time.time(), 0)
                due[shard] = min(due.get(shard, at), at)
            elif kind == "movers":
                self._beat_now = True
        self._wake.set()

    # -- the loop ---------------------------------------------------------------

    def _loop(self) -> None:
        now = time.monotonic()
        nxt = {"reclaim": now, "trim": now + _TRIM_EVERY, "pause": now + _PAUSE_EVERY, "extend": now,
               "poll": now, "beat": now + _MOVER_TTL_MS / 3000, "stale": now + _STALE_EVERY}
        self._next_pause = nxt["pause"]
        while not self._stop.is_set():
            self._wake.clear()
            now = time.monotonic()
            if now >= self._next_pause:
                self._check_pause()
                self._next_pause = now + _PAUSE_EVERY
            if self.move and self._sharded() and (self._beat_now or now >= nxt["beat"]):
                self._beat()
                nxt["beat"] = now + _MOVER_TTL_MS / 3000
            self._promote_due(now)
            if now >= nxt["extend"]:
                self._extend()
                nxt["extend"] = now + self.visibility / 3
            if self._paused:
                self._wait(min(nxt.values()) - now)
                continue
            if now >= nxt["reclaim"]:
                self._reclaim()
                nxt["reclaim"] = now + _RECLAIM_EVERY
            if now >= nxt["poll"]:
                with self._lock:
                    self._dirty = set(range(len(self._keys)))
                nxt["poll"] = now + self.poll_interval
            self._read()
            if now >= nxt["trim"]:
                self._trim()
                nxt["trim"] = now + _TRIM_EVERY
            if now >= nxt["stale"]:
                self._remove_stale()
                nxt["stale"] = now + _STALE_EVERY
            soonest = min(list(nxt.values()) + list(self._retry_due.values()) + [self._main_due.get(i, now + 60) for i in self._owned])
            self._wait(soonest - time.monotonic())

    def _wait(self, seconds: float) -> None:
        # The loop cleared the event before its work: a notice that came
        # meanwhile ends this wait at once.
        if seconds > 0:
            self._wake.wait(min(seconds, 1.0))

    def _free(self) -> int:
        with self._lock:
            return self.concurrency - len(self._held)

    def _check_pause(self) -> None:
        k0 = self._keys[0]
        pipe = self.client.pipeline(transaction=False) if not _raw.is_cluster(self.client) else None
        if pipe is not None:
            pipe.hexists(k0.pause(), "group:" + self.group)
            pipe.hget(k0.flow(self.group), "limits")
            paused, limits = pipe.execute()
        else:
            paused = self.client.hexists(k0.pause(), "group:" + self.group)
            limits = self.client.hget(k0.flow(self.group), "limits")
        if limits is not None:
            raise Unsupported(
                f"delaystream: group {self.group!r} has flow limits (concurrency or rate, set by Go consumers); "
                "this client does not take slots and permits, so it would break them"
            )
        self._paused = bool(paused)

    # -- promotion -------------------------------------------------------------

    def _beat(self) -> None:
        home = W.home(self.prefix, self.queue)
        tokens = sorted(_s(t) for t in S.SCRIPTS["movers.lua"](
            self.client, [home + ":o"], [self._mover_token, _MOVER_TTL_MS, "beat", home + ":o:w"]))
        self._beat_now = False
        if self._mover_token not in tokens:
            self._owned = []
            return
        rank, n = tokens.index(self._mover_token), len(tokens)
        owned = [i for i in range(len(self._keys)) if i % n == rank]
        if owned != self._owned:
            now = time.monotonic()
            for i in owned:
                self._main_due[i] = now
            self._owned = owned

    def _promote_due(self, now: float) -> None:
        for i in range(len(self._keys)):
            if self._retry_due.get(i, now) <= now:
                self._retry_due[i] = self._promote(i, retry=True)
        for i in list(self._owned):
            if self._main_due.get(i, now) <= now:
                self._main_due[i] = self._promote(i, retry=False)

    def _promote(self, shard: int, retry: bool) -> float:
        """Promote one lane until its batch is not full; when to look at it next (monotonic)."""
        k = self._keys[shard]
        lane = k.retry(self.group) if retry else k.main()
        keys = [lane.z, lane.m, lane.s, lane.x, lane.l]
        token = self._lease if (retry or not self._sharded()) else ""
        if not retry:
            keys += [k.pause(), k.occurrences()]
            if self.history:
                keys += list(k.history(int(time.time()) // 60))
        args = [_PROMOTE_LIMIT, token, _LEASE_TTL_MS, W.HEADER, W.channel_arg(lane.n, self._sharded()), str(shard), "1"]
        for _ in range(64):
            try:
                moved, quarantined, nxt, now_us, lease = (int(x) for x in S.PROMOTE(self.client, keys, args))
            except Exception as e:  # noqa: BLE001 - logged, looked at again soon
                log.warning("delaystream: promoting %s failed: %s", lane.z, e)
                return time.monotonic() + 1.0
            if lease >= 0:  # another consumer holds the lane: look again when its lease ends
                return time.monotonic() + max(lease, 10) / 1000
            if moved + quarantined < _PROMOTE_LIMIT:
                break
        if nxt < 0:
            return time.monotonic() + _HEAD_EVERY
        return time.monotonic() + max(nxt - now_us / 1000, 0) / 1000

    # -- reading ---------------------------------------------------------------

    def _read(self) -> None:
        with self._lock:
            dirty, self._dirty = self._dirty, set()
        for shard in sorted(dirty):
            free = self._free()
            if free <= 0 or self._stop.is_set():
                with self._lock:
                    self._dirty.add(shard)
                continue
            k = self._keys[shard]
            streams = {k.main().s: ">", k.retry(self.group).s: ">"}
            try:
                reply = self.client.xreadgroup(self.group, self.name, streams, count=free)
            except ResponseError as e:
                if "NOGROUP" in str(e):
                    self._recreate(shard)
                    continue
                raise
            n = 0
            for stream, entries in reply or []:
                for eid, fields in entries:
                    n += 1
                    self._dispatch(shard, _s(stream), _s(eid), fields or {}, 1)
            if n >= free:
                with self._lock:
                    self._dirty.add(shard)

    def _recreate(self, shard: int) -> None:
        home = W.home(self.prefix, self.queue)
        reply = S.META(self.client, [home + ":q", home + ":z", home + ":s"], [len(self._keys), secrets.token_hex(12)])
        if _s(reply[1]) != self._epoch:
            raise DataLost(f"delaystream: queue {self.queue!r}: Redis lost the queue's data (its epoch changed)")
        k = self._keys[shard]
        for stream in (k.main().s, k.retry(self.group).s):
            self._create_group(stream, "0")
        self.client.sadd(k.groups(), self.group)

    def _dispatch(self, shard: int, stream: str, eid: str, fields: Dict[Any, Any], deliveries: int) -> None:
        fl = _Flight(shard, stream, stream != self._keys[shard].main().s, eid,
                     {_b(k): _b(v) for k, v in fields.items()}, deliveries, extended=time.monotonic())
        with self._lock:
            if (stream, eid) in self._held:
                return
            self._held[(stream, eid)] = fl
        assert self._executor is not None
        self._executor.submit(self._handle, fl)

    # -- reclaiming --------------------------------------------------------------

    def _reclaim(self) -> None:
        vis_ms = int(self.visibility * 1000)
        for shard, k in enumerate(self._keys):
            for stream in (k.main().s, k.retry(self.group).s):
                cursor = "0-0"
                for _ in range(16):
                    free = self._free()
                    if free <= 0:
                        return
                    try:
                        reply = _raw.command(self.client, stream, "XAUTOCLAIM", stream, self.group, self.name,
                                             vis_ms, cursor, "COUNT", free)
                    except ResponseError as e:
                        if "NOGROUP" in str(e):
                            self._recreate(shard)
                        else:
                            log.warning("delaystream: reclaiming from %s failed: %s", stream, e)
                        break
                    cursor = _s(reply[0])
                    claimed = [e for e in reply[1] if e is not None]
                    deleted = [_s(x) for x in (reply[2] if len(reply) > 2 else [])]
                    for eid in deleted:
                        self._dead_deleted(shard, stream, eid)
                    self._take(shard, stream, claimed)
                    if cursor == "0-0":
                        break

    def _take(self, shard: int, stream: str, claimed: Sequence[Any]) -> None:
        entries = [(_s(e[0]), e[1]) for e in claimed if isinstance(e, list) and len(e) == 2 and e[1] is not None]
        if not entries:
            return
        counts: Dict[str, int] = {}
        try:
            pend = self.client.xpending_range(stream, self.group, entries[0][0], entries[-1][0], len(entries) * 2,
                                              consumername=self.name)
            counts = {_s(p["message_id"]): int(p["times_delivered"]) for p in pend}
        except Exception as e:  # noqa: BLE001 - counted as 2, as Go does
            log.warning("delaystream: reading delivery counts failed: %s", e)
        for eid, flat in entries:
            fields = dict(zip(flat[::2], flat[1::2])) if isinstance(flat, list) else flat
            self.counters.reclaimed += 1
            self._dispatch(shard, stream, eid, fields, counts.get(eid, 2))

    def _dead_deleted(self, shard: int, stream: str, eid: str) -> None:
        dead = self._keys[shard].dead(self.group)
        try:
            self.client.xadd(dead, {"r": REASON_DELETED, "s": stream, "o": eid})
            if self.dead_letter_cap > 0:
                self.client.xtrim(dead, maxlen=self.dead_letter_cap, approximate=False)
            self.counters.dead_lettered += 1
        except Exception as e:  # noqa: BLE001 - logged; the claim already took it
            log.error("delaystream: recording entry %s deleted while pending failed: %s", eid, e)

    # -- handling and settling ----------------------------------------------------

    def _handle(self, fl: _Flight) -> None:
        try:
            if self._stopping and not fl.started:
                self._hand_back(fl.stream, [fl.entry_id], max(fl.deliveries - 1, 0))
                return
            fl.started = True
            self._handle_one(fl)
        except Exception as e:  # noqa: BLE001 - the entry stays pending: reclaimed later
            log.error("delaystream: settling %s %s failed; it is reclaimed after the visibility timeout: %s",
                      fl.stream, fl.entry_id, e)
        finally:
            fl.done = True
            with self._lock:
                self._held.pop((fl.stream, fl.entry_id), None)
            self._wake.set()

    def _handle_one(self, fl: _Flight) -> None:
        try:
            entry = W.decode_entry(fl.entry_id, fl.fields)
        except W.WireError as e:
            self._dead_raw(fl, str(e))
            return
        env = entry.envelope
        d = Delivery(entry.id, env.payload, dict(env.headers), max(env.attempt, 1), fl.deliveries, entry.due_ms,
                     env.created_ms, env.deadline_ms, self.group, fl.stream, fl.entry_id, fl.cancelled)
        fl.delivery = d
        if env.deadline_ms and time.time() * 1000 > env.deadline_ms:
            self._dead(fl, d, env, REASON_EXPIRED, f"deadline {env.deadline_ms} ms passed")
            return
        if fl.deliveries > self.max_deliveries:
            self._dead(fl, d, env, REASON_DELIVERIES, f"delivered {fl.deliveries} times, at most {self.max_deliveries}")
            return
        try:
            self.handler(d)
            err: Optional[BaseException] = None
        except Exception as e:  # noqa: BLE001 - the handler's failure is the message's outcome
            err = e
        if fl.cancelled.is_set():
            self.counters.lost += 1
            log.warning("delaystream: handler of %s finished after losing its entry; its result is discarded", d.id)
            return
        self._settle(fl, d, env, err)

    def _settle(self, fl: _Flight, d: Delivery, env: W.Envelope, err: Optional[BaseException]) -> None:
        if err is None:
            self._ack(fl, d, True)
        elif isinstance(err, Drop):
            self._ack(fl, d, False)
        elif isinstance(err, DeadLetter):
            self._dead(fl, d, env, REASON_HANDLER, str(err))
        elif isinstance(err, Snooze):
            self._retry(fl, d, env, err.after, d.attempt, snooze=True)
        elif d.attempt >= self.max_attempts:
            self._dead(fl, d, env, REASON_ATTEMPTS, _err_text(err))
        else:
            wait = err.after if isinstance(err, Retry) else self.backoff(d.attempt + 1)
            if not isinstance(err, Retry):
                log.info("delaystream: handler of %s failed (attempt %d): %s", d.id, d.attempt, _err_text(err))
            self._retry(fl, d, env, wait, d.attempt + 1)

    def _history(self, k: W.ShardKeys) -> List[str]:
        return list(k.history(int(time.time()) // 60)) if self.history else []

    def _ack(self, fl: _Flight, d: Delivery, success: bool) -> None:
        k = self._keys[fl.shard]
        keys = [fl.stream] + self._history(k)
        args: List[Any] = [self.group, 1 if success else 0, 1, fl.entry_id]
        if self.keep_handled is not None:
            keys += list(k.handled(self.group))
            args += [int(self.keep_handled * 1000), self.name, d.id, d.attempt]
        if int(S.ACK(self.client, keys, args)) == 1:
            if success:
                self.counters.handled += 1
            else:
                self.counters.dropped += 1
        self._settled(fl)

    def _retry(self, fl: _Flight, d: Delivery, env: W.Envelope, wait: float, attempt: int, snooze: bool = False) -> None:
        k = self._keys[fl.shard]
        lane = k.retry(self.group)
        nxt = W.Envelope(env.payload, env.headers, attempt, env.created_ms, env.deadline_ms).encode()
        keys = [fl.stream, lane.z, lane.m] + self._history(k)
        args = [self.group, fl.entry_id, W.retry_member(d.id, fl.entry_id), nxt, max(int(wait * 1000), 0),
                W.channel_arg(lane.w, self._sharded())]
        due = int(S.RETRY(self.client, keys, args))
        if due >= 0:
            if snooze:
                self.counters.snoozed += 1
            else:
                self.counters.retried += 1
            with self._lock:
                at = time.monotonic() + max(due / 1000 - time.time(), 0)
                self._retry_due[fl.shard] = min(self._retry_due.get(fl.shard, at), at)
            self._settled(fl)

    def _dead(self, fl: _Flight, d: Delivery, env: W.Envelope, reason: str, text: str) -> None:
        fields: List[Any] = ["i", d.id, "d", str(d.due_ms), "e", env.encode(), "r", reason, "x", text,
                             "a", d.attempt, "n", d.deliveries, "s", fl.stream, "o", fl.entry_id]
        self._settle_dead(fl, fields)

    def _dead_raw(self, fl: _Flight, text: str) -> None:
        f = fl.fields
        fields: List[Any] = ["r", REASON_UNDECODABLE, "x", text, "n", fl.deliveries, "s", fl.stream, "o", fl.entry_id]
        packed = f.get(b"p")
        if packed is not None:
            due = f.get(b"d", b"")
            try:
                mid = W.generated_id(int(due), packed[1:17]) if len(packed) >= 17 and packed[0] == W.PACKED_KIND else None
            except ValueError:
                mid = None
            if mid is not None and W.is_generated_layout(mid.encode()):
                fields += ["i", mid, "d", due, "e", packed[17:]]
            else:
                fields += ["p", packed]
                fields += [x for name in (b"i", b"d", b"e") if name in f for x in (name.decode(), f[name])]
        else:
            fields += [x for name in (b"i", b"d", b"e") if name in f for x in (name.decode(), f[name])]
        self._settle_dead(fl, fields)

    def _settle_dead(self, fl: _Flight, fields: List[Any]) -> None:
        k = self._keys[fl.shard]
        keys = [fl.stream, k.dead(self.group)] + self._history(k)
        done, _ = S.DEAD(self.client, keys, [self.group, fl.entry_id, self.dead_letter_cap, *fields])
        if int(done) == 1:
            self.counters.dead_lettered += 1
            self._settled(fl)

    def _settled(self, fl: _Flight) -> None:
        with self._lock:
            self._settled_streams.add((fl.shard, fl.stream, fl.retry_lane))

    def _hand_back(self, stream: str, ids: List[str], retries: Optional[int]) -> None:
        args: List[Any] = ["XCLAIM", stream, self.group, self.name, 0, *ids, "IDLE",
                           int(self.visibility * 1000) + _HAND_BACK_EXTRA_MS]
        if retries is not None:
            args += ["RETRYCOUNT", retries]
        args.append("JUSTID")
        try:
            _raw.command(self.client, stream, *args)
            self.counters.handed_back += len(ids)
        except Exception as e:  # noqa: BLE001 - reclaimed after the visibility timeout instead
            log.warning("delaystream: handing entries back failed; they are reclaimed after the visibility timeout: %s", e)

    # -- holding -----------------------------------------------------------------

    def _extend(self) -> None:
        now = time.monotonic()
        with self._lock:
            flights = [f for f in self._held.values() if not f.done and now - f.extended >= self.visibility / 6]
        for fl in flights:
            try:
                ok = int(S.EXTEND(self.client, [fl.stream], [self.group, self.name, fl.entry_id]))
            except Exception as e:  # noqa: BLE001 - tried again at the next pass
                log.warning("delaystream: extending %s failed: %s", fl.entry_id, e)
                continue
            if ok == 1:
                fl.extended = now
            elif not fl.done:
                fl.cancelled.set()  # acknowledged or taken over: the handler's result is discarded

    # -- housekeeping ------------------------------------------------------------

    def _trim(self) -> None:
        with self._lock:
            streams, self._settled_streams = self._settled_streams, set()
        for shard, stream, retry_lane in streams:
            keys = [stream] if retry_lane else [stream, self._keys[shard].groups()]
            for _ in range(8):
                try:
                    reply = S.TRIM(self.client, keys, [0, 1000])
                except Exception as e:  # noqa: BLE001 - trimmed at a later pass
                    log.warning("delaystream: trimming %s failed: %s", stream, e)
                    break
                if len(reply) < 3 or int(reply[2]) != 1:
                    break

    def _remove_stale(self) -> None:
        for k in self._keys:
            for stream in (k.main().s, k.retry(self.group).s):
                try:
                    for c in self.client.xinfo_consumers(stream, self.group):
                        name = _s(c.get("name"))
                        if name != self.name and int(c.get("pending", 0)) == 0 and int(c.get("idle", 0)) > _STALE_IDLE_MS:
                            S.DELCONSUMER(self.client, [stream], [self.group, name])
                except Exception as e:  # noqa: BLE001 - tried again later
                    log.debug("delaystream: removing stale consumers of %s failed: %s", stream, e)

    # -- stopping ------------------------------------------------------------------

    def _shutdown(self) -> None:
        self._stopping = True
        try:
            deadline = time.monotonic() + self.drain_timeout
            while time.monotonic() < deadline:
                with self._lock:
                    if not self._held:
                        break
                self._extend()
                self._wake.wait(0.05)
                self._wake.clear()
            with self._lock:
                left = [f for f in self._held.values() if not f.done]
            by_stream: Dict[str, List[str]] = {}
            for fl in left:
                fl.cancelled.set()  # its result is discarded; the entry goes back now
                by_stream.setdefault(fl.stream, []).append(fl.entry_id)
            for stream, ids in by_stream.items():
                self._hand_back(stream, ids, None)
            self._release()
        finally:
            if self._sub is not None:
                self._sub.close()
            if self._executor is not None:
                self._executor.shutdown(wait=False)
            self._done.set()

    def _release(self) -> None:
        sharded = self._sharded()
        for i, k in enumerate(self._keys):
            lanes = [k.retry(self.group)] + ([k.main()] if self.move and not sharded and i in self._owned else [])
            for lane in lanes:
                try:
                    S.RELEASE(self.client, [lane.l], [self._lease, W.channel_arg(lane.w, sharded)])
                except Exception as e:  # noqa: BLE001 - the lease lapses by itself
                    log.debug("delaystream: releasing %s failed: %s", lane.l, e)
        if self.move and sharded:
            home = W.home(self.prefix, self.queue)
            try:
                S.SCRIPTS["movers.lua"](self.client, [home + ":o"], [self._mover_token, _MOVER_TTL_MS, "leave", home + ":o:w"])
            except Exception as e:  # noqa: BLE001 - the registration lapses by itself
                log.debug("delaystream: leaving the movers failed: %s", e)


def _err_text(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _check_bytes_client(client: Any) -> None:
    kw = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kw is None and _raw.is_cluster(client):
        kw = getattr(client.nodes_manager, "connection_kwargs", {})
    if kw and kw.get("decode_responses"):
        raise ValueError("delaystream: the client must not decode responses (decode_responses=False): payloads are bytes")
