// Package admin reads and acts on delaystream queues by name, without
// building a delaystream.Queue: what operator tools (the delaystream
// command, its web view, metrics exporters) need for any queue they find.
//
//	in, err := admin.New(rdb, "")                       // the default prefix, "ds"
//	queues, err := in.Queues(ctx)                       // discovered on every master
//	reports, err := in.Stats(ctx, "orders")             // queue, per group, per shard
//	msgs, err := in.Peek(ctx, "orders", admin.ListOptions{Limit: 20}) // overdue first
//	dls, err := in.DeadLetters(ctx, "orders", "billing", admin.ListOptions{Reason: "expired"})
//	res, err := in.Redrive(ctx, "orders", "billing", admin.ActionOptions{All: true, DryRun: true})
//
// A queue is found by its record, the hash every part of a queue writes at
// its first call ("<prefix>:1:{<queue>}:q", holding its shard count), and
// its consumer groups are those of its streams. Reads use plain commands
// and are not one atomic snapshot across keys or shards, and never write.
// The writes are the actions, each method's doc saying what it writes:
// waiting messages (Cancel), dead letters (Redrive, Purge), quarantine
// (DeleteQuarantined, RestoreQuarantined), pauses (PauseQueue,
// ResumeQueue, Pause, Resume), and a queue's groups and keys
// (ForgetGroup, DeleteQueue). What moves messages and dead letters goes
// through the queue's own atomic scripts, as a Queue's calls do. Cancel,
// Redrive, Purge and DeleteQueue with DryRun write nothing. What the
// queue's own API does for one message or schedule (Locate, Get,
// Reschedule, the recurring schedules) is done through the Queue that
// [Operator.Queue] returns:
//
//	q, err := in.Queue(ctx, "orders", cron.Option()) // cron: the schedules' spec kind
//	loc, err := q.Locate(ctx, "order:5001:cancel")
//	list, err := q.ListRecurring(ctx)
//
// Dead-letter reasons are one vocabulary (delaystream.Reasons): listings
// show "attempts exhausted", "max deliveries exceeded", "handler asked to
// dead-letter", "expired", "undecodable entry" and "entry deleted while
// pending"; filters take those or their metric labels ("attempts",
// "deliveries", "handler", "expired", "undecodable", "deleted"; see
// delaystream.ParseReason). A filter naming another reason is an error.
//
// Results are structs with JSON tags (snake_case; times RFC 3339, absent
// when zero; ages in milliseconds in fields ending in _ms; payloads whole,
// base64), so that a tool's JSON output and API are the same documents.
//
// Errors wrap delaystream.ErrNotFound (no such queue, group, message or
// dead letter), delaystream.ErrInvalidOption (a malformed name, id,
// option or reason) or delaystream.ErrRunning (DeleteQueue on a queue in
// use); anything else is a Redis or network failure. An
// Operator is safe for concurrent use, starts no goroutines and never
// closes the client it was given.
package admin
