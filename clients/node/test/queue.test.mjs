// The producer on a real Redis: what it writes is what Go writes and reads.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { unpack } from "msgpackr";
import { DuplicateError, InvalidMessageError, Queue, ShardCountError } from "../dist/index.js";
import { decodeEnvelope, generatedId, isGeneratedLayout, shardOf, shardTag } from "../dist/wire.js";
import { startRedis } from "./helpers.mjs";

let srv;
let r;
before(async () => {
  srv = await startRedis();
  r = srv.client();
});
after(async () => {
  r.disconnect();
  await srv.stop();
});

test("named and generated ids", async () => {
  const q = new Queue(r, "orders");
  const res = await q.schedule({ payload: { order: 5001 }, id: "order:5001:cancel", afterMs: 30 * 60000, headers: { trace: "abc" } });
  assert.equal(res.outcome, "created");
  assert.ok(Math.abs(res.dueMs - (Date.now() + 30 * 60000)) < 2000);
  assert.equal(Number(await r.zscore("ds:1:{orders}:z", "order:5001:cancel")), res.dueMs);
  const env = decodeEnvelope(await r.hgetBuffer("ds:1:{orders}:m", "order:5001:cancel"));
  assert.deepEqual(unpack(env.payload), { order: 5001 });
  assert.deepEqual(env.headers, { trace: "abc" });
  assert.equal(env.attempt, 1);
  const gen = await q.schedule({ payload: Buffer.from("raw"), afterMs: 5000 });
  assert.ok(isGeneratedLayout(Buffer.from(gen.id)));
  assert.equal(generatedId(gen.dueMs, gen.id.slice(10)), gen.id);
  assert.equal(await r.hlen("ds:1:{orders}:m"), 1);
  const w = await q.get(gen.id);
  assert.equal(w.payload.toString(), "raw");
  assert.equal(w.dueMs, gen.dueMs);
  assert.equal(await r.hget("ds:1:{orders}:q", "shards"), "1");
});

test("duplicate policies", async () => {
  const q = new Queue(r, "dups");
  await q.schedule({ payload: Buffer.from("1"), id: "a", afterMs: 60000 });
  assert.equal((await q.schedule({ payload: Buffer.from("2"), id: "a" })).outcome, "kept");
  assert.equal((await q.get("a")).payload.toString(), "1");
  assert.equal((await q.schedule({ payload: Buffer.from("3"), id: "a", policy: "replace", afterMs: 90000 })).outcome, "replaced");
  await assert.rejects(q.schedule({ payload: Buffer.from("4"), id: "a", policy: "reject" }), DuplicateError);
  const batch = await q.scheduleBatch([{ id: "a", policy: "reject" }, { id: "b" }]);
  assert.deepEqual(batch.map((b) => b.outcome), ["rejected", "created"]);
});

test("cancel, reschedule, get", async () => {
  const q = new Queue(r, "edit");
  const named = await q.schedule({ id: "n1", afterMs: 60000 });
  const gen = await q.schedule({ afterMs: 60000 });
  const at = new Date(Date.now() + 7200000);
  const moved = await q.reschedule(gen.id, { at });
  assert.ok(Math.abs(moved.getTime() - at.getTime()) <= 1);
  assert.equal(await r.hexists("ds:1:{edit}:m", gen.id), 1);
  assert.equal(await q.reschedule("nobody", { afterMs: 1 }), null);
  assert.equal(await q.cancel(named.id), true);
  assert.equal(await q.cancel(named.id), false);
  assert.equal(await q.cancel(gen.id), true);
  assert.equal(await q.get(gen.id), null);
  assert.equal(await r.zcard("ds:1:{edit}:z"), 0);
});

test("bad input writes nothing", async () => {
  const q = new Queue(r, "bad");
  for (const m of [{ id: "a\nb" }, { id: "x".repeat(257) }, { afterMs: -1 }, { afterMs: 1, at: Date.now() }, { headers: { "ds.x": "y" } },
    { deadline: Date.now() - 1000 }, { policy: "sometimes" }, { payload: Buffer.alloc((1 << 20) + 1) }]) {
    await assert.rejects(q.scheduleBatch([{ id: "good" }, m]), (e) => e instanceof InvalidMessageError || e instanceof TypeError, JSON.stringify(m).slice(0, 60));
  }
  assert.equal(await r.zcard("ds:1:{bad}:z"), 0);
  assert.throws(() => new Queue(r, "has space"), InvalidMessageError);
});

test("sharded routing and the recorded count", async () => {
  const q = new Queue(r, "big", { shards: 4 });
  const res = await q.scheduleBatch([...Array(40).keys()].map((i) => ({ id: `user:${i}`, afterMs: 60000 })).concat([...Array(40)].map(() => ({ afterMs: 60000 }))));
  for (const x of res) {
    const key = `ds:1:{${shardTag("big", shardOf(x.id, 4), 4)}}:z`;
    const members = await r.zrangeBuffer(key, 0, -1);
    assert.ok(members.some((m) => m.toString() === x.id || m.subarray(1, 17).toString() === x.id.slice(10)), x.id);
  }
  assert.notEqual(await new Queue(r, "big").get("user:1"), null);
  await assert.rejects(new Queue(r, "big", { shards: 2 }).schedule({}), ShardCountError);
});

test("a re-sent call acts once (call tokens)", async () => {
  const q = new Queue(r, "once");
  assert.ok(q["ttl"] > 0, "ioredis may re-send: calls carry tokens");
  await q.schedule({ id: "warm" });
  assert.equal(await q.cancel("warm"), true);
  const none = new Queue(r, "once2", { tokenTtlMs: 0 });
  await none.schedule({ id: "x" });
  assert.equal((await r.keys("ds:1:{once2}:k:*")).length, 0);
  assert.ok((await r.keys("ds:1:{once}:k:*")).length >= 2);
});

test("locate", async () => {
  const q = new Queue(r, "loc");
  await q.schedule({ id: "m1", afterMs: 60000 });
  const loc = await q.locate("m1");
  assert.deepEqual(loc.places.map((p) => p.kind), ["waiting"]);
  assert.equal(loc.places[0].attempt, 1);
  assert.deepEqual((await q.locate("nobody")).places, []);
});
