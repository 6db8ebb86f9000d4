// Scheduling into a delaystream queue: the same scripts and states as Go's Queue.

import { randomBytes } from "node:crypto";
import { pack } from "msgpackr";
import { type Location, locate } from "./locate.js";
import { type Client, SCRIPTS } from "./scripts.js";
import {
  InvalidMessageError,
  MAX_DUE_MS,
  MAX_SHARDS,
  ShardKeys,
  channelArg,
  decodeEnvelope,
  encodeEnvelope,
  generatedId,
  home,
  newRandomPart,
  packedMember,
  shardOf,
  shardOfRandom,
  validateHeaders,
  validateId,
  validateName,
} from "./wire.js";

/** What a schedule does with an id already waiting. */
export type Policy = "keep" | "replace" | "reject";
/** What scheduling did with one message. */
export type Outcome = "created" | "replaced" | "kept" | "rejected";
/** The payload encoding of values that are not bytes (Go's codec.Msgpack, the default, or codec.JSON). */
export type Codec = "msgpack" | "json";

const POLICIES: Record<Policy, string> = { keep: "k", replace: "r", reject: "e" };
const OUTCOMES: Record<number, Outcome> = { 1: "created", 2: "replaced", 3: "kept", 4: "rejected" };

/** One message to schedule. */
export interface Message {
  /** Bytes are sent as they are; anything else is encoded with the queue's codec. */
  payload?: unknown;
  /** The message's id; omitted: a unique id is generated (and returned). */
  id?: string;
  /** Due after this many milliseconds (default 0: due now). */
  afterMs?: number;
  /** Due at this time (a Date, or Unix ms); give afterMs or at, not both. */
  at?: Date | number;
  headers?: Record<string, string>;
  /** Default: the queue's policy ("keep"). */
  policy?: Policy;
  /** A group dead-letters the message unhandled after this time. */
  deadline?: Date | number;
}

/** What scheduling did with one message: dueMs is the stored due time (the waiting message's own when kept or rejected). */
export interface Scheduled {
  id: string;
  dueMs: number;
  due: Date;
  outcome: Outcome;
}

/** A waiting message as get reads it. Times are Unix ms (0: none). */
export interface Waiting {
  id: string;
  dueMs: number;
  payload: Buffer;
  headers: Record<string, string>;
  attempt: number;
  createdMs: number;
  deadlineMs: number;
}

export interface QueueOptions {
  /** Key prefix, as Go's WithPrefix (default "ds"). */
  prefix?: string;
  /** The queue's shard count, as Go's WithShards; omitted: the count Redis records (1 for a new queue). */
  shards?: number;
  codec?: Codec;
  policy?: Policy;
  /** Largest payload in bytes (default 1 MiB, as Go). */
  maxPayload?: number;
  /** Messages per script call (default 500, at most 5000). */
  batchSize?: number;
  /** Lifetime of the call tokens that make a re-sent call act once; 0: none (a client that never re-sends). */
  tokenTtlMs?: number;
}

/** A message with an id already waiting and the policy "reject". */
export class DuplicateError extends Error {
  override name = "DuplicateError";
  constructor(readonly id: string, readonly dueMs: number) {
    super(`delaystream: message ${JSON.stringify(id)} is already waiting (due ${dueMs} ms)`);
  }
}

/** The queue's shard count in Redis differs from the one given. */
export class ShardCountError extends Error {
  override name = "ShardCountError";
}

interface Item {
  index: number;
  shard: number;
  id: string; // "" for a generated id
  random: string;
  member: Buffer;
  when: string;
  relative: boolean;
  ms: number;
  policy: string;
}

function toMs(v: Date | number, what: string): number {
  const ms = v instanceof Date ? v.getTime() : v;
  if (typeof ms !== "number" || !Number.isFinite(ms)) throw new InvalidMessageError(`delaystream: ${what} is not a time`);
  return Math.ceil(ms);
}

function whenArg(m: Message): { when: string; relative: boolean; ms: number } {
  if (m.afterMs !== undefined && m.at !== undefined) throw new InvalidMessageError("delaystream: give afterMs or at, not both");
  if (m.at !== undefined) {
    const ms = toMs(m.at, "at");
    if (ms > MAX_DUE_MS) throw new InvalidMessageError("delaystream: due time is after year 9999");
    return { when: `a${Math.max(ms, 0)}`, relative: false, ms: Math.max(ms, 0) };
  }
  const after = m.afterMs ?? 0;
  if (typeof after !== "number" || !Number.isFinite(after) || after < 0) throw new InvalidMessageError(`delaystream: afterMs ${after} is negative or not finite`);
  const ms = Math.ceil(after);
  if (ms > MAX_DUE_MS) throw new InvalidMessageError("delaystream: delay reaches beyond year 9999");
  return { when: `r${ms}`, relative: true, ms };
}

