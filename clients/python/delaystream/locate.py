"""Where a message is: the Python form of Go's ``Queue.Locate`` (locate.lua)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Optional, Sequence

from . import _scripts as S
from . import _wire as W
from ._time import from_ms

#: The most entries read from each stream, and members scanned per retry set.
LOCATE_SCAN_LIMIT = 10000
#: The most entries and members one script call reads.
LOCATE_BATCH = 500
_TRIES = 3

#: The kinds of :class:`Place` (Go's PlaceKind values).
KINDS = ("waiting", "unread", "ready", "pending", "retrying", "dead-lettered", "handled", "quarantined")


@dataclass
class Place:
    """One place of a message; which fields are set depends on ``kind``.

    ``group`` is empty for waiting, unread and the queue's own quarantine.
    ``entry_id`` is the stream entry's, the dead letter's (``<ms>-<seq>@<shard>``
    on a sharded queue), the failed entry's (retrying) or the quarantine
    entry's. Times are Unix ms (0: none).
    """

    kind: str
    group: str = ""
    entry_id: str = ""
    retry_lane: bool = False
    attempt: int = 0
    due_ms: int = 0
    problem: str = ""
    consumer: str = ""
    deliveries: int = 0
    idle_ms: int = 0
    reason: str = ""
    last_error: str = ""
    handled_at_ms: int = 0
    dropped: bool = False

    @property
    def due(self) -> Optional[datetime]:
        return from_ms(self.due_ms) if self.due_ms else None


@dataclass
class Location:
    """Every place of one message id in its shard; ``partial`` when a scan limit cut the search."""

    id: str
    shard: int
    places: List[Place] = field(default_factory=list)
    partial: bool = False

    @property
    def found(self) -> bool:
        return bool(self.places)

    def kinds(self) -> List[str]:
        return [p.kind for p in self.places]


def _s(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    return "" if v is None else str(v)


def _fields(v: Any) -> Dict[bytes, bytes]:
    flat = v if isinstance(v, list) else []
    out = {}
    for i in range(0, len(flat) - 1, 2):
        k, val = flat[i], flat[i + 1]
        out[k if isinstance(k, bytes) else _s(k).encode()] = val
    return out


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


class _Builder:
    def __init__(self, loc: Location, sharded: bool) -> None:
        self.loc, self.sharded = loc, sharded
        self.waiting: Optional[Place] = None
        self.unread: List[Place] = []
        self.groups: List[Place] = []
        self.quarantined: List[Place] = []

    def location(self) -> Location:
        if self.waiting is not None:
            self.loc.places.append(self.waiting)
        self.groups.sort(key=lambda p: p.group)
        self.loc.places += self.unread + self.groups + self.quarantined
        return self.loc

    def add_reply(self, reply: Sequence[Any]) -> str:
        if len(reply) != 4:
            raise RuntimeError(f"delaystream: locate: unexpected reply of {len(reply)} items")
        w = reply[0]
        if isinstance(w, list) and len(w) == 2:
            p = Place("waiting", due_ms=_int(w[0]))
            if w[1] is None:
                p.problem = "missing envelope"
            else:
                try:
                    p.attempt = W.Envelope.decode(w[1]).attempt
                except W.WireError:
                    p.problem = "unknown envelope format"
            self.waiting = p
        if _int(reply[1]) == 1:
            self.loc.partial = True
        for f in reply[2] or []:
            self.add(f)
        return _s(reply[3])

    def add(self, f: Any) -> None:
        if not isinstance(f, list) or len(f) != 5:
            return
        where, g, eid = _s(f[0]), _s(f[1]), _s(f[2])
        extra = f[4] if isinstance(f[4], list) else []
        if where == "stream":
            attempt = _attempt(eid, _fields(f[3]))
            if not extra:
                self.unread.append(Place("unread", entry_id=eid, attempt=attempt))
            for per in extra:
                if isinstance(per, list) and len(per) == 5:
                    self.entry(_s(per[0]), eid, False, attempt, per[1:])
        elif where == "retry-stream":
            self.entry(g, eid, True, _attempt(eid, _fields(f[3])), extra)
        elif where == "retry":
            self.retry(g, eid, f[3])
        elif where == "dead":
            self.dead(g, eid, _fields(f[3]))
        elif where == "handled":
            parts = _s(f[3]).split("|", 3)
            if len(parts) == 4 and parts[2] in ("handled", "dropped"):
                self.groups.append(Place("handled", group=g, handled_at_ms=_int(parts[0]), attempt=_int(parts[1]),
                                         dropped=parts[2] == "dropped", consumer=parts[3]))
        elif where == "quarantine":
            reason = _s(_fields(f[3]).get(b"r"))
            self.quarantined.append(Place("quarantined", group=g, entry_id=eid, reason=reason))

    def entry(self, g: str, eid: str, retry: bool, attempt: int, st: Sequence[Any]) -> None:
        if len(st) != 4:
            return
        state = _s(st[0])
        if state == "pending":
            self.groups.append(Place("pending", group=g, entry_id=eid, retry_lane=retry, attempt=attempt,
                                     consumer=_s(st[1]), idle_ms=_int(st[2]), deliveries=_int(st[3])))
        elif state == "ready":
            self.groups.append(Place("ready", group=g, entry_id=eid, retry_lane=retry, attempt=attempt))

    def retry(self, g: str, score: str, v: Any) -> None:
        p = Place("retrying", group=g)
        try:
            p.due_ms = int(float(score))
        except ValueError:
            pass
        if isinstance(v, list) and len(v) == 2:
            member = v[0] if isinstance(v[0], bytes) else _s(v[0]).encode()
            if W.RETRY_SEP in member:
                p.entry_id = _s(member.split(W.RETRY_SEP, 1)[1])
            if v[1] is not None:
                try:
                    p.attempt = W.Envelope.decode(v[1]).attempt
                except W.WireError:
                    pass
        self.groups.append(p)

    def dead(self, g: str, eid: str, fields: Dict[bytes, bytes]) -> None:
        if self.sharded:
            eid += f"@{self.loc.shard}"
        self.groups.append(Place("dead-lettered", group=g, entry_id=eid, attempt=_int(fields.get(b"a")),
                                 deliveries=_int(fields.get(b"n")), reason=_s(fields.get(b"r")),
                                 last_error=_s(fields.get(b"x"))))


def _attempt(eid: str, fields: Dict[bytes, bytes]) -> int:
    try:
        return W.decode_entry(eid, fields).envelope.attempt
    except W.WireError:
        return 0


def locate(q: Any, msg_id: str) -> Location:
    """Search the id's shard with locate.lua, in bounded calls (see Go's Queue.Locate)."""
    W.validate_id(msg_id)
    shard = W.shard_of(msg_id, len(q._keys))
    groups: List[str] = list(getattr(q, "_located", []))
    for _ in range(_TRIES):
        loc, recorded = _search(q, shard, msg_id, groups)
        if recorded is None:
            return loc
        groups = sorted(set(groups) | set(recorded))
        q._located = groups
    raise RuntimeError(f"delaystream: locate {msg_id}: the groups of shard {shard} changed during each of {_TRIES} searches")


def _search(q: Any, shard: int, msg_id: str, groups: List[str]):
    k: W.ShardKeys = q._keys[shard]
    main = k.main()
    keys = [k.groups(), main.z, main.m, main.s, main.x]
    for g in groups:
        r = k.retry(g)
        keys += [r.z, r.m, r.s, r.x, k.dead(g)]
    keys += [k.handled(g)[0] for g in groups]
    b = _Builder(Location(msg_id, shard), len(q._keys) > 1)
    cursor = ""
    while True:
        reply = S.LOCATE(q.client, keys, [msg_id, LOCATE_SCAN_LIMIT, LOCATE_BATCH, cursor, *groups])
        if len(reply) == 2 and _s(reply[0]) == "groups":
            return None, sorted(_s(n) for n in reply[1])
        cursor = b.add_reply(reply)
        if cursor == "":
            return b.location(), None
