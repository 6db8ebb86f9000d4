// delaystream for Node.js: schedule into delaystream queues on Redis, beside Go services.
//
// The same queues as the Go library (github.com/delaystream/delaystream),
// with the same Lua scripts; the wire format is the Go repository's
// docs/wire.md.

export { Queue, DuplicateError, ShardCountError, encodePayload } from "./queue.js";
export type { Codec, Message, Outcome, Policy, QueueOptions, Scheduled, Waiting } from "./queue.js";
export { InvalidMessageError, WireError, shardOf, MAX_HEADERS, RESERVED_HEADER_PREFIX } from "./wire.js";
export { LOCATE_BATCH, LOCATE_SCAN_LIMIT } from "./locate.js";
export type { Location, Place, PlaceKind } from "./locate.js";