/** Encodes a payload: bytes as they are, anything else with the codec. */
export function encodePayload(value: unknown, codec: Codec): Buffer {
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value);
  if (codec === "json") return Buffer.from(JSON.stringify(value), "utf8");
  return Buffer.from(pack(value));
}

function tokenTtl(client: Client): number {
  // ioredis re-sends a command whose reply was lost when it reconnects
  // (autoResendUnfulfilledCommands) and retries a request up to
  // maxRetriesPerRequest times: the token outlives every re-send.
  const o = ((client as unknown as { options?: Record<string, unknown> }).options ?? {}) as Record<string, unknown>;
  const ro = ((o.redisOptions as Record<string, unknown>) ?? o) as Record<string, unknown>;
  if (ro.autoResendUnfulfilledCommands === false && ro.maxRetriesPerRequest === 0) return 0;
  const retries = typeof ro.maxRetriesPerRequest === "number" ? ro.maxRetriesPerRequest : 20;
  const connect = typeof ro.connectTimeout === "number" ? ro.connectTimeout : 10000;
  return Math.max(retries, 1) * (connect + 2000) + 5000;
}

function str(v: unknown): string {
  return Buffer.isBuffer(v) ? v.toString("utf8") : String(v);
}

/**
 * A delaystream queue to schedule into, on an ioredis Redis or Cluster client.
 *
 * The name, prefix and shard count are those of the Go side. Every method
 * rejects with ioredis's errors as they come; a call that failed may or may
 * not have run, and sending it again (same arguments) acts once.
 */
export class Queue {
  readonly prefix: string;
  readonly codec: Codec;
  readonly policy: Policy;
  private shards?: number;
  private keys: ShardKeys[] = [];
  private located: string[] = [];
  private readonly maxPayload: number;
  private readonly batchSize: number;
  private readonly ttl: number;

  constructor(readonly client: Client, readonly name: string, opts: QueueOptions = {}) {
    this.prefix = opts.prefix ?? "ds";
    validateName("prefix", this.prefix);
    validateName("queue", name);
    if (opts.shards !== undefined && !(Number.isInteger(opts.shards) && opts.shards >= 1 && opts.shards <= MAX_SHARDS)) {
      throw new InvalidMessageError(`delaystream: shards must be 1 to ${MAX_SHARDS}`);
    }
    this.shards = opts.shards;
    this.codec = opts.codec ?? "msgpack";
    this.policy = opts.policy ?? "keep";
    if (!(this.policy in POLICIES)) throw new InvalidMessageError(`delaystream: unknown policy ${this.policy}`);
    this.maxPayload = opts.maxPayload ?? 1 << 20;
    this.batchSize = opts.batchSize ?? 500;
    if (this.batchSize < 1 || this.batchSize > 5000) throw new InvalidMessageError("delaystream: batchSize must be 1 to 5000");
    this.ttl = opts.tokenTtlMs ?? tokenTtl(client);
  }

  private async ready(): Promise<void> {
    if (this.keys.length) return;
    const h = home(this.prefix, this.name);
    let shards = this.shards;
    if (shards === undefined) {
      const v = await this.client.hget(h + ":q", "shards");
      shards = v !== null && /^[1-9][0-9]*$/.test(v) ? Number(v) : 1;
    }
    const reply = (await SCRIPTS["meta.lua"].run(this.client, [h + ":q", h + ":z", h + ":s"], [shards, randomBytes(12).toString("hex")])) as unknown[];
    const count = Number(reply[0]);
    if (count !== shards) throw new ShardCountError(`delaystream: queue ${JSON.stringify(this.name)} has ${count} shard(s) in Redis, this queue was given ${shards}`);
    this.shards = shards;
    this.keys = Array.from({ length: shards }, (_, i) => new ShardKeys(this.prefix, this.name, i, shards!));
  }

  private wake(k: ShardKeys): string {
    return channelArg(k.main().w, this.keys.length > 1);
  }

  private token(k: ShardKeys, keys: string[], args: (string | number | Buffer)[]): void {
    if (this.ttl > 0) {
      keys.push(k.token(randomBytes(16).toString("hex")));
      args.push(this.ttl);
    }
  }

  private item(index: number, m: Message): Item {
    if (m.id !== undefined) validateId(m.id);
    const payload = encodePayload(m.payload ?? Buffer.alloc(0), this.codec);
    if (payload.length > this.maxPayload) throw new InvalidMessageError(`delaystream: payload of ${payload.length} bytes exceeds ${this.maxPayload}`);
    const headers = validateHeaders(m.headers);
    const { when, relative, ms } = whenArg(m);
    let deadlineMs = 0;
    if (m.deadline !== undefined) {
      deadlineMs = toMs(m.deadline, "deadline");
      const due = relative ? Date.now() + ms : ms;
      if (deadlineMs <= due) throw new InvalidMessageError(`delaystream: deadline ${deadlineMs} ms is not after the due time ${due} ms`);
    }
    const policy = POLICIES[m.policy ?? this.policy];
    if (policy === undefined) throw new InvalidMessageError(`delaystream: unknown policy ${m.policy}`);
    const env = encodeEnvelope({ payload, headers, attempt: 1, createdMs: Date.now(), deadlineMs });
    const n = this.keys.length;
    if (m.id) return { index, shard: shardOf(m.id, n), id: m.id, random: "", member: env, when, relative, ms, policy };
    const random = newRandomPart();
    return { index, shard: shardOfRandom(Buffer.from(random, "ascii"), n), id: "", random, member: packedMember(random, env), when, relative, ms, policy };
  }

