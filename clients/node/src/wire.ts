// The wire format of docs/wire.md: keys, shard routing, ids, envelopes.
// Pure functions, no I/O.

import { randomBytes } from "node:crypto";

export const LAYOUT_VERSION = 1;
export const MAGIC = 0xd5;
export const VERSION = 0x01;
export const VERSION_DEADLINE = 0x02;
/** The envelope header bytes the scripts that check envelopes take. */
export const HEADER = Buffer.from([0xd5, 0x01, 0x02]);
export const PACKED_KIND = 0x01;
export const SLOTS = 16384;
export const MAX_SHARDS = 1024;
export const MAX_NAME_LEN = 128;
export const MAX_ID_LEN = 256;
export const MAX_HEADERS = 64;
export const MAX_HEADER_LEN = 4096;
export const MAX_DUE_MS = 253402300799999;
export const RESERVED_HEADER_PREFIX = "ds.";
const READ_MAX_HEADERS = 4096;
const MAX_ATTEMPT = 2 ** 31 - 1;
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const CROCKFORD_SET = new Set(Buffer.from(CROCKFORD));

/** Bytes found in Redis that do not follow the wire format. */
export class WireError extends Error {
  override name = "WireError";
}

/** A value a call must not be given; nothing was written. */
export class InvalidMessageError extends Error {
  override name = "InvalidMessageError";
}

// Go's unicode.IsControl: C0, DEL and C1.
function isControl(cp: number): boolean {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

/** Checks a prefix, queue, group or consumer name (stream.ValidateName). */
export function validateName(kind: string, name: string): void {
  if (typeof name !== "string") throw new TypeError(`delaystream: ${kind} name must be a string`);
  const n = Buffer.byteLength(name, "utf8");
  if (n === 0 || n > MAX_NAME_LEN) throw new InvalidMessageError(`delaystream: ${kind} name must be 1 to ${MAX_NAME_LEN} bytes, got ${n}`);
  for (const ch of name) {
    const cp = ch.codePointAt(0)!;
    if (ch === "{" || ch === "}" || /\s/u.test(ch) || isControl(cp) || (cp >= 0xd800 && cp <= 0xdfff)) {
      throw new InvalidMessageError(`delaystream: ${kind} name ${JSON.stringify(name)} contains ${JSON.stringify(ch)} (no braces, spaces or control characters)`);
    }
  }
}

/** Checks a message id (delay.ValidateID): 1 to 256 bytes of UTF-8, no control character. */
export function validateId(id: string): void {
  if (typeof id !== "string") throw new TypeError("delaystream: message id must be a string");
  if (!isWellFormed(id)) throw new InvalidMessageError(`delaystream: message id ${JSON.stringify(id)} is not valid UTF-8`);
  const n = Buffer.byteLength(id, "utf8");
  if (n === 0 || n > MAX_ID_LEN) throw new InvalidMessageError(`delaystream: message id must be 1 to ${MAX_ID_LEN} bytes, got ${n}`);
  for (const ch of id) {
    if (isControl(ch.codePointAt(0)!)) throw new InvalidMessageError(`delaystream: message id ${JSON.stringify(id)} contains a control character`);
  }
}

function isWellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return false;
  }
  return true;
}

/** Checks a message's own headers (at most 64, keys not reserved). */
export function validateHeaders(headers: Record<string, string> | undefined): Record<string, string> {
  if (!headers) return {};
  const keys = Object.keys(headers);
  if (keys.length > MAX_HEADERS) throw new InvalidMessageError(`delaystream: ${keys.length} headers, at most ${MAX_HEADERS}`);
  for (const k of keys) {
    const v = headers[k];
    if (typeof v !== "string") throw new TypeError("delaystream: header values must be strings");
    if (k === "") throw new InvalidMessageError("delaystream: empty header key");
    if (k.startsWith(RESERVED_HEADER_PREFIX)) throw new InvalidMessageError(`delaystream: header key ${JSON.stringify(k)} uses the reserved prefix ${RESERVED_HEADER_PREFIX}`);
    if (Buffer.byteLength(k) > MAX_HEADER_LEN || Buffer.byteLength(v) > MAX_HEADER_LEN) throw new InvalidMessageError(`delaystream: header ${JSON.stringify(k)} longer than ${MAX_HEADER_LEN} bytes`);
  }
  return { ...headers };
}

