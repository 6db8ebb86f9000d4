"""The producer on a real Redis: what it writes is what Go writes and reads."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import msgpack
import pytest
import redis
import redis.asyncio

import delaystream
from delaystream import _wire as W


def test_schedule_named_and_generated(r):
    q = delaystream.Queue(r, "orders")
    res = q.schedule({"order": 5001}, id="order:5001:cancel", after=timedelta(minutes=30), headers={"trace": "abc"})
    assert res.outcome == "created" and res.id == "order:5001:cancel"
    now_ms = int(datetime.now(timezone.utc).timestamp() * 1000)
    assert now_ms + 30 * 60_000 - 2000 <= res.due_ms <= now_ms + 30 * 60_000 + 2000
    # A plain member with its envelope in the hash, as Go writes it.
    assert r.zscore("ds:1:{orders}:z", "order:5001:cancel") == res.due_ms
    env = W.Envelope.decode(r.hget("ds:1:{orders}:m", "order:5001:cancel"))
    assert msgpack.unpackb(env.payload) == {"order": 5001}
    assert env.headers == {"trace": "abc"} and env.attempt == 1 and env.created_ms > 0

    gen = q.schedule(b"raw bytes", after=5)
    assert W.is_generated_layout(gen.id.encode()) and gen.outcome == "created"
    # A packed member: no hash field, its time part is the due time.
    assert r.hlen("ds:1:{orders}:m") == 1
    assert W.generated_id(gen.due_ms, gen.id[10:].encode()) == gen.id
    w = q.get(gen.id)
    assert w is not None and w.payload == b"raw bytes" and w.due_ms == gen.due_ms
    # The queue's record, as meta.lua keeps it.
    assert r.hget("ds:1:{orders}:q", "shards") == b"1"


def test_duplicate_policies(r):
    q = delaystream.Queue(r, "dups")
    first = q.schedule(b"1", id="a", after=60)
    assert q.schedule(b"2", id="a", after=120).outcome == "kept"
    assert q.get("a").payload == b"1"
    replaced = q.schedule(b"3", id="a", after=90, policy="replace")
    assert replaced.outcome == "replaced" and replaced.due_ms > first.due_ms
    assert q.get("a").payload == b"3"
    with pytest.raises(delaystream.Duplicate) as e:
        q.schedule(b"4", id="a", policy="reject")
    assert e.value.due_ms == replaced.due_ms
    batch = q.schedule_batch([delaystream.Message(b"5", id="a", policy="reject"), delaystream.Message(b"6", id="b")])
    assert [b.outcome for b in batch] == ["rejected", "created"]


def test_cancel_reschedule_get(r):
    q = delaystream.Queue(r, "edit")
    named = q.schedule(b"x", id="n1", after=60)
    gen = q.schedule(b"y", after=60)
    at = datetime.now(timezone.utc) + timedelta(hours=2)
    new = q.reschedule(gen.id, at=at)
    assert new is not None and abs((new - at).total_seconds()) < 0.002
    # A rescheduled generated id becomes a plain member keeping its id.
    assert r.hexists("ds:1:{edit}:m", gen.id)
    assert q.get(gen.id).due_ms == int(new.timestamp() * 1000)
    assert q.reschedule("nobody", after=1) is None
    assert q.cancel(named.id) is True
    assert q.cancel(named.id) is False
    assert q.cancel(gen.id) is True
    assert q.get(gen.id) is None and r.zcard("ds:1:{edit}:z") == 0 and r.hlen("ds:1:{edit}:m") == 0


def test_bad_input_writes_nothing(r):
    q = delaystream.Queue(r, "bad")
    cases = [
        dict(id="a\nb"),
        dict(id="x" * 257),
        dict(after=-1),
        dict(after=1, at=datetime.now(timezone.utc)),
        dict(at=datetime(2030, 1, 1)),  # naive
        dict(headers={"ds.schedule": "x"}),
        dict(headers={f"h{i}": "v" for i in range(65)}),
        dict(deadline=datetime.now(timezone.utc) - timedelta(seconds=1)),
        dict(policy="sometimes"),
    ]
    for kw in cases:
        with pytest.raises((ValueError, TypeError)):
            q.schedule_batch([delaystream.Message(b"ok", id="good"), delaystream.Message(b"p", **kw)])
    with pytest.raises(ValueError):
        q.schedule(b"x" * ((1 << 20) + 1))
    assert r.zcard("ds:1:{bad}:z") == 0
    with pytest.raises(ValueError):
        delaystream.Queue(r, "has space")
    with pytest.raises(ValueError, match="decode_responses"):
        delaystream.Consumer(redis.Redis(decode_responses=True), "q", "g", lambda d: None)


def test_sharded_routing(r):
    q = delaystream.Queue(r, "big", shards=4)
    ids = [f"user:{i}" for i in range(40)]
    res = q.schedule_batch([delaystream.Message(b"p", id=i, after=60) for i in ids] + [delaystream.Message(b"g", after=60) for _ in range(40)])
    assert all(x.outcome == "created" for x in res)
    for x in res:
        tag = W.shard_tag("big", W.shard_of(x.id, 4), 4)
        assert r.zscore(f"ds:1:{{{tag}}}:z", x.id) is not None or any(
            m[1:17] == x.id[10:].encode() for m in r.zrange(f"ds:1:{{{tag}}}:z", 0, -1))
    # The recorded count is read back, and a different one is refused.
    assert delaystream.Queue(r, "big").get("user:1") is not None
    with pytest.raises(delaystream.ShardCountError):
        delaystream.Queue(r, "big", shards=2).schedule(b"x")


def test_call_tokens_make_a_resent_call_act_once(r, redis_url):
    # A client that never re-sends a command needs no token.
    assert delaystream.Queue(r, "once")._token_ttl == 0
    # One that may re-send carries a token: sending the same script call
    # again (what redis-py does after a lost reply) rebuilds the first reply.
    client = redis.Redis.from_url(redis_url, retry_on_timeout=True)
    q = delaystream.Queue(client, "once")
    q.schedule(b"0", id="warm")
    call = q._cancel_call("warm")
    assert call[1][-1].startswith("ds:1:{once}:k:")
    assert call[0](client, call[1], call[2]) == 1
    assert call[0](client, call[1], call[2]) == 1  # the second run answers as the first
    q.schedule(b"again", id="warm")
    assert call[0](client, call[1], call[2]) == 1 and q.get("warm") is not None  # and removed nothing


def test_locate(r):
    q = delaystream.Queue(r, "loc")
    q.schedule(b"x", id="m1", after=60)
    loc = q.locate("m1")
    assert loc.found and loc.kinds() == ["waiting"] and loc.places[0].attempt == 1
    assert not q.locate("nobody").found


def test_async_queue(redis_url):
    async def main():
        client = redis.asyncio.Redis.from_url(redis_url)
        await client.flushall()
        q = delaystream.AsyncQueue(client, "aio")
        a = await q.schedule(b"1", id="a", after=30)
        b = await q.schedule_batch([delaystream.Message(b"2", after=30), delaystream.Message(b"3", id="c", after=30)])
        assert a.outcome == "created" and [x.outcome for x in b] == ["created", "created"]
        assert (await q.get("a")).payload == b"1"
        assert await q.reschedule("a", after=60) is not None
        assert await q.cancel("c") is True
        await client.close()

    asyncio.run(main())


def test_cluster(rc):
    q = delaystream.Queue(rc, "cq", shards=3)
    res = q.schedule_batch([delaystream.Message(b"p", id=f"o{i}", after=60) for i in range(30)] + [delaystream.Message(b"g", after=60) for _ in range(30)])
    assert len(res) == 60 and all(x.outcome == "created" for x in res)
    assert q.cancel("o1") and q.get("o2") is not None and q.reschedule(res[-1].id, after=5) is not None
    assert q.locate("o3").kinds() == ["waiting"]
