// Schedules n messages, one call at a time or in batches, and prints the
// time and CPU it took (JSON): the Node.js side of the bench's "clients"
// scenario (bench/clients.go). Messages due in 1 h, generated ids.
import { parseArgs } from "node:util";
import Redis from "ioredis";
import { Queue } from "../dist/index.js";

const { values: a } = parseArgs({
  options: { addr: { type: "string" }, queue: { type: "string", default: "bench" }, n: { type: "string" }, mode: { type: "string" }, batch: { type: "string", default: "100" }, payload: { type: "string", default: "128" } },
});
const i = a.addr.lastIndexOf(":");
const redis = new Redis({ host: a.addr.slice(0, i), port: Number(a.addr.slice(i + 1)) });
const q = new Queue(redis, a.queue);
const n = Number(a.n);
const batch = Number(a.batch);
const payload = Buffer.alloc(Number(a.payload), "x");
await q.get("warm-up"); // the queue's record, checked once before the clock starts
const t0 = process.hrtime.bigint();
const c0 = process.cpuUsage();
if (a.mode === "one") {
  for (let k = 0; k < n; k++) await q.schedule({ payload, afterMs: 3600000 });
} else {
  for (let k = 0; k < n; k += batch) {
    await q.scheduleBatch(Array.from({ length: Math.min(batch, n - k) }, () => ({ payload, afterMs: 3600000 })));
  }
}
const cpu = process.cpuUsage(c0);
process.stdout.write(JSON.stringify({ elapsed_s: Number(process.hrtime.bigint() - t0) / 1e9, cpu_s: (cpu.user + cpu.system) / 1e6 }) + "\n");
redis.disconnect();
