// Schedules a fixed set of messages into a queue and prints what must be
// delivered (JSON), as clients/python/tests/conformance/produce.py does:
// named and generated ids, single calls and a batch, afterMs and at,
// msgpack, JSON and raw payloads, headers, cancelled and rescheduled ones.
import { parseArgs } from "node:util";
import Redis, { Cluster } from "ioredis";
import { Queue, encodePayload } from "../../dist/index.js";

const { values: a } = parseArgs({
  options: { addr: { type: "string" }, cluster: { type: "boolean" }, prefix: { type: "string" }, queue: { type: "string" }, shards: { type: "string", default: "1" } },
});
const [host, port] = [a.addr.slice(0, a.addr.lastIndexOf(":")), Number(a.addr.slice(a.addr.lastIndexOf(":") + 1))];
const client = a.cluster ? new Cluster([{ host, port }]) : new Redis({ host, port });
const q = new Queue(client, a.queue, { prefix: a.prefix, shards: Number(a.shards) });
const expected = [];
const cancelled = [];
const expect = (res, payload, headers) => expected.push({ id: res.id, payload_hex: payload.toString("hex"), headers, not_before_ms: res.dueMs });

for (let i = 0; i < 8; i++) {
  const h = { lang: "node", n: String(i) };
  const p = Buffer.from(`named ${i}`);
  expect(await q.schedule({ payload: p, id: `node:named:${i}`, afterMs: 300, headers: h }), p, h);
}
const at = new Date(Date.now() + 500);
for (let i = 0; i < 8; i++) expect(await q.schedule({ payload: { n: i }, at }), encodePayload({ n: i }, "msgpack"), {});
const batch = [...Array(20).keys()].map((i) => ({ payload: Buffer.from(JSON.stringify({ b: i })), id: i % 2 ? `node:batch:${i}` : undefined, afterMs: 200, headers: { batch: "1" } }));
(await q.scheduleBatch(batch)).forEach((res, i) => expect(res, batch[i].payload, { batch: "1" }));
for (let i = 0; i < 5; i++) {
  const res = await q.schedule({ payload: Buffer.from("never"), id: `node:cancel:${i}`, afterMs: 400 });
  if (!(await q.cancel(res.id))) throw new Error(`cancel ${res.id}: not waiting`);
  cancelled.push(res.id);
}
const gen = await q.schedule({ payload: Buffer.from("never either"), afterMs: 400 });
await q.cancel(gen.id);
cancelled.push(gen.id);
for (let i = 0; i < 5; i++) {
  const id = `node:resched:${i}`;
  await q.schedule({ payload: Buffer.from("moved"), id, afterMs: 3600000 });
  const due = await q.reschedule(id, { afterMs: 300 });
  expected.push({ id, payload_hex: Buffer.from("moved").toString("hex"), headers: {}, not_before_ms: due.getTime() });
}
await q.schedule({ payload: Buffer.from("second"), id: "node:named:0", afterMs: 300 }); // kept: delivered once, first payload
process.stdout.write(JSON.stringify({ expected, cancelled }) + "\n");
client.disconnect();
