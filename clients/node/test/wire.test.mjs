// The shared test vectors (internal/wire/testdata/vectors.json).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { decodeEnvelope, encodeEnvelope, generatedId, packedMember, randomPart, shardOf, shardTag, slot, validateId, validateName, WireError } from "../dist/wire.js";
import { REPO } from "./helpers.mjs";

const V = JSON.parse(readFileSync(new URL("internal/wire/testdata/vectors.json", REPO), "utf8"));

test("shard of an id", () => {
  for (const v of V.shard_of) assert.equal(shardOf(v.id, v.shards), v.shard, `${v.id}/${v.shards}`);
});

test("cluster slots", () => {
  for (const v of V.slots) assert.equal(slot(v.key), v.slot, v.key);
});

test("shard tags", () => {
  for (const v of V.tags) assert.equal(shardTag(v.queue, v.shard, v.shards), v.tag, `${v.queue} ${v.shard}/${v.shards}`);
});

test("envelopes", () => {
  for (const v of V.envelopes) {
    const env = { payload: Buffer.from(v.payload_hex, "hex"), headers: v.headers ?? {}, attempt: v.attempt, createdMs: v.created_ms ?? 0, deadlineMs: v.deadline_ms ?? 0 };
    assert.equal(encodeEnvelope(env).toString("hex"), v.hex);
    assert.deepEqual(decodeEnvelope(Buffer.from(v.hex, "hex")), env);
  }
});

test("generated ids and packed members", () => {
  const v1 = Buffer.from(V.envelopes[0].hex, "hex");
  for (const v of V.generated_ids) {
    if (v.random_bytes_hex) assert.equal(randomPart(Buffer.from(v.random_bytes_hex, "hex")), v.random);
    assert.equal(generatedId(v.due_ms, v.random), v.id);
    assert.equal(packedMember(v.random, v1).toString("hex"), v.packed_member_hex);
  }
});

test("envelopes refused", () => {
  for (const [hex, why] of [
    ["", /magic/],
    ["d503010000", /version 3/],
    ["d50180", /bad varint in attempt/],
    ["d502010000 00".replace(" ", ""), /deadline 0 out of range/],
    ["d5010100010561 62".replace(" ", ""), /header key length 5 exceeds/],
    ["d50101008140", /header count 8193 exceeds 4096/],
  ]) {
    assert.throws(() => decodeEnvelope(Buffer.from(hex, "hex")), (e) => e instanceof WireError && why.test(e.message), hex);
  }
});

test("names and ids checked", () => {
  validateName("queue", "orders:eu");
  for (const bad of ["", "a b", "a{b", "x".repeat(129), "tab\t"]) assert.throws(() => validateName("queue", bad));
  validateId("order:5001:cancel");
  for (const bad of ["", "a\nb", "x".repeat(257), "\x7f", "\ud800"]) assert.throws(() => validateId(bad));
});

test("the scripts are the Go module's, with Go's SHA1s", async () => {
  const { SCRIPTS } = await import("../dist/scripts.js");
  const manifest = JSON.parse(readFileSync(new URL("internal/scripts/manifest.json", REPO), "utf8"));
  assert.deepEqual(Object.keys(SCRIPTS).sort(), Object.keys(manifest.scripts).sort());
  for (const [name, spec] of Object.entries(manifest.scripts)) {
    const src = Buffer.concat(spec.files.map((f) => readFileSync(new URL(`internal/scripts/${f}`, REPO))));
    assert.ok(SCRIPTS[name].source.equals(src), name);
    assert.equal(SCRIPTS[name].sha, spec.sha1, name);
  }
});
