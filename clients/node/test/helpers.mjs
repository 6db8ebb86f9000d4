// A throwaway redis-server for the tests; without redis-server they fail, naming what to install.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Redis from "ioredis";

export const REPO = new URL("../../../", import.meta.url);

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

export async function startRedis() {
  if (spawnSync("redis-server", ["--version"]).error) {
    throw new Error("redis-server (Redis >= 7.0) is required: apt-get install -y redis-server");
  }
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "ds-node-redis-"));
  const proc = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], { stdio: "ignore" });
  const client = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on("error", () => {}); // refused while the server starts: tried again below
  const deadline = Date.now() + 10000;
  for (;;) {
    try {
      await client.connect();
      await client.ping();
      break;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  return {
    port,
    client: () => new Redis({ port, host: "127.0.0.1" }),
    async stop() {
      client.disconnect();
      proc.kill("SIGKILL");
    },
  };
}
