// Package web is the web view of the delaystream command-line tool,
// `delaystream serve`: server-rendered pages over the same
// admin.Operator the other commands use, so that the browser and the
// terminal show the same figures and act the same way.
//
//	srv, err := web.New(rdb, "ds", web.WithReadOnly())
//	go srv.Run(ctx)                          // samples the charts' figures
//	err = http.ListenAndServe("127.0.0.1:8080", srv)
//
// # Pages
//
//	/                                 the prefixes served (redirects when one)
//	/p/<prefix>/                      its queues: waiting, overdue, next due, stream, groups, pending, dead letters, quarantined
//	/p/<prefix>/q/<queue>             one queue: its figures, a chart of waiting and overdue over time,
//	                                  each group's consumers, pending, oldest pending age, lag, retry lane
//	                                  and dead letters; the next due messages; the first dead letters of
//	                                  each group with redrive and purge buttons; the recurring schedules
//	                                  (next and last occurrence, how late it fired) with pause, resume and
//	                                  delete buttons; the quarantine
//	/p/<prefix>/q/<queue>/next        its waiting messages, earliest first
//	/p/<prefix>/q/<queue>/recurring   its recurring schedules, by id
//	/p/<prefix>/q/<queue>/quarantine  its quarantine, oldest first
//	/p/<prefix>/q/<queue>/g/<group>   one group: its figures, its consumers, its dead letters
//
// Every list is paged: ?limit= (default [DefaultListLimit], at most
// [MaxListLimit]) and ?after= (queues by name, recurring schedules by id,
// dead letters by entry id) or ?offset= (waiting messages and quarantine,
// which have no stable key to resume after), with a link to the next
// page; the queue page shows the first few of each of its lists, with a
// link to the list. A consumer group made on a queue's stream by other
// means, with a name delaystream cannot use (a space in it, say), is
// shown with the figures Redis keeps of it, marked, and offers no action.
//
// The JSON API under /api/ serves admin's documents (the CLI's --json
// output): /api/p/<prefix>/queues, /api/p/<prefix>/q/<queue> (add
// ?shards=1 for each shard), .../history (the chart's samples), .../next,
// .../recurring, .../quarantine and .../g/<group>/dead (payloads as bounded
// previews, see below). Its lists are paged as the pages are: the body is
// the page (a JSON array) and a Link header (rel="next") names the next one.
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
//   - DNS rebinding: every request (pages, static files, the API) whose
//     Host header does not name this server is refused with 421
//     Misdirected Request before anything else reads it. The names it
//     answers to are the address the request came in on (IP and port),
//     "localhost", "127.0.0.1" and "[::1]" with that port when that
//     address is a loopback one, and those of [WithAllowedHosts] (the
//     names a proxy forwards, or that reach a server listening beyond
//     loopback). So a web page whose own name was made to resolve to
//     127.0.0.1 cannot read the pages (nor the CSRF token in them) or post
//     actions. A handler called without an http.Server (no local address
//     in the request's context) answers the names of WithAllowedHosts only.
//   - Actions (redrive, purge: one dead letter or all of a group; pause and
//     resume of a queue or a group; pause, resume, delete a recurring
//     schedule; restore, delete a quarantined entry) are POSTs
//     only. Each form carries a random token made when the process starts,
//     checked in constant time; and net/http's CrossOriginProtection
//     refuses cross-site browser requests (Sec-Fetch-Site / Origin). A
//     POST failing either is answered 403 Forbidden. Redirects after an
//     action go to local paths only.
//   - Every action, and every refused post, is logged (Info; Warn when it
//     failed or was refused) with the remote address of the request and,
//     with basic auth, the user.
//   - The status message shown after an action's redirect is a fixed
//     sentence chosen by a code in the query, with counts: never text
//     taken from the request. Error pages do not repeat query parameters.
//   - [WithReadOnly] hides every button and answers every POST 403.
//   - [WithBasicAuth] protects every path, static files and the API
//     included (credentials compared in constant time).
//   - Payloads are never served whole, and the listings never read them
//     whole: pages and API show at most [WithPreviewBytes] bytes of
//     cli.Preview of a payload (text as is, msgpack as JSON, else hex),
//     marked when cut, with the size; the listings read at most
//     [ReadBytes] bytes of each payload, cut in Redis
//     (admin.ListOptions.MaxPayloadBytes), so a page of large messages
//     costs neither the network nor this process their size. An
//     envelope's headers are read whole (delaystream's producers bound
//     them: 64 keys and values of at most 4 KiB each). Whole payloads are
//     still read, a bounded number of them, by the group figures (XINFO
//     STREAM replies with each stream's first and last entries) and with
//     each recurring schedule shown (its definition holds its payload).
//   - Every list is paged (see Pages), so no page grows with the data.
//   - Every response forbids framing and sniffing and carries a Content
//     Security Policy allowing only this server's own scripts and styles.
//   - Binding to loopback unless told otherwise is the serve command's
//     job (see cmd/delaystream/serve.go).
//
// A Server is safe for concurrent use and never closes the Redis client
// it was given.
package web
