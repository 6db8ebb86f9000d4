// Package inspect is every read and every operator action of the
// delaystream command-line tool, as a plain Go API that returns structs:
// the cobra commands of cmd/delaystream and the web view are thin layers
// over it, so that both show the same figures and act the same way.
//
// An [Inspector] wraps one redis.UniversalClient (a single server,
// Sentinel or Cluster client; see [Connect] to build one from a URL) and
// one key prefix, and knows no queue in advance:
//
//	rdb, err := inspect.Connect(inspect.ConnConfig{URL: "redis://localhost:6379"})
//	in, err := inspect.New(rdb, inspect.WithPrefix("ds"))
//	queues, err := in.Queues(ctx)                       // discovered, on every master
//	st, err := in.Stats(ctx, "orders", inspect.StatsOptions{})
//	msgs, err := in.Peek(ctx, "orders", 20)             // overdue first, then upcoming
//	dls, err := in.DeadLetters(ctx, "orders", "billing", inspect.ListOptions{Limit: 50})
//	res, err := in.Redrive(ctx, "orders", "billing", inspect.Selection{All: true}, inspect.ActionOptions{DryRun: true})
//
// # How it finds things
//
// Queues are discovered by their record, the HASH "<prefix>:1:{<queue>}:q"
// every part of a queue writes at its first call, which also holds the
// queue's shard count (stream.Discover: SCAN on every master). A queue
// named by the caller is resolved the same way (one HGET); a queue with
// no record is reported with [ErrNotFound], except an unsharded queue
// used before records existed, recognised by its delayed set or stream.
// Consumer groups are those of the queue's streams (XINFO GROUPS on every
// shard): a group is known once one of its consumers has run.
//
// # Reads and writes
//
// Reads use the core's public API (delay.Queue Stats, ShardStats, Peek and
// Get; group.ReadShardStats; group.DeadLetters; stream.ReadQuarantine and
// stream.ReadInfo) and plain commands (XINFO CONSUMERS, XLEN, SCAN). The
// only writes are the actions: [Inspector.Cancel], [Inspector.Reschedule],
// [Inspector.Redrive] and [Inspector.Purge], each through the core's
// atomic scripts; Redrive and Purge accept [ActionOptions].DryRun, which
// resolves the selection and writes nothing. Figures read from several
// keys or shards are not one atomic snapshot.
//
// # Results
//
// Every result is a struct with JSON tags (snake_case; times RFC 3339,
// absent when zero; ages and durations in milliseconds, fields ending in
// _ms), so the CLI's --json output and the web view's API are the same
// documents. Payloads are carried whole (base64 in JSON) and with a
// short human [Preview]: text as is, msgpack (the default codec) decoded to
// JSON, anything else in hex.
//
// # Errors
//
// Errors wrap [ErrNotFound] (no such queue, group, message or dead letter)
// or [ErrInvalid] (a malformed argument: a name, an id, a range) where
// callers branch on them; anything else is a Redis or network failure.
//
// An Inspector is safe for concurrent use, starts no goroutines and never
// closes the client it was given.
package inspect
