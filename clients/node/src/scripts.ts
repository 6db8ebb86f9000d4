// The Lua scripts, composed from the Go module's files as Go composes them.
//
// The build copies internal/scripts/*.lua and manifest.json into dist/lua:
// one source for every language. Each script's SHA1 is checked against the
// manifest (checked against Go by the Go module's tests) as it loads, so
// this client shares the server's script cache with Go processes
// (docs/wire.md, "Loading the scripts").

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Cluster, Redis } from "ioredis";

export type Client = Redis | Cluster;

interface Manifest {
  layout: number;
  scripts: Record<string, { files: string[]; sha1: string }>;
}

export class Script {
  constructor(readonly name: string, readonly source: Buffer, readonly sha: string) {}

  /** EVALSHA, and EVAL when the server does not have the script (NOSCRIPT: the call did not run). */
  async run(client: Client, keys: (string | Buffer)[], args: (string | number | Buffer)[]): Promise<unknown> {
    try {
      return await client.callBuffer("EVALSHA", this.sha, keys.length, ...keys, ...args);
    } catch (e) {
      if (e instanceof Error && e.message.startsWith("NOSCRIPT")) {
        return await client.callBuffer("EVAL", this.source, keys.length, ...keys, ...args);
      }
      throw e;
    }
  }
}

const dir = new URL("./lua/", import.meta.url);

function load(): Record<string, Script> {
  const manifest = JSON.parse(readFileSync(new URL("manifest.json", dir), "utf8")) as Manifest;
  const out: Record<string, Script> = {};
  for (const [name, spec] of Object.entries(manifest.scripts)) {
    const source = Buffer.concat(spec.files.map((f) => readFileSync(new URL(f, dir))));
    const sha = createHash("sha1").update(source).digest("hex");
    if (sha !== spec.sha1) throw new Error(`delaystream: script ${name} does not match its manifest (a damaged install)`);
    out[name] = new Script(name, source, sha);
  }
  return out;
}

export const SCRIPTS = load();