  /** Schedules one message; a rejected duplicate rejects with DuplicateError. */
  async schedule(m: Message): Promise<Scheduled> {
    const [res] = await this.scheduleBatch([m]);
    if (res.outcome === "rejected") throw new DuplicateError(res.id, res.dueMs);
    return res;
  }

  /**
   * Schedules many messages in one call per shard; results in order. Every
   * message is checked before anything is sent. A rejected duplicate is
   * reported, not thrown.
   */
  async scheduleBatch(messages: Message[]): Promise<Scheduled[]> {
    await this.ready();
    const items = messages.map((m, i) => this.item(i, m));
    const byShard = new Map<number, Item[]>();
    for (const it of items) byShard.set(it.shard, [...(byShard.get(it.shard) ?? []), it]);
    const out: Scheduled[] = new Array(items.length);
    for (const [shard, its] of [...byShard].sort((a, b) => a[0] - b[0])) {
      for (let i = 0; i < its.length; i += this.batchSize) {
        await this.send(this.keys[shard], its.slice(i, i + this.batchSize), out);
      }
    }
    return out;
  }

  private async send(k: ShardKeys, items: Item[], out: Scheduled[]): Promise<void> {
    const lane = k.main();
    const args: (string | number | Buffer)[] = [this.wake(k)];
    let keys: string[];
    let script;
    if (items.every((it) => !it.id)) {
      keys = [lane.z];
      for (const it of items) args.push(it.member, it.when);
      // Nobody else knows a generated id: a second run of a call due far
      // enough ahead only finds its messages waiting.
      if (!items.every((it) => it.relative && it.ms >= 2 * this.ttl)) this.token(k, keys, args);
      script = SCRIPTS["schedule_generated.lua"];
    } else {
      keys = [lane.z, lane.m];
      for (const it of items) args.push(it.id, it.member, it.when, it.policy);
      this.token(k, keys, args);
      script = SCRIPTS["schedule.lua"];
    }
    const reply = (await script.run(this.client, keys, args)) as unknown[];
    items.forEach((it, j) => {
      const status = Number(reply[2 * j]);
      const dueMs = Number(reply[2 * j + 1]);
      out[it.index] = { id: it.id || generatedId(dueMs, it.random), dueMs, due: new Date(dueMs), outcome: OUTCOMES[status] };
    });
  }

  private byId(id: string): ShardKeys {
    validateId(id);
    return this.keys[shardOf(id, this.keys.length)];
  }

  /** Removes a waiting message; false when it is not waiting (unknown, or already promoted). */
  async cancel(id: string): Promise<boolean> {
    await this.ready();
    const k = this.byId(id);
    const keys = [k.main().z, k.main().m];
    const args: (string | number | Buffer)[] = [id];
    this.token(k, keys, args);
    return Number(await SCRIPTS["cancel.lua"].run(this.client, keys, args)) === 1;
  }

  /** Moves a waiting message's due time; its new due time, or null when it is not waiting. */
  async reschedule(id: string, when: { afterMs?: number; at?: Date | number }): Promise<Date | null> {
    await this.ready();
    const k = this.byId(id);
    const w = whenArg(when);
    const keys = [k.main().z, k.main().m];
    const args: (string | number | Buffer)[] = [id, w.when, this.wake(k)];
    this.token(k, keys, args);
    const due = Number(await SCRIPTS["reschedule.lua"].run(this.client, keys, args));
    return due < 0 ? null : new Date(due);
  }

  /** Every place of the message id in the queue: waiting, in a stream, retrying, dead-lettered, handled, quarantined. */
  async locate(id: string): Promise<Location> {
    await this.ready();
    const [loc, groups] = await locate(this.client, this.keys, this.located, id);
    this.located = groups;
    return loc;
  }

  /** A waiting message's due time and envelope, or null when it is not waiting. */
  async get(id: string): Promise<Waiting | null> {
    await this.ready();
    const k = this.byId(id);
    const reply = (await SCRIPTS["get.lua"].run(this.client, [k.main().z, k.main().m], [id])) as unknown[];
    if (!reply.length || reply[1] === null) return null;
    const env = decodeEnvelope(reply[1] as Buffer);
    return { id, dueMs: Number(str(reply[0])), payload: env.payload, headers: env.headers, attempt: env.attempt, createdMs: env.createdMs, deadlineMs: env.deadlineMs };
  }
}