// --- shard routing (docs/wire.md "Shard routing") ---

export function fnv1a32(data: Uint8Array): number {
  let h = 2166136261;
  for (const b of data) h = Math.imul(h ^ b, 16777619) >>> 0;
  return h >>> 0;
}

export function isGeneratedLayout(data: Uint8Array): boolean {
  if (data.length !== 26 || data[0] < 0x30 || data[0] > 0x37) return false;
  for (const b of data) if (!CROCKFORD_SET.has(b)) return false;
  return true;
}

/** The shard of a message id in a queue of `shards` shards (wire.ShardOf). */
export function shardOf(id: string, shards: number): number {
  if (shards <= 1) return 0;
  let data: Uint8Array = Buffer.from(id, "utf8");
  if (isGeneratedLayout(data)) data = data.subarray(10);
  return fnv1a32(data) % shards;
}

/** The shard of a generated id, from its 16-character random part. */
export function shardOfRandom(random: Uint8Array, shards: number): number {
  return shards <= 1 ? 0 : fnv1a32(random) % shards;
}

function crc16(data: Uint8Array): number {
  let crc = 0;
  for (const b of data) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = (crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1) & 0xffff;
  }
  return crc;
}

/** The Cluster slot of a key, hash tags included (CLUSTER KEYSLOT). */
export function slot(key: string): number {
  let data = Buffer.from(key, "utf8");
  const start = data.indexOf(0x7b);
  if (start >= 0) {
    const end = data.indexOf(0x7d, start + 1);
    if (end > start + 1) data = data.subarray(start + 1, end);
  }
  return crc16(data) % SLOTS;
}

/** The hash tag of shard `i` of `n` (docs/wire.md "Shard tags"). */
export function shardTag(queue: string, i: number, n: number): string {
  if (n === 1) return queue;
  let lo = Math.floor((i * SLOTS) / n);
  let hi = Math.floor(((i + 1) * SLOTS) / n);
  const centre = Math.floor((lo + hi) / 2);
  const half = Math.max(Math.floor((hi - lo) / 32), 8);
  lo = Math.max(lo, centre - half);
  hi = Math.min(hi, centre + half + 1);
  const base = `${queue}:${i}`;
  const inWindow = (t: string) => {
    const s = crc16(Buffer.from(t, "utf8")) % SLOTS;
    return s >= lo && s < hi;
  };
  if (inWindow(base)) return base;
  for (let k = 0; ; k++) if (inWindow(`${base}.${k}`)) return `${base}.${k}`;
}

// --- keys (docs/wire.md "Keys and channels") ---

export interface Lane {
  z: string;
  m: string;
  s: string;
  x: string;
  l: string;
  w: string;
  n: string;
}

export class ShardKeys {
  readonly base: string;
  constructor(readonly prefix: string, readonly queue: string, readonly index: number, readonly shards: number) {
    this.base = `${prefix}:${LAYOUT_VERSION}:{${shardTag(queue, index, shards)}}`;
  }
  private lane(b: string): Lane {
    return { z: b + ":z", m: b + ":m", s: b + ":s", x: b + ":x", l: b + ":l", w: b + ":w", n: b + ":n" };
  }
  main(): Lane {
    return this.lane(this.base);
  }
  retry(group: string): Lane {
    return this.lane(`${this.base}:r:${group}`);
  }
  dead(group: string): string {
    return `${this.base}:d:${group}`;
  }
  groups(): string {
    return this.base + ":g";
  }
  token(t: string): string {
    return `${this.base}:k:${t}`;
  }
  handled(group: string): string {
    return `${this.base}:a:${group}`;
  }
}

