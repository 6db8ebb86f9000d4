"""Scheduling into a delaystream queue: the same scripts and states as Go's Queue."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import _scripts as S
from . import _wire as W
from ._time import Delay, HasDue, Instant, from_ms, instant_ms, now_ms, when_arg
from .errors import DataLost, Duplicate, InvalidMessage, ShardCountError

#: Payload encodings for values that are not bytes; the queue's Go side
#: decodes them with the same codec (delaystream.WithCodec).
CODECS = ("msgpack", "json")
#: What a schedule does with an id already waiting.
POLICIES = {"keep": "k", "replace": "r", "reject": "e"}
_OUTCOMES = {1: "created", 2: "replaced", 3: "kept", 4: "rejected"}
DEFAULT_MAX_PAYLOAD = 1 << 20
DEFAULT_BATCH_SIZE = 500
MAX_BATCH_SIZE = 5000


def encode_payload(value: Any, codec: str) -> bytes:
    """Bytes as they are; anything else with the codec ("msgpack" or "json")."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if codec == "msgpack":
        import msgpack

        return msgpack.packb(value, use_bin_type=True)
    if codec == "json":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raise InvalidMessage(f"delaystream: unknown codec {codec!r} (one of {', '.join(CODECS)})")


@dataclass
class Message:
    """One message of :meth:`Queue.schedule_batch`; the fields are those of :meth:`Queue.schedule`."""

    payload: Any = b""
    id: Optional[str] = None
    after: Optional[Delay] = None
    at: Optional[Instant] = None
    headers: Optional[Mapping[str, str]] = None
    policy: Optional[str] = None
    deadline: Optional[Instant] = None


@dataclass(frozen=True)
class Scheduled(HasDue):
    """What scheduling did with one message.

    ``outcome`` is ``"created"``, ``"replaced"``, ``"kept"`` or ``"rejected"``;
    ``due_ms`` is the stored due time (the waiting message's own when it was kept
    or rejected).
    """

    id: str
    due_ms: int
    outcome: str


@dataclass(frozen=True)
class Waiting(HasDue):
    """A waiting message as :meth:`Queue.get` reads it."""

    id: str
    due_ms: int
    payload: bytes
    headers: Dict[str, str]
    attempt: int
    created_ms: int
    deadline_ms: int


@dataclass
class _Item:
    index: int
    shard: int
    id: str  # "" for a generated id
    rnd: bytes
    member: bytes  # the envelope, or the packed member of a generated id
    when: str
    relative: bool
    ms: int
    policy: str


@dataclass
class _Call:
    script: S.Script
    keys: List[str]
    args: List[Any]
    items: List[_Item]


def _token_ttl_ms(client: Any) -> int:
    """How long a call token must live for this client, 0 when it never re-sends a command.

    redis-py re-sends a command after a connection error only when told to
    (``retry``, ``retry_on_timeout``, ``retry_on_error``), and the Cluster client
    always may (``cluster_error_retry_attempts``). The token outlives every
    re-send: retries x (connect + write + read timeouts + 1 s) + 5 s, a missing
    timeout counted as 30 s (docs/wire.md, "Call tokens").
    """
    kw: Dict[str, Any] = {}
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        kw = dict(getattr(pool, "connection_kwargs", {}) or {})
    retries = 0
    if hasattr(client, "nodes_manager") or type(client).__name__ == "RedisCluster":
        retries = int(getattr(client, "cluster_error_retry_attempts", 3) or 0)
        kw = dict(getattr(getattr(client, "nodes_manager", None), "connection_kwargs", {}) or kw)
    retry = kw.get("retry")
    if retry is not None:
        retries = max(retries, int(getattr(retry, "_retries", 0) or 0))
    if kw.get("retry_on_timeout") or kw.get("retry_on_error"):
        retries = max(retries, 1)
    if retries <= 0:
        return 0
    connect = kw.get("socket_connect_timeout") or 30
    rw = kw.get("socket_timeout") or 30
    return int((retries * (connect + 2 * rw + 1) + 5) * 1000)


