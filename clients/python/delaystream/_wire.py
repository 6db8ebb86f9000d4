"""The wire format of docs/wire.md: keys, shard routing, ids, envelopes, entries.

Pure functions and plain data, no I/O: what every other module builds its
Redis calls from. Each function names the section of docs/wire.md it follows.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

LAYOUT_VERSION = 1
MAGIC = 0xD5
VERSION = 0x01
VERSION_DEADLINE = 0x02
#: The envelope header bytes every script that checks envelopes takes.
HEADER = b"\xd5\x01\x02"
PACKED_KIND = 0x01
RETRY_SEP = b"\x1f"
SLOTS = 16384
MAX_SHARDS = 1024
MAX_NAME_LEN = 128
MAX_ID_LEN = 256
MAX_HEADERS = 64
MAX_HEADER_LEN = 4096
MAX_DUE_MS = 253402300799999
RESERVED_HEADER_PREFIX = "ds."
_READ_MAX_HEADERS = 4096
_MAX_ATTEMPT = 2**31 - 1

CROCKFORD = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_CROCKFORD_SET = frozenset(CROCKFORD)


class WireError(ValueError):
    """Bytes found in Redis that do not follow the wire format."""


# --- names ---------------------------------------------------------------


def validate_name(kind: str, name: str) -> None:
    """Check a prefix, queue, group or consumer name (stream.ValidateName)."""
    if not isinstance(name, str):
        raise TypeError(f"delaystream: {kind} name must be str, got {type(name).__name__}")
    n = len(name.encode("utf-8", "surrogatepass"))
    if n == 0 or n > MAX_NAME_LEN:
        raise ValueError(f"delaystream: {kind} name must be 1 to {MAX_NAME_LEN} bytes, got {n}")
    for ch in name:
        if ch in "{}" or ch.isspace() or _is_control(ch) or _is_surrogate(ch):
            raise ValueError(f"delaystream: {kind} name {name!r} contains {ch!r} (no braces, spaces or control characters)")


def validate_id(msg_id: str) -> None:
    """Check a message id (delay.ValidateID): 1 to 256 bytes of UTF-8, no control character."""
    if not isinstance(msg_id, str):
        raise TypeError(f"delaystream: message id must be str, got {type(msg_id).__name__}")
    try:
        n = len(msg_id.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise ValueError(f"delaystream: message id {msg_id!r} is not valid UTF-8") from e
    if n == 0 or n > MAX_ID_LEN:
        raise ValueError(f"delaystream: message id must be 1 to {MAX_ID_LEN} bytes, got {n}")
    for ch in msg_id:
        if _is_control(ch):
            raise ValueError(f"delaystream: message id {msg_id!r} contains a control character")


def _is_control(ch: str) -> bool:
    # Go's unicode.IsControl: C0, DEL and C1 control codes.
    o = ord(ch)
    return o < 0x20 or 0x7F <= o <= 0x9F


def _is_surrogate(ch: str) -> bool:
    return unicodedata.category(ch) == "Cs"


def validate_headers(headers: Optional[Mapping[str, str]]) -> Dict[str, str]:
    """Check a message's own headers (at most 64, keys not reserved)."""
    if not headers:
        return {}
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"delaystream: {len(headers)} headers, at most {MAX_HEADERS}")
    out = {}
    for k, v in headers.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("delaystream: header keys and values must be str")
        if k == "":
            raise ValueError("delaystream: empty header key")
        if k.startswith(RESERVED_HEADER_PREFIX):
            raise ValueError(f"delaystream: header key {k!r} uses the reserved prefix {RESERVED_HEADER_PREFIX!r}")
        if len(_b(k)) > MAX_HEADER_LEN or len(_b(v)) > MAX_HEADER_LEN:
            raise ValueError(f"delaystream: header {k!r} longer than {MAX_HEADER_LEN} bytes")
        out[k] = v
    return out