export function home(prefix: string, queue: string): string {
  return `${prefix}:${LAYOUT_VERSION}:{${queue}}`;
}

/** A script's channel argument: a shard channel's name follows a space. */
export function channelArg(name: string, sharded: boolean): string {
  return sharded && name ? " " + name : name;
}

// --- varints ---

function uvarint(v: bigint, out: number[]): void {
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
}

function varint(v: bigint, out: number[]): void {
  uvarint(BigInt.asUintN(64, (v << 1n) ^ (v >> 63n)), out);
}

function readUvarint(b: Uint8Array, off: number, what: string): [bigint, number] {
  let x = 0n;
  let s = 0n;
  for (let i = 0; i < 10 && off + i < b.length; i++) {
    const c = b[off + i];
    if (c < 0x80) {
      if (i === 9 && c > 1) break;
      return [x | (BigInt(c) << s), off + i + 1];
    }
    x |= BigInt(c & 0x7f) << s;
    s += 7n;
  }
  throw new WireError(`corrupt envelope: bad varint in ${what}`);
}

function readVarint(b: Uint8Array, off: number, what: string): [bigint, number] {
  const [u, o] = readUvarint(b, off, what);
  const v = u >> 1n;
  return [u & 1n ? ~v : v, o];
}

// --- envelopes (docs/wire.md "Envelope encoding") ---

/** A message's envelope. Times are Unix ms; 0 means none. */
export interface Envelope {
  payload: Buffer;
  headers: Record<string, string>;
  attempt: number;
  createdMs: number;
  deadlineMs: number;
}

export function encodeEnvelope(e: Envelope): Buffer {
  const deadline = e.deadlineMs ? Math.max(e.deadlineMs, 1) : 0;
  const out: number[] = [MAGIC, deadline ? VERSION_DEADLINE : VERSION];
  uvarint(BigInt(Math.min(Math.max(e.attempt, 0), MAX_ATTEMPT)), out);
  varint(BigInt(Math.trunc(e.createdMs)), out);
  if (deadline) varint(BigInt(Math.trunc(deadline)), out);
  const pairs = Object.entries(e.headers).map(([k, v]) => [Buffer.from(k, "utf8"), Buffer.from(v, "utf8")] as const);
  pairs.sort((a, b) => Buffer.compare(a[0], b[0]));
  uvarint(BigInt(pairs.length), out);
  const parts: Buffer[] = [];
  for (const [k, v] of pairs) {
    const h: number[] = [];
    uvarint(BigInt(k.length), h);
    parts.push(Buffer.from(h), k);
    const hv: number[] = [];
    uvarint(BigInt(v.length), hv);
    parts.push(Buffer.from(hv), v);
  }
  return Buffer.concat([Buffer.from(out), ...parts, e.payload]);
}

export function decodeEnvelope(b: Buffer): Envelope {
  if (b.length < 2 || b[0] !== MAGIC) throw new WireError("unknown envelope format: missing envelope magic byte");
  if (b[1] !== VERSION && b[1] !== VERSION_DEADLINE) throw new WireError(`unknown envelope format: envelope version ${b[1]}`);
  let [attempt, off] = readUvarint(b, 2, "attempt");
  let created: bigint;
  [created, off] = readVarint(b, off, "created");
  let deadline = 0n;
  if (b[1] === VERSION_DEADLINE) {
    [deadline, off] = readVarint(b, off, "deadline");
    if (deadline <= 0n) throw new WireError(`corrupt envelope: deadline ${deadline} out of range`);
  }
  let nh: bigint;
  [nh, off] = readUvarint(b, off, "header count");
  if (nh > BigInt(READ_MAX_HEADERS)) throw new WireError(`corrupt envelope: header count ${nh} exceeds ${READ_MAX_HEADERS}`);
  if (attempt > BigInt(MAX_ATTEMPT)) throw new WireError(`corrupt envelope: attempt ${attempt} out of range`);
  const headers: Record<string, string> = {};
  const str = (what: string): Buffer => {
    let n: bigint;
    [n, off] = readUvarint(b, off, what + " length");
    if (n > BigInt(b.length - off)) throw new WireError(`corrupt envelope: ${what} length ${n} exceeds remaining ${b.length - off} bytes`);
    const s = b.subarray(off, off + Number(n));
    off += Number(n);
    return s;
  };
  for (let i = 0n; i < nh; i++) {
    const k = str("header key").toString("utf8");
    headers[k] = str("header value").toString("utf8");
  }
  return { payload: Buffer.from(b.subarray(off)), headers, attempt: Number(attempt), createdMs: Number(created), deadlineMs: Number(deadline) };
}