class _Core:
    """What the sync and async queues share: validation, call building, replies."""

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        prefix: str = "ds",
        shards: Optional[int] = None,
        codec: str = "msgpack",
        policy: str = "keep",
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        batch_size: int = DEFAULT_BATCH_SIZE,
        token_ttl_ms: Optional[int] = None,
    ) -> None:
        W.validate_name("prefix", prefix)
        W.validate_name("queue", name)
        if shards is not None and not (isinstance(shards, int) and 1 <= shards <= W.MAX_SHARDS):
            raise ValueError(f"delaystream: shards must be 1 to {W.MAX_SHARDS}, got {shards!r}")
        if codec not in CODECS:
            raise ValueError(f"delaystream: unknown codec {codec!r} (one of {', '.join(CODECS)})")
        if policy not in POLICIES:
            raise ValueError(f"delaystream: unknown policy {policy!r} (one of {', '.join(POLICIES)})")
        if not 1 <= max_payload <= 64 << 20:
            raise ValueError("delaystream: max_payload must be 1 B to 64 MiB")
        if not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise ValueError(f"delaystream: batch_size must be 1 to {MAX_BATCH_SIZE}")
        self.client, self.name, self.prefix = client, name, prefix
        self.codec, self.policy, self.max_payload, self.batch_size = codec, policy, max_payload, batch_size
        self._shards = shards
        self._epoch: Optional[str] = None
        self._token_ttl = _token_ttl_ms(client) if token_ttl_ms is None else int(token_ttl_ms)
        self._keys: List[W.ShardKeys] = []

    # -- the queue's record ------------------------------------------------

    def _home(self) -> str:
        return W.home(self.prefix, self.name)

    def _meta_call(self, shards: int) -> Tuple[S.Script, List[str], List[Any]]:
        h = self._home()
        return S.META, [h + ":q", h + ":z", h + ":s"], [shards, secrets.token_hex(12)]

    def _meta_done(self, shards: int, reply: Sequence[Any]) -> None:
        count, epoch = int(reply[0]), _str(reply[1])
        if count == -1:
            raise ShardCountError(f"delaystream: queue {self.name!r}: the shard count recorded in Redis is not a count")
        if count != shards:
            raise ShardCountError(
                f"delaystream: queue {self.name!r} has {count} shard(s) in Redis, this queue was given {shards}"
            )
        if self._epoch is not None and epoch and epoch != self._epoch:
            raise DataLost(f"delaystream: queue {self.name!r}: Redis lost the queue's data (its epoch changed)")
        self._epoch = epoch or self._epoch
        self._shards = shards
        self._keys = [W.ShardKeys(self.prefix, self.name, i, shards) for i in range(shards)]

    @property
    def shards(self) -> Optional[int]:
        """The queue's shard count: as given, or as Redis records it once a call has run."""
        return self._shards

    def _sharded(self) -> bool:
        return len(self._keys) > 1

    def _wake(self, k: W.ShardKeys) -> str:
        return W.channel_arg(k.main().w, self._sharded())

    def _token(self, k: W.ShardKeys, keys: List[str], args: List[Any]) -> None:
        if self._token_ttl > 0:
            keys.append(k.token(secrets.token_hex(16)))
            args.append(self._token_ttl)

    # -- schedule ------------------------------------------------------------

    def _item(self, index: int, m: Message) -> _Item:
        if m.id is not None and m.id != "":
            W.validate_id(m.id)
        elif m.id == "":
            raise InvalidMessage("delaystream: empty id (leave it None for a generated one)")
        payload = encode_payload(m.payload, self.codec)
        if len(payload) > self.max_payload:
            raise InvalidMessage(f"delaystream: payload of {len(payload)} bytes exceeds {self.max_payload}")
        headers = W.validate_headers(m.headers)
        when, relative, ms = when_arg(m.after, m.at)
        deadline = 0
        if m.deadline is not None:
            deadline = instant_ms(m.deadline)
            due = now_ms() + ms if relative else ms
            if deadline <= due:
                raise InvalidMessage(f"delaystream: deadline {deadline} ms is not after the due time {due} ms")
        policy = POLICIES.get(m.policy or self.policy)
        if policy is None:
            raise InvalidMessage(f"delaystream: unknown policy {m.policy!r} (one of {', '.join(POLICIES)})")
        env = W.Envelope(payload=payload, headers=headers, attempt=1, created_ms=now_ms(), deadline_ms=deadline).encode()
        n = len(self._keys)
        if m.id:
            return _Item(index, W.shard_of(m.id, n), m.id, b"", env, when, relative, ms, policy)
        rnd = W.new_random_part()
        return _Item(index, W.shard_of_random(rnd, n), "", rnd, W.packed_member(rnd, env), when, relative, ms, policy)

    def _schedule_calls(self, messages: Sequence[Message]) -> List[_Call]:
        items = [self._item(i, m) for i, m in enumerate(messages)]
        by_shard: Dict[int, List[_Item]] = {}
        for it in items:
            by_shard.setdefault(it.shard, []).append(it)
        calls = []
        for shard, its in sorted(by_shard.items()):
            for start in range(0, len(its), self.batch_size):
                calls.append(self._schedule_call(self._keys[shard], its[start : start + self.batch_size]))
        return calls

    def _schedule_call(self, k: W.ShardKeys, items: List[_Item]) -> _Call:
        lane = k.main()
        args: List[Any] = [self._wake(k)]
        if all(not it.id for it in items):
            keys = [lane.z]
            for it in items:
                args += [it.member, it.when]
            # Nobody else knows a generated id, so a second run of a call
            # due far enough ahead only finds its messages waiting.
            spare = all(it.relative and it.ms >= 2 * self._token_ttl for it in items)
            if not spare:
                self._token(k, keys, args)
            return _Call(S.SCHEDULE_GENERATED, keys, args, items)
        keys = [lane.z, lane.m]
        for it in items:
            args += [it.id, it.member, it.when, it.policy]
        self._token(k, keys, args)
        return _Call(S.SCHEDULE, keys, args, items)

    @staticmethod
    def _schedule_results(call: _Call, reply: Sequence[Any], out: List[Optional[Scheduled]]) -> None:
        for j, it in enumerate(call.items):
            status, due = int(reply[2 * j]), int(reply[2 * j + 1])
            msg_id = it.id or W.generated_id(due, it.rnd)
            out[it.index] = Scheduled(msg_id, due, _OUTCOMES.get(status, "unknown"))

    # -- by id ---------------------------------------------------------------

    def _by_id(self, msg_id: str) -> W.ShardKeys:
        W.validate_id(msg_id)
        return self._keys[W.shard_of(msg_id, len(self._keys))]

    def _cancel_call(self, msg_id: str) -> Tuple[S.Script, List[str], List[Any]]:
        k = self._by_id(msg_id)
        keys: List[str] = [k.main().z, k.main().m]
        args: List[Any] = [msg_id]
        self._token(k, keys, args)
        return S.CANCEL, keys, args

    def _reschedule_call(self, msg_id: str, after: Optional[Delay], at: Optional[Instant]) -> Tuple[S.Script, List[str], List[Any]]:
        k = self._by_id(msg_id)
        when, _, _ = when_arg(after, at)
        keys: List[str] = [k.main().z, k.main().m]
        args: List[Any] = [msg_id, when, self._wake(k)]
        self._token(k, keys, args)
        return S.RESCHEDULE, keys, args

    def _get_call(self, msg_id: str) -> Tuple[S.Script, List[str], List[Any]]:
        k = self._by_id(msg_id)
        return S.GET, [k.main().z, k.main().m], [msg_id]

    @staticmethod
    def _waiting(msg_id: str, reply: Sequence[Any]) -> Optional[Waiting]:
        if not reply:
            return None
        due, raw = int(reply[0]), reply[1]
        if raw is None:
            return None  # an orphan the mover quarantines: not a waiting message
        env = W.Envelope.decode(raw)
        return Waiting(msg_id, due, env.payload, env.headers, env.attempt, env.created_ms, env.deadline_ms)


