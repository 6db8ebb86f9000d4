"""The consumer on a real Redis: the same states and records as a Go consumer."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

import delaystream
from delaystream import _wire as W

from .conftest import wait_for


def run(consumer):
    t = threading.Thread(target=consumer.run, daemon=True)
    t.start()
    return t


def stop(consumer, t):
    consumer.stop()
    t.join(30)
    assert not t.is_alive(), "consumer did not stop"


def test_every_group_gets_every_message_once(r):
    q = delaystream.Queue(r, "fan")
    seen = {"a": Counter(), "b": Counter()}
    lock = threading.Lock()

    def handler(group):
        def h(d):
            with lock:
                seen[group][(d.id, d.payload, tuple(sorted(d.headers.items())))] += 1
        return h

    cs = [delaystream.Consumer(r, "fan", g, handler(g), name=f"{g}-1", keep_handled=3600 if g == "a" else None) for g in ("a", "b")]
    ts = [run(c) for c in cs]
    sent = q.schedule_batch([delaystream.Message(f"p{i}".encode(), id=f"m{i}", after=0.2, headers={"n": str(i)}) for i in range(20)]
                            + [delaystream.Message(b"gen") for _ in range(5)])
    wait_for(lambda: sum(seen["a"].values()) == 25 and sum(seen["b"].values()) == 25, what="both groups handle 25")
    for c, t in zip(cs, ts):
        stop(c, t)
    for g in ("a", "b"):
        assert all(n == 1 for n in seen[g].values()), seen[g]
        assert {k[0] for k in seen[g]} == {s.id for s in sent}
    # Acknowledged and counted in the history, as Go's consumers do.
    assert int(r.hget("ds:1:{fan}:h", "handled:a")) == 25
    assert int(r.hget("ds:1:{fan}:h", "promoted")) == 25
    assert r.xpending("ds:1:{fan}:s", "a")["pending"] == 0
    assert r.smembers("ds:1:{fan}:g") == {b"a", b"b"}
    # Group a keeps handled records: Locate (Go's and this client's) names
    # the consumer and the attempt; group b keeps none, so it is nowhere.
    loc = q.locate("m3")
    assert [(p.kind, p.group, p.consumer, p.attempt) for p in loc.places] == [("handled", "a", "a-1", 1)]


def test_retry_then_dead_letter(r):
    q = delaystream.Queue(r, "fail")
    attempts = Counter()

    def h(d):
        attempts[d.id] += 1
        assert d.attempt == attempts[d.id]
        if d.id == "flaky" and d.attempt < 3:
            raise RuntimeError("not yet")
        if d.id == "bad":
            raise ValueError("always")
        if d.id == "dl":
            raise delaystream.DeadLetter("poison")
        if d.id == "drop":
            raise delaystream.Drop()

    c = delaystream.Consumer(r, "fail", "g", h, max_attempts=3, backoff=delaystream.constant_backoff(0.05))
    t = run(c)
    for mid in ("flaky", "bad", "dl", "drop", "ok"):
        q.schedule(b"x", id=mid)
    wait_for(lambda: r.xlen("ds:1:{fail}:d:g") == 2 and c.counters.handled == 2 and c.counters.dropped == 1,
             what="two handled, one dropped, two dead letters")
    stop(c, t)
    assert attempts == Counter(flaky=3, bad=3, dl=1, drop=1, ok=1)
    dead = {e[1][b"i"]: e[1] for e in r.xrange("ds:1:{fail}:d:g")}
    assert dead[b"bad"][b"r"] == b"attempts exhausted" and dead[b"bad"][b"a"] == b"3"
    assert b"ValueError: always" in dead[b"bad"][b"x"]
    assert dead[b"dl"][b"r"] == b"handler asked to dead-letter" and dead[b"dl"][b"x"] == b"poison"
    assert W.Envelope.decode(dead[b"bad"][b"e"]).attempt == 3
    assert dead[b"bad"][b"s"] == b"ds:1:{fail}:r:g:s"  # failed last in the retry lane
    h_ = {k.decode(): int(v) for k, v in r.hgetall("ds:1:{fail}:h").items()}
    assert h_["retried:g"] == 4 and h_["dead:g"] == 2 and h_["handled:g"] == 2 and h_["dropped:g"] == 1


def test_retry_after_and_snooze(r):
    q = delaystream.Queue(r, "later")
    got = []

    def h(d):
        got.append((d.attempt, time.monotonic()))
        if len(got) == 1:
            raise delaystream.Snooze(0.3)
        if len(got) == 2:
            raise delaystream.Retry(0.3, "429")

    c = delaystream.Consumer(r, "later", "g", h)
    t = run(c)
    q.schedule(b"x", id="m")
    wait_for(lambda: len(got) == 3, what="three deliveries")
    stop(c, t)
    # A snooze keeps the attempt, a retry counts one; each waited its time.
    assert [a for a, _ in got] == [1, 1, 2]
    assert got[1][1] - got[0][1] >= 0.29 and got[2][1] - got[1][1] >= 0.29


def test_reclaim_from_a_crashed_consumer(r):
    q = delaystream.Queue(r, "crash")
    # A consumer that read and died: its entries stay pending with it.
    for i in range(3):
        q.schedule(b"x", id=f"m{i}")
    mover = delaystream.Consumer(r, "crash", "g", lambda d: None, start_from="oldest")
    mover._start()
    mover._promote(0, retry=False)
    mover._shutdown()
    r.xreadgroup("g", "dead-consumer", {"ds:1:{crash}:s": ">"})
    assert r.xpending("ds:1:{crash}:s", "g")["pending"] == 3
    got = []
    c = delaystream.Consumer(r, "crash", "g", lambda d: got.append(d), visibility_timeout=0.5)
    t = run(c)
    wait_for(lambda: len(got) == 3, what="the three reclaimed")
    stop(c, t)
    assert all(d.deliveries == 2 for d in got)
    assert r.xpending("ds:1:{crash}:s", "g")["pending"] == 0


def test_long_handler_keeps_its_entry_and_stop_hands_back(r):
    q = delaystream.Queue(r, "long")
    started, release = threading.Event(), threading.Event()
    seen = []

    def slow(d):
        seen.append(d.id)
        started.set()
        release.wait(10)  # longer than the visibility timeout: extended meanwhile

    a = delaystream.Consumer(r, "long", "g", slow, name="a", visibility_timeout=1.0)
    ta = run(a)
    q.schedule(b"x", id="m")
    assert started.wait(10)
    # b reclaims what is idle past the visibility timeout: a's hold is extended.
    b = delaystream.Consumer(r, "long", "g", lambda d: seen.append("b:" + d.id), name="b", visibility_timeout=1.0)
    tb = run(b)
    time.sleep(2.5)  # past two visibility timeouts: b must not take it
    release.set()
    wait_for(lambda: a.counters.handled == 1, what="a handles it")
    stop(a, ta)
    stop(b, tb)
    assert seen == ["m"]


def test_drain_timeout_hands_back_and_discards(r):
    q = delaystream.Queue(r, "drain")
    started, release = threading.Event(), threading.Event()
    cancelled = []

    def stuck(d):
        started.set()
        d.cancelled.wait(10)
        cancelled.append(d.cancelled.is_set())
        release.wait(10)

    a = delaystream.Consumer(r, "drain", "g", stuck, name="a", drain_timeout=0.2)
    ta = run(a)
    q.schedule(b"x", id="m")
    assert started.wait(10)
    stop(a, ta)
    assert cancelled == [True]
    # Handed back: idle far past the visibility timeout, for any consumer to take at once.
    p = r.xpending_range("ds:1:{drain}:s", "g", "-", "+", 10)
    assert len(p) == 1 and p[0]["time_since_delivered"] > 86_400_000
    got = []
    b = delaystream.Consumer(r, "drain", "g", lambda d: got.append(d.deliveries), name="b")
    tb = run(b)
    wait_for(lambda: got == [2], what="b takes the handed-back entry")
    release.set()
    stop(b, tb)


def test_undecodable_entry_is_dead_lettered(r):
    r.xgroup_create("ds:1:{junk}:s", "g", id="0", mkstream=True)
    r.xadd("ds:1:{junk}:s", {"d": "1", "i": "m", "e": b"\x00junk"})
    r.xadd("ds:1:{junk}:s", {"d": "1", "i": "ok", "e": W.Envelope(b"fine").encode()})
    got = []
    c = delaystream.Consumer(r, "junk", "g", lambda d: got.append(d.payload))
    t = run(c)
    wait_for(lambda: got == [b"fine"] and r.xlen("ds:1:{junk}:d:g") == 1, what="one handled, one dead letter")
    stop(c, t)
    (_, f), = r.xrange("ds:1:{junk}:d:g")
    assert f[b"r"] == b"undecodable entry" and f[b"i"] == b"m" and b"magic" in f[b"x"]


def test_paused_group_reads_nothing(r):
    q = delaystream.Queue(r, "pz")
    got = []
    r.hset("ds:1:{pz}:p", "group:g", 1)
    c = delaystream.Consumer(r, "pz", "g", lambda d: got.append(d.id))
    t = run(c)
    q.schedule(b"x", id="m")
    wait_for(lambda: r.xlen("ds:1:{pz}:s") == 1, what="promotion")
    time.sleep(0.5)
    assert got == []
    r.hdel("ds:1:{pz}:p", "group:g")
    r.publish("ds:1:{pz}:n", "p")
    wait_for(lambda: got == ["m"], what="delivery after resume")
    stop(c, t)


def test_flow_limited_group_is_refused(r):
    r.hset("ds:1:{lim}:f:g", "limits", "1 0 0 0")
    c = delaystream.Consumer(r, "lim", "g", lambda d: None)
    with pytest.raises(delaystream.Unsupported):
        c.run()


def test_cluster_sharded(rc):
    q = delaystream.Queue(rc, "cs", shards=3)
    got = Counter()
    lock = threading.Lock()

    def h(d):
        with lock:
            got[d.id] += 1
        if d.attempt == 1 and d.id.endswith("7"):
            raise RuntimeError("once")

    cs = [delaystream.Consumer(rc, "cs", "g", h, name=f"c{i}", shards=3, backoff=delaystream.constant_backoff(0.05)) for i in range(2)]
    ts = [run(c) for c in cs]
    q.schedule_batch([delaystream.Message(b"x", id=f"m{i}", after=0.1) for i in range(30)])
    wait_for(lambda: sum(got.values()) == 33, timeout=20, what="30 handled, 3 of them twice")
    for c, t in zip(cs, ts):
        stop(c, t)
    assert all(got[f"m{i}"] == (2 if i % 10 == 7 else 1) for i in range(30))
