// Where a message is: the Node.js form of Go's Queue.Locate (locate.lua).

import { SCRIPTS, type Client } from "./scripts.js";
import { RETRY_SEP, type ShardKeys, WireError, decodeEnvelope, decodeEntry, shardOf, validateId } from "./wire.js";

/** The most entries read from each stream, and members scanned per retry set. */
export const LOCATE_SCAN_LIMIT = 10000;
/** The most entries and members one script call reads. */
export const LOCATE_BATCH = 500;
const TRIES = 3;

/** The kinds of Place (Go's PlaceKind values). */
export type PlaceKind = "waiting" | "unread" | "ready" | "pending" | "retrying" | "dead-lettered" | "handled" | "quarantined";

/** One place of a message; which fields are set depends on kind. Times are Unix ms (0: none). */
export interface Place {
  kind: PlaceKind;
  group: string;
  entryId: string;
  retryLane: boolean;
  attempt: number;
  dueMs: number;
  problem: string;
  consumer: string;
  deliveries: number;
  idleMs: number;
  reason: string;
  lastError: string;
  handledAtMs: number;
  dropped: boolean;
}

/** Every place of one message id in its shard; partial when a scan limit cut the search. */
export interface Location {
  id: string;
  shard: number;
  places: Place[];
  partial: boolean;
}

function place(kind: PlaceKind, p: Partial<Place> = {}): Place {
  return { kind, group: "", entryId: "", retryLane: false, attempt: 0, dueMs: 0, problem: "", consumer: "", deliveries: 0, idleMs: 0, reason: "", lastError: "", handledAtMs: 0, dropped: false, ...p };
}

const s = (v: unknown): string => (v === null || v === undefined ? "" : Buffer.isBuffer(v) ? v.toString("utf8") : String(v));
const int = (v: unknown): number => {
  const n = Number(s(v));
  return Number.isFinite(n) ? n : 0;
};

function fields(v: unknown): Map<string, Buffer> {
  const flat = Array.isArray(v) ? v : [];
  const out = new Map<string, Buffer>();
  for (let i = 0; i + 1 < flat.length; i += 2) out.set(s(flat[i]), flat[i + 1] as Buffer);
  return out;
}

function attemptOf(eid: string, f: Map<string, Buffer>): number {
  try {
    return decodeEntry(eid, f).envelope.attempt;
  } catch (e) {
    if (e instanceof WireError) return 0;
    throw e;
  }
}

class Builder {
  waiting?: Place;
  unread: Place[] = [];
  groups: Place[] = [];
  quarantined: Place[] = [];
  constructor(readonly loc: Location, readonly sharded: boolean) {}