def _str(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class Queue(_Core):
    """A delaystream queue to schedule into, on a ``redis.Redis`` or ``redis.cluster.RedisCluster``.

    The queue's name, prefix and shard count are those of the Go side
    (``delaystream.New(rdb, name, delaystream.WithShards(n), delaystream.WithPrefix(p))``);
    ``shards=None`` reads the count Redis records for the queue (1 for a new one).
    Values that are not bytes are encoded with ``codec`` (``"msgpack"``, the Go
    default, or ``"json"``). Every method raises ``redis`` exceptions as they
    come; a call that failed may or may not have run, and sending it again
    (same arguments) acts once.
    """

    def _ready(self) -> None:
        if self._keys:
            return
        shards = self._shards
        if shards is None:
            v = self.client.hget(self._home() + ":q", "shards")
            shards = int(v) if v is not None and _str(v).isdigit() and int(v) >= 1 else 1
        script, keys, args = self._meta_call(shards)
        self._meta_done(shards, script(self.client, keys, args))

    def schedule(
        self,
        payload: Any = b"",
        *,
        id: Optional[str] = None,  # noqa: A002 - the message's id
        after: Optional[Delay] = None,
        at: Optional[Instant] = None,
        headers: Optional[Mapping[str, str]] = None,
        policy: Optional[str] = None,
        deadline: Optional[Instant] = None,
    ) -> Scheduled:
        """Schedule one message, due ``after`` seconds (or a timedelta) or ``at`` a time (default: now).

        ``id=None`` generates a unique id (returned). An id already waiting is
        kept, replaced or refused by ``policy`` (default the queue's, ``"keep"``);
        ``"reject"`` raises :class:`Duplicate`. ``deadline``: a group dead-letters
        the message unhandled after it.
        """
        res = self.schedule_batch([Message(payload, id, after, at, headers, policy, deadline)])[0]
        if res.outcome == "rejected":
            raise Duplicate(res.id, res.due_ms)
        return res

    def schedule_batch(self, messages: Iterable[Message]) -> List[Scheduled]:
        """Schedule many messages in one call per shard; results in order.

        Every message is checked before anything is sent: one bad message
        raises and nothing is written. A rejected duplicate is reported, not raised.
        """
        self._ready()
        msgs = list(messages)
        calls = self._schedule_calls(msgs)
        out: List[Optional[Scheduled]] = [None] * len(msgs)
        for c in calls:
            self._schedule_results(c, c.script(self.client, c.keys, c.args), out)
        return [r for r in out if r is not None]

    def cancel(self, id: str) -> bool:  # noqa: A002
        """Remove a waiting message; False when it is not waiting (unknown, or already promoted)."""
        self._ready()
        script, keys, args = self._cancel_call(id)
        return int(script(self.client, keys, args)) == 1

    def reschedule(self, id: str, *, after: Optional[Delay] = None, at: Optional[Instant] = None) -> Optional[datetime]:  # noqa: A002
        """Move a waiting message's due time; its new due time, or None when it is not waiting."""
        self._ready()
        script, keys, args = self._reschedule_call(id, after, at)
        due = int(script(self.client, keys, args))
        return None if due < 0 else from_ms(due)

    def get(self, id: str) -> Optional[Waiting]:  # noqa: A002
        """A waiting message's due time and envelope, or None when it is not waiting."""
        self._ready()
        script, keys, args = self._get_call(id)
        return self._waiting(id, script(self.client, keys, args))

    def locate(self, id: str) -> "Location":  # noqa: A002
        """Every place of the message id in the queue: waiting, in a stream, retrying, dead-lettered."""
        from .locate import locate

        self._ready()
        return locate(self, id)


class AsyncQueue(_Core):
    """:class:`Queue` for ``redis.asyncio`` clients; the same arguments and results, awaited."""

    async def _ready(self) -> None:
        if self._keys:
            return
        shards = self._shards
        if shards is None:
            v = await self.client.hget(self._home() + ":q", "shards")
            shards = int(v) if v is not None and _str(v).isdigit() and int(v) >= 1 else 1
        script, keys, args = self._meta_call(shards)
        self._meta_done(shards, await script.run_async(self.client, keys, args))

    async def schedule(
        self,
        payload: Any = b"",
        *,
        id: Optional[str] = None,  # noqa: A002
        after: Optional[Delay] = None,
        at: Optional[Instant] = None,
        headers: Optional[Mapping[str, str]] = None,
        policy: Optional[str] = None,
        deadline: Optional[Instant] = None,
    ) -> Scheduled:
        """See :meth:`Queue.schedule`."""
        res = (await self.schedule_batch([Message(payload, id, after, at, headers, policy, deadline)]))[0]
        if res.outcome == "rejected":
            raise Duplicate(res.id, res.due_ms)
        return res

    async def schedule_batch(self, messages: Iterable[Message]) -> List[Scheduled]:
        """See :meth:`Queue.schedule_batch`."""
        await self._ready()
        msgs = list(messages)
        calls = self._schedule_calls(msgs)
        out: List[Optional[Scheduled]] = [None] * len(msgs)
        for c in calls:
            self._schedule_results(c, await c.script.run_async(self.client, c.keys, c.args), out)
        return [r for r in out if r is not None]

    async def cancel(self, id: str) -> bool:  # noqa: A002
        """See :meth:`Queue.cancel`."""
        await self._ready()
        script, keys, args = self._cancel_call(id)
        return int(await script.run_async(self.client, keys, args)) == 1

    async def reschedule(self, id: str, *, after: Optional[Delay] = None, at: Optional[Instant] = None) -> Optional[datetime]:  # noqa: A002
        """See :meth:`Queue.reschedule`."""
        await self._ready()
        script, keys, args = self._reschedule_call(id, after, at)
        due = int(await script.run_async(self.client, keys, args))
        return None if due < 0 else from_ms(due)

    async def get(self, id: str) -> Optional[Waiting]:  # noqa: A002
        """See :meth:`Queue.get`."""
        await self._ready()
        script, keys, args = self._get_call(id)
        return self._waiting(id, await script.run_async(self.client, keys, args))