def _b(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def _s(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


# --- shard routing (docs/wire.md "Shard routing") --------------------------


def fnv1a32(data: bytes) -> int:
    h = 2166136261
    for byte in data:
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


def is_generated_layout(data: bytes) -> bool:
    return len(data) == 26 and 0x30 <= data[0] <= 0x37 and all(c in _CROCKFORD_SET for c in data)


def shard_of(msg_id: str, shards: int) -> int:
    """The shard of a message id in a queue of ``shards`` shards (wire.ShardOf)."""
    if shards <= 1:
        return 0
    data = _b(msg_id)
    if is_generated_layout(data):
        data = data[10:]
    return fnv1a32(data) % shards


def shard_of_random(random_part: bytes, shards: int) -> int:
    """The shard of a generated id, from its 16-character random part."""
    if shards <= 1:
        return 0
    return fnv1a32(random_part) % shards


def _crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def slot(key: str) -> int:
    """The Cluster slot of a key, hash tags included (CLUSTER KEYSLOT)."""
    data = _b(key)
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1 : end]
    return _crc16(data) % SLOTS


def shard_tag(queue: str, i: int, n: int) -> str:
    """The hash tag of shard ``i`` of ``n`` (docs/wire.md "Shard tags")."""
    if n == 1:
        return queue
    lo, hi = i * SLOTS // n, (i + 1) * SLOTS // n
    centre, half = (lo + hi) // 2, max((hi - lo) // 32, 8)
    lo, hi = max(lo, centre - half), min(hi, centre + half + 1)
    base = f"{queue}:{i}"
    if lo <= _crc16(_b(base)) % SLOTS < hi:
        return base
    k = 0
    while True:
        tag = f"{base}.{k}"
        if lo <= _crc16(_b(tag)) % SLOTS < hi:
            return tag
        k += 1


# --- keys (docs/wire.md "Keys and channels") --------------------------------


@dataclass(frozen=True)
class Lane:
    """A delayed set and the stream it is promoted into."""

    z: str
    m: str
    s: str
    x: str
    l: str  # noqa: E741 - the wire name
    w: str  # wake channel
    n: str  # arrivals channel


@dataclass(frozen=True)
class ShardKeys:
    """The keys of one shard of a queue."""

    prefix: str
    queue: str
    index: int
    shards: int
    base: str = field(init=False)

    def __post_init__(self) -> None:
        tag = shard_tag(self.queue, self.index, self.shards)
        object.__setattr__(self, "base", f"{self.prefix}:{LAYOUT_VERSION}:{{{tag}}}")

    def _lane(self, b: str) -> Lane:
        return Lane(b + ":z", b + ":m", b + ":s", b + ":x", b + ":l", b + ":w", b + ":n")

    def main(self) -> Lane:
        return self._lane(self.base)

    def retry(self, group: str) -> Lane:
        return self._lane(f"{self.base}:r:{group}")

    def dead(self, group: str) -> str:
        return f"{self.base}:d:{group}"

    def groups(self) -> str:
        return self.base + ":g"

    def pause(self) -> str:
        return self.base + ":p"

    def occurrences(self) -> str:
        return self.base + ":e:o"

    def token(self, token: str) -> str:
        return f"{self.base}:k:{token}"

    def history(self, minute: int) -> Tuple[str, str, str]:
        """The three history keys for the minute ``minute`` (Unix s // 60)."""
        return (self.base + ":h", f"{self.base}:h:m:{minute}", f"{self.base}:h:h:{minute // 60}")

    def handled(self, group: str) -> Tuple[str, str]:
        return (f"{self.base}:a:{group}", f"{self.base}:a:{group}:t")

    def flow(self, group: str) -> str:
        return f"{self.base}:f:{group}"

    def presence(self, group: str, consumer: str) -> str:
        return f"{self.base}:c:{group}:{{{consumer}}}"


def home(prefix: str, queue: str) -> str:
    """The queue's home base H."""
    return f"{prefix}:{LAYOUT_VERSION}:{{{queue}}}"


def channel_arg(name: str, sharded: bool) -> str:
    """A script's channel argument: a shard channel's name follows a space."""
    return " " + name if sharded and name else name


# --- varints --------------------------------------------------------------


def _uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _varint(v: int) -> bytes:
    return _uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _read_uvarint(b: bytes, off: int, what: str) -> Tuple[int, int]:
    x, s = 0, 0
    for i in range(10):
        if off + i >= len(b):
            break
        c = b[off + i]
        if c < 0x80:
            if i == 9 and c > 1:
                break
            return x | (c << s), off + i + 1
        x |= (c & 0x7F) << s
        s += 7
    raise WireError(f"corrupt envelope: bad varint in {what}")


def _read_varint(b: bytes, off: int, what: str) -> Tuple[int, int]:
    u, off = _read_uvarint(b, off, what)
    v = u >> 1
    if u & 1:
        v = ~v
    return v, off


# --- envelopes (docs/wire.md "Envelope encoding") ---------------------------


@dataclass
class Envelope:
    """A message's envelope: payload, headers, attempt, creation time, deadline.

    Times are Unix milliseconds; 0 means none.
    """

    payload: bytes = b""
    headers: Dict[str, str] = field(default_factory=dict)
    attempt: int = 1
    created_ms: int = 0
    deadline_ms: int = 0

    def encode(self) -> bytes:
        deadline = max(self.deadline_ms, 1) if self.deadline_ms else 0
        out = bytearray([MAGIC, VERSION_DEADLINE if deadline else VERSION])
        out += _uvarint(min(max(self.attempt, 0), _MAX_ATTEMPT))
        out += _varint(self.created_ms)
        if deadline:
            out += _varint(deadline)
        out += _uvarint(len(self.headers))
        for k, v in sorted(((_b(k), _b(v)) for k, v in self.headers.items())):
            out += _uvarint(len(k)) + k + _uvarint(len(v)) + v
        out += self.payload
        return bytes(out)

    @classmethod
    def decode(cls, b: bytes) -> "Envelope":
        if len(b) < 2 or b[0] != MAGIC:
            raise WireError("unknown envelope format: missing envelope magic byte")
        if b[1] not in (VERSION, VERSION_DEADLINE):
            raise WireError(f"unknown envelope format: envelope version {b[1]}")
        attempt, off = _read_uvarint(b, 2, "attempt")
        created, off = _read_varint(b, off, "created")
        deadline = 0
        if b[1] == VERSION_DEADLINE:
            deadline, off = _read_varint(b, off, "deadline")
            if deadline <= 0:
                raise WireError(f"corrupt envelope: deadline {deadline} out of range")
        nh, off = _read_uvarint(b, off, "header count")
        if nh > _READ_MAX_HEADERS:
            raise WireError(f"corrupt envelope: header count {nh} exceeds {_READ_MAX_HEADERS}")
        if attempt > _MAX_ATTEMPT:
            raise WireError(f"corrupt envelope: attempt {attempt} out of range")
        headers: Dict[str, str] = {}
        for _ in range(nh):
            k, off = _read_str(b, off, "header key")
            v, off = _read_str(b, off, "header value")
            headers[_s(k)] = _s(v)
        return cls(payload=bytes(b[off:]), headers=headers, attempt=attempt, created_ms=created, deadline_ms=deadline)


def _read_str(b: bytes, off: int, what: str) -> Tuple[bytes, int]:
    n, off = _read_uvarint(b, off, what + " length")
    if n > len(b) - off:
        raise WireError(f"corrupt envelope: {what} length {n} exceeds remaining {len(b) - off} bytes")
    return b[off : off + n], off + n


# --- generated ids (docs/wire.md "Generated ids") ----------------------------


def time_part(ms: int) -> bytes:
    out = bytearray(10)
    for i in range(9, -1, -1):
        out[i] = CROCKFORD[ms & 31]
        ms >>= 5
    return bytes(out)


def random_part(raw: bytes) -> bytes:
    """The 16-character random part made from 10 random bytes."""
    if len(raw) != 10:
        raise ValueError("random part needs 10 bytes")
    v = int.from_bytes(raw, "big")
    return bytes(CROCKFORD[(v >> (75 - 5 * i)) & 31] for i in range(16))


def new_random_part() -> bytes:
    return random_part(os.urandom(10))


def generated_id(due_ms: int, rnd: bytes) -> str:
    return (time_part(due_ms) + rnd).decode("ascii")


def packed_member(rnd: bytes, envelope: bytes) -> bytes:
    return bytes([PACKED_KIND]) + rnd + envelope


# --- stream entries (docs/wire.md "Main and retry-lane entries") --------------

_INT_RE = re.compile(rb"^[+-]?[0-9]+$")


@dataclass
class Entry:
    """A decoded stream entry: the message it carries."""

    entry_id: str
    id: str
    due_ms: int
    envelope: Envelope
    raw_id: bytes  # the i field (a retry member keeps its suffix), or b"" for packed


def decode_entry(entry_id: str, fields: Mapping[bytes, bytes]) -> Entry:
    """Decode a main or retry-lane stream entry (wire.Decode)."""
    due_b = fields.get(b"d")
    if due_b is None:
        raise WireError('field "d" missing')
    if not _INT_RE.match(due_b):
        raise WireError(f'field "d" = {due_b[:64]!r} is not an integer')
    due = int(due_b)
    packed = fields.get(b"p")
    raw_id = b""
    if packed is not None:
        if len(packed) < 17 or packed[0] != PACKED_KIND:
            raise WireError("malformed packed member")
        if not 0 <= due < 2**48:
            raise WireError(f"packed member due {due} out of range")
        rnd = packed[1:17]
        if not all(c in _CROCKFORD_SET for c in rnd):
            raise WireError("malformed packed member: random part not Crockford base32")
        mid = (time_part(due) + rnd).decode("ascii")
        raw = packed[17:]
    else:
        i = fields.get(b"i")
        if not i:
            raise WireError('field "i" missing')
        if i.startswith(RETRY_SEP):
            raise WireError('field "i" has no message id')
        raw = fields.get(b"e")
        if raw is None:
            raise WireError('field "e" missing')
        raw_id = i
        mid = _s(i.split(RETRY_SEP, 1)[0])
    env = Envelope.decode(raw)
    return Entry(entry_id=entry_id, id=mid, due_ms=due, envelope=env, raw_id=raw_id)


def retry_member(msg_id: str, entry_id: str) -> bytes:
    return _b(msg_id) + RETRY_SEP + entry_id.encode("ascii")
