// Package web is the web view of the delaystream command-line tool,
// `delaystream serve`: server-rendered pages over the same
// admin.Inspector the other commands use, so that the browser and the
// terminal show the same figures and act the same way.
//
//	srv, err := web.New(rdb, "ds", web.WithReadOnly())
//	go srv.Run(ctx)                          // samples the charts' figures
//	err = http.ListenAndServe("127.0.0.1:8080", srv)
//
// # Pages
//
//	/                              the prefixes served (redirects when one)
//	/p/<prefix>/                   its queues: waiting, overdue, next due, stream, groups, pending, dead letters, quarantined
//	/p/<prefix>/q/<queue>          one queue: its figures, a chart of waiting and overdue over time,
//	                               each group's consumers, pending, oldest pending age, lag, retry lane
//	                               and dead letters; the next due messages; the first dead letters of
//	                               each group with redrive and purge buttons; the recurring schedules
//	                               (next and last occurrence, how late it fired) with pause, resume and
//	                               delete buttons; the quarantine
//	/p/<prefix>/q/<queue>/g/<group> one group: its figures, its consumers, its dead letters page by page
//
// The JSON API under /api/ serves admin's documents (the CLI's --json
// output): /api/p/<prefix>/queues, /api/p/<prefix>/q/<queue> (add
// ?shards=1 for each shard), .../history (the chart's samples), .../next
// and .../g/<group>/dead (payloads as bounded previews, see below).
// Static files (one stylesheet, one small script) are embedded in the
// binary; nothing is built or fetched on the user's machine, and the pages
// work without the script (which only asks before purging and refreshes
// the chart).
//
// # Over time
//
// Redis keeps no history, so [Server.Run] samples every queue of every
// prefix served (admin's Stats: a few commands per queue and group)
// every sample interval, from the moment it starts, into a ring of a fixed
// number of samples per queue (default 720: an hour at 5 s), for at most
// [MaxSampledQueues] queues. A restarted server starts an empty chart.
//
// # Safety
//
//   - Actions (redrive, purge: one dead letter or all of a group; pause and
//     resume of a queue or a group; pause, resume, delete a recurring
//     schedule) are POSTs
//     only. Each form carries a random token made when the process starts,
//     checked in constant time; and net/http's CrossOriginProtection
//     refuses cross-site browser requests (Sec-Fetch-Site / Origin). A
//     POST failing either is answered 403 Forbidden. Redirects after an
//     action go to local paths only.
//   - [WithReadOnly] hides every button and answers every POST 403.
//   - [WithBasicAuth] protects every path, static files and the API
//     included (credentials compared in constant time).
//   - Payloads are never served whole: pages and API show at most
//     [WithPreviewBytes] bytes of cli.Preview of a payload (text as
//     is, msgpack as JSON, else hex), marked when cut, with the size.
//   - Every response forbids framing and sniffing and carries a Content
//     Security Policy allowing only this server's own scripts and styles.
//   - Binding to loopback unless told otherwise is the serve command's
//     job (see cmd/delaystream/serve.go).
//
// A Server is safe for concurrent use and never closes the Redis client
// it was given.
package web
