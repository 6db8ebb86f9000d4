"""The shared test vectors (internal/wire/testdata/vectors.json) and the scripts' copies."""

from __future__ import annotations

import hashlib
import json

import pytest

from delaystream import _scripts as S
from delaystream import _wire as W

from .conftest import REPO

VECTORS = json.loads((REPO / "internal/wire/testdata/vectors.json").read_text())


@pytest.mark.parametrize("v", VECTORS["shard_of"], ids=lambda v: f"{v['id']}/{v['shards']}")
def test_shard_of(v):
    assert W.shard_of(v["id"], v["shards"]) == v["shard"]


@pytest.mark.parametrize("v", VECTORS["slots"], ids=lambda v: v["key"] or "empty")
def test_slot(v):
    assert W.slot(v["key"]) == v["slot"]


@pytest.mark.parametrize("v", VECTORS["tags"], ids=lambda v: f"{v['queue']}/{v['shard']}of{v['shards']}")
def test_shard_tag(v):
    assert W.shard_tag(v["queue"], v["shard"], v["shards"]) == v["tag"]


@pytest.mark.parametrize("v", VECTORS["envelopes"], ids=lambda v: v["hex"])
def test_envelope(v):
    env = W.Envelope(
        payload=bytes.fromhex(v["payload_hex"]),
        headers=v.get("headers") or {},
        attempt=v["attempt"],
        created_ms=v.get("created_ms", 0),
        deadline_ms=v.get("deadline_ms", 0),
    )
    assert env.encode().hex() == v["hex"]
    assert W.Envelope.decode(bytes.fromhex(v["hex"])) == env


@pytest.mark.parametrize("v", VECTORS["generated_ids"], ids=lambda v: v["id"])
def test_generated_id(v):
    if "random_bytes_hex" in v:
        assert W.random_part(bytes.fromhex(v["random_bytes_hex"])).decode() == v["random"]
    rnd = v["random"].encode()
    assert W.generated_id(v["due_ms"], rnd) == v["id"]
    env = bytes.fromhex(VECTORS["envelopes"][0]["hex"])
    assert W.packed_member(rnd, env).hex() == v["packed_member_hex"]
    # The stream entry of a packed member gives the id back.
    e = W.decode_entry("1-0", {b"d": str(v["due_ms"]).encode(), b"p": bytes.fromhex(v["packed_member_hex"])})
    assert e.id == v["id"] and e.envelope.payload == b"p"


@pytest.mark.parametrize(
    "raw,why",
    [
        (b"", "missing envelope magic byte"),
        (b"\xd5", "missing envelope magic byte"),
        (b"\xd5\x03\x01\x00\x00", "envelope version 3"),
        (b"\xd5\x01\x80", "bad varint in attempt"),
        (b"\xd5\x02\x01\x00\x00\x00", "deadline 0 out of range"),
        (b"\xd5\x01\x01\x00\x01\x05ab", "header key length 5 exceeds"),
        (b"\xd5\x01\x01\x00\x81\x40", "header count 8193 exceeds 4096"),
        (b"\xd5\x01\xff\xff\xff\xff\x0f\x00\x00", "attempt 4294967295 out of range"),
    ],
)
def test_envelope_refused(raw, why):
    with pytest.raises(W.WireError, match=why):
        W.Envelope.decode(raw)


def test_entries_refused():
    for fields, why in [
        ({b"i": b"a", b"e": b"\xd5\x01\x01\x00\x00"}, 'field "d" missing'),
        ({b"d": b"1x", b"i": b"a", b"e": b""}, "not an integer"),
        ({b"d": b"1", b"e": b"\xd5\x01\x01\x00\x00"}, 'field "i" missing'),
        ({b"d": b"1", b"i": b"\x1f1-0", b"e": b"\xd5\x01\x01\x00\x00"}, "no message id"),
        ({b"d": b"1", b"i": b"a"}, 'field "e" missing'),
        ({b"d": b"1", b"p": b"\x01short"}, "malformed packed member"),
    ]:
        with pytest.raises(W.WireError, match=why):
            W.decode_entry("1-0", fields)
    # A retry member's id is the message id before the separator.
    e = W.decode_entry("1-0", {b"d": b"5", b"i": b"order:1\x1f3-0", b"e": b"\xd5\x01\x02\x00\x00x"})
    assert (e.id, e.due_ms, e.envelope.attempt, e.envelope.payload) == ("order:1", 5, 2, b"x")


def test_scripts_are_the_go_modules_files():
    """The scripts are the Go module's files; each script's SHA1 is the one Go sends."""
    src = REPO / "internal/scripts"
    assert (REPO / "clients/python/delaystream/lua").resolve() == src.resolve()
    manifest = json.loads((src / "manifest.json").read_text())
    for name, spec in manifest["scripts"].items():
        data = b"".join((src / f).read_bytes() for f in spec["files"])
        assert hashlib.sha1(data).hexdigest() == spec["sha1"] == S.SCRIPTS[name].sha, name
    assert set(S.SCRIPTS) == set(manifest["scripts"])


def test_names_and_ids_checked():
    W.validate_name("queue", "orders:eu")
    for bad in ["", "a b", "a{b", "x" * 129, "tab\t"]:
        with pytest.raises(ValueError):
            W.validate_name("queue", bad)
    W.validate_id("order:5001:cancel")
    for bad in ["", "a\nb", "x" * 257, "\x7f"]:
        with pytest.raises(ValueError):
            W.validate_id(bad)