// --- generated ids (docs/wire.md "Generated ids") ---

export function timePart(ms: number): string {
  let v = BigInt(ms);
  let s = "";
  for (let i = 0; i < 10; i++) {
    s = CROCKFORD[Number(v & 31n)] + s;
    v >>= 5n;
  }
  return s;
}

/** The 16-character random part made from 10 random bytes. */
export function randomPart(raw: Uint8Array): string {
  if (raw.length !== 10) throw new RangeError("random part needs 10 bytes");
  let v = 0n;
  for (const b of raw) v = (v << 8n) | BigInt(b);
  let s = "";
  for (let i = 0; i < 16; i++) s += CROCKFORD[Number((v >> BigInt(75 - 5 * i)) & 31n)];
  return s;
}

export function newRandomPart(): string {
  return randomPart(randomBytes(10));
}

export function generatedId(dueMs: number, random: string): string {
  return timePart(dueMs) + random;
}

export function packedMember(random: string, envelope: Buffer): Buffer {
  return Buffer.concat([Buffer.from([PACKED_KIND]), Buffer.from(random, "ascii"), envelope]);
}

// --- stream entries (docs/wire.md "Main and retry-lane entries") ---

export const RETRY_SEP = 0x1f;

/** A decoded stream entry: the message it carries. */
export interface Entry {
  entryId: string;
  id: string;
  dueMs: number;
  envelope: Envelope;
}

/** Decodes a main or retry-lane stream entry (wire.Decode). */
export function decodeEntry(entryId: string, f: Map<string, Buffer>): Entry {
  const dueB = f.get("d");
  if (dueB === undefined) throw new WireError('field "d" missing');
  if (!/^[+-]?[0-9]+$/.test(dueB.toString("latin1"))) throw new WireError('field "d" is not an integer');
  const due = Number(dueB.toString("latin1"));
  const packed = f.get("p");
  let id: string;
  let raw: Buffer | undefined;
  if (packed !== undefined) {
    if (packed.length < 17 || packed[0] !== PACKED_KIND) throw new WireError("malformed packed member");
    if (!(due >= 0 && due < 2 ** 48)) throw new WireError(`packed member due ${due} out of range`);
    const rnd = packed.subarray(1, 17);
    for (const c of rnd) if (!CROCKFORD_SET.has(c)) throw new WireError("malformed packed member: random part not Crockford base32");
    id = timePart(due) + rnd.toString("ascii");
    raw = packed.subarray(17);
  } else {
    const i = f.get("i");
    if (!i || !i.length) throw new WireError('field "i" missing');
    if (i[0] === RETRY_SEP) throw new WireError('field "i" has no message id');
    raw = f.get("e");
    if (raw === undefined) throw new WireError('field "e" missing');
    const at = i.indexOf(RETRY_SEP);
    id = (at >= 0 ? i.subarray(0, at) : i).toString("utf8");
  }
  return { entryId, id, dueMs: due, envelope: decodeEnvelope(raw) };
}