  location(): Location {
    if (this.waiting) this.loc.places.push(this.waiting);
    this.groups.sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : 0));
    this.loc.places.push(...this.unread, ...this.groups, ...this.quarantined);
    return this.loc;
  }

  addReply(reply: unknown[]): string {
    if (reply.length !== 4) throw new Error(`delaystream: locate: unexpected reply of ${reply.length} items`);
    const w = reply[0];
    if (Array.isArray(w) && w.length === 2) {
      const p = place("waiting", { dueMs: int(w[0]) });
      if (w[1] === null) p.problem = "missing envelope";
      else {
        try {
          p.attempt = decodeEnvelope(w[1] as Buffer).attempt;
        } catch {
          p.problem = "unknown envelope format";
        }
      }
      this.waiting = p;
    }
    if (int(reply[1]) === 1) this.loc.partial = true;
    for (const f of (reply[2] as unknown[]) ?? []) this.add(f);
    return s(reply[3]);
  }

  add(f: unknown): void {
    if (!Array.isArray(f) || f.length !== 5) return;
    const [where, g, eid] = [s(f[0]), s(f[1]), s(f[2])];
    const extra = Array.isArray(f[4]) ? (f[4] as unknown[]) : [];
    switch (where) {
      case "stream": {
        const attempt = attemptOf(eid, fields(f[3]));
        if (!extra.length) this.unread.push(place("unread", { entryId: eid, attempt }));
        for (const per of extra) if (Array.isArray(per) && per.length === 5) this.entry(s(per[0]), eid, false, attempt, per.slice(1));
        break;
      }
      case "retry-stream":
        this.entry(g, eid, true, attemptOf(eid, fields(f[3])), extra);
        break;
      case "retry":
        this.retry(g, eid, f[3]);
        break;
      case "dead": {
        const d = fields(f[3]);
        this.groups.push(place("dead-lettered", { group: g, entryId: this.sharded ? `${eid}@${this.loc.shard}` : eid, attempt: int(d.get("a")), deliveries: int(d.get("n")), reason: s(d.get("r")), lastError: s(d.get("x")) }));
        break;
      }
      case "handled": {
        const parts = s(f[3]).split("|");
        if (parts.length >= 4 && (parts[2] === "handled" || parts[2] === "dropped")) {
          this.groups.push(place("handled", { group: g, handledAtMs: int(parts[0]), attempt: int(parts[1]), dropped: parts[2] === "dropped", consumer: parts.slice(3).join("|") }));
        }
        break;
      }
      case "quarantine":
        this.quarantined.push(place("quarantined", { group: g, entryId: eid, reason: s(fields(f[3]).get("r")) }));
        break;
    }
  }

  entry(g: string, eid: string, retry: boolean, attempt: number, st: unknown[]): void {
    if (st.length !== 4) return;
    const state = s(st[0]);
    if (state === "pending") this.groups.push(place("pending", { group: g, entryId: eid, retryLane: retry, attempt, consumer: s(st[1]), idleMs: int(st[2]), deliveries: int(st[3]) }));
    else if (state === "ready") this.groups.push(place("ready", { group: g, entryId: eid, retryLane: retry, attempt }));
  }

  retry(g: string, score: string, v: unknown): void {
    const p = place("retrying", { group: g, dueMs: Math.trunc(Number(score)) || 0 });
    if (Array.isArray(v) && v.length === 2) {
      const member = Buffer.isBuffer(v[0]) ? v[0] : Buffer.from(s(v[0]));
      const at = member.indexOf(RETRY_SEP);
      if (at >= 0) p.entryId = member.subarray(at + 1).toString("utf8");
      if (v[1] !== null) {
        try {
          p.attempt = decodeEnvelope(v[1] as Buffer).attempt;
        } catch {
          // left 0: an envelope that does not decode
        }
      }
    }
    this.groups.push(p);
  }
}

/** Searches the id's shard with locate.lua, in bounded calls (see Go's Queue.Locate). */
export async function locate(client: Client, keysOf: ShardKeys[], known: string[], id: string): Promise<[Location, string[]]> {
  validateId(id);
  const shard = shardOf(id, keysOf.length);
  let groups = known;
  for (let i = 0; i < TRIES; i++) {
    const [loc, recorded] = await search(client, keysOf, shard, id, groups);
    if (loc) return [loc, groups];
    groups = [...new Set([...groups, ...recorded!])].sort();
  }
  throw new Error(`delaystream: locate ${id}: the groups of shard ${shard} changed during each of ${TRIES} searches`);
}

async function search(client: Client, keysOf: ShardKeys[], shard: number, id: string, groups: string[]): Promise<[Location | null, string[] | null]> {
  const k = keysOf[shard];
  const main = k.main();
  const keys = [k.groups(), main.z, main.m, main.s, main.x];
  for (const g of groups) {
    const r = k.retry(g);
    keys.push(r.z, r.m, r.s, r.x, k.dead(g));
  }
  for (const g of groups) keys.push(k.handled(g));
  const b = new Builder({ id, shard, places: [], partial: false }, keysOf.length > 1);
  for (let cursor = ""; ; ) {
    const reply = (await SCRIPTS["locate.lua"].run(client, keys, [id, LOCATE_SCAN_LIMIT, LOCATE_BATCH, cursor, ...groups])) as unknown[];
    if (reply.length === 2 && s(reply[0]) === "groups") return [null, (reply[1] as unknown[]).map(s).sort()];
    cursor = b.addReply(reply);
    if (cursor === "") return [b.location(), null];
  }
}
