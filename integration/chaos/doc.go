// Command chaos is delaystream's Jepsen-style check of acknowledged writes:
// real processes against a real redis-server with its append-only file on,
// faults injected all along, and every acknowledged operation checked
// against a ledger kept outside Redis.
//
// # Running it
//
// From the integration module (the Makefile's `make chaos` runs the long
// mode):
//
//	go run ./chaos                          # short: ~50 s, 6000 messages
//	go run ./chaos -mode long               # long: ~6 min, 100k messages
//	go run ./chaos -mode long -fsync everysec
//	DELAYSTREAM_TLS=1 go run ./chaos        # every connection over TLS
//
// Flags: -messages overrides the mode's count, -seed repeats a run (the seed
// is printed), -dir keeps the work directory (ledgers, child logs, the
// AOF, redis-server's log; without it a temporary directory is used and
// removed after a passing run, kept after a failing one), -summary writes
// the figures as JSON. The exit status is 0 when no violation was found,
// 1 when some were, 2 when the run itself failed. TestChaosShort runs the
// short mode (so `make test` does) and asserts the exit status and the
// figures.
//
// It needs redis-server (Redis >= 7.0) on PATH, as the rest of the
// integration tests do. In TLS mode (DELAYSTREAM_TLS=1) the server listens
// on TLS only, with internal/redistest's certificates (generated for the
// run, or DELAYSTREAM_TLS_DIR's).
//
// # What runs
//
// The program re-executes itself with -child for each child process, so
// that it can SIGKILL them: P producers, two movers and two consumer groups
// ("billing" and "audit") of three consumers each, all through the front
// door (package delaystream) with go-redis's default client options, as a
// user would have them. The parent starts redis-server (appendonly yes,
// appendfsync always by default, RDB off) on a free loopback port, the
// consumers (and waits for both groups, so that no trim can take what a
// group has not read), the movers, then the producers.
//
// Producers send their share of the messages over the send window, one at
// a time (Schedule) or ten at a time (ScheduleBatch), a quarter of them
// with generated ids, due After(d) or At(now+d) with d random between the
// mode's bounds. About 12 % are then cancelled (before, around or after
// their due time: Cancel races promotion), 12 % rescheduled with At once
// or twice (also racing promotion). One in 400 is poison: every handler
// call fails, so each group dead-letters it after 4 attempts. Other
// handler calls fail at random (8 %), so that retries run through the
// groups' retry lanes (backoff 100 ms doubling to 1 s).
//
// Faults, one at a time: a consumer SIGKILLed every 2 s and a mover every
// 5 s, each restarted at once under a new name; and spread evenly over the
// time messages are sent and fall due, Redis-wide faults: CLIENT PAUSE
// WRITE and ALL and DEBUG SLEEP (2.5 s each, longer than the groups'
// 2 s visibility timeout, so that every pending entry becomes
// reclaimable), CLIENT KILL of every normal and pub/sub connection, and
// once, in the middle of the run, a SIGKILL of redis-server and a restart
// from its AOF on the same port. The short mode has six Redis-wide
// faults, the long mode fifteen.
//
// # The ledger
//
// Every process appends records to a file of its own (see ledger.go), each
// one write(2), so what a process wrote before it was killed is in the
// file. A producer records each call after it returned, with its outcome:
// acknowledged (nil error), unknown (error), Cancel true / false / error,
// Reschedule moved / not found / error, with the call's start and end
// times. A consumer records each handler call inside the handler, before
// it returns and so before the entry can be acknowledged: group, message,
// stream (queue or retry lane), entry id, Message.Due, attempt, deliveries,
// outcome; and every dead letter (Hooks.OnDeadLettered) and data-loss
// report (Hooks.OnDataLoss). Redis is read only to decide when the run has
// drained (nothing waiting, nothing pending, every group at the end of its
// streams) and, at the end, for the dead-letter streams (a cross-check of
// the hook, which a kill can cut off) and the quarantine.
//
// # What it checks
//
// A violation of any of these makes the exit status 1:
//
//   - Lost: every acknowledged schedule that was not cancelled (Cancel
//     returned true) and had no failed Cancel is handled successfully in
//     every group, or dead-lettered there (poison must be dead-lettered).
//   - Never early: for every delivery, the entry id's time (when Redis
//     appended it to the stream, XADD *, by the Redis clock) is at or after
//     Message.Due; the handler runs after the append, so it ran no earlier
//     than due by the Redis clock. This is as much as can be asserted
//     honestly: the handler's own clock is another clock (on this one host
//     the same, and the lateness figures use it, but they assert nothing),
//     and Redis stamps a delivery only through the append. Stream ids never
//     go backwards, so a Redis clock stepped back would make the check
//     lenient, never wrong the other way.
//   - Last due time: a first delivery from the queue stream carries
//     Message.Due equal to the due time of the last acknowledged Schedule or
//     Reschedule (or to the target of a later Reschedule that failed, whose
//     outcome is unknown). With the previous check it is delivered no
//     earlier than its last due time, never at a superseded one.
//   - Cancelled: a message whose Cancel returned true is never delivered,
//     in any group, on any attempt.
//   - Duplicates: per group, successful handlings of one message (by id)
//     beyond the first are at most the entries in flight at the faults: for
//     a consumer kill, the larger of the killed consumer's pending entries
//     (queue stream and retry lane) read just before and just after the
//     kill; for a pause, sleep or connection kill, every consumer's pending
//     entries, read in the same MULTI/EXEC as the fault command; for the
//     restart, the larger of the pending entries before the kill and after
//     the restart. A duplicate needs an entry that was pending when a fault
//     struck, so the sum is a bound; it is printed per group.
//   - Once per occurrence: the parent defines a recurring schedule firing
//     every second before the movers start (the movers' Run tops it up;
//     they are killed along the run) and deletes it before the drain. In
//     every group each occurrence from the first after the definition to
//     the last a second before the deletion is handled, each from one
//     queue stream entry (a second entry would be an occurrence created
//     twice), and none after the deletion is delivered.
//   - Unexpected: nothing is delivered that no producer sent; nothing is
//     quarantined; no consumer reports data loss; no ledger line is torn.
//
// Calls that go-redis sent twice (it re-sends a command whose connection
// dropped, so a call that spanned a connection kill or the restart may
// run twice) must not act twice: the producer's calls carry tokens that
// make a second run return the first run's reply (internal/delay/once.go). So these
// are violations too: a message delivered before the due time Schedule
// returned or created twice by a re-sent Schedule (twins), and a Cancel
// that returned false for a message no group received ("false but
// re-sent"). Reported, not judged: the number of schedules whose outcome
// is unknown and of messages dead-lettered for other reasons than poison.
// The table also gives the lateness of first
// deliveries, faults by kind, and after each Redis-wide fault how soon the
// first entry was appended and handled by each group.
//
// # appendfsync everysec
//
// With -fsync everysec the restart may lose writes Redis acknowledged, and
// the run measures that instead of failing on it: losses of acknowledged
// schedules, cancels and reschedules made in the 5 s before the kill, and
// duplicates beyond the bound when the restart lost something, are
// reported as restart losses; the same outside that window are still
// violations. What everysec can lose, precisely: Redis appends every write
// to the AOF with write(2) before it replies (in beforeSleep), and a
// background thread fsyncs the file once a second. A crash of redis-server
// alone (SIGKILL, OOM kill, a segfault) therefore loses nothing the kernel
// was given: the page cache survives the process. The exception: while the
// previous background fsync is still running, Redis postpones the write(2)
// itself, for up to 2 s (then it writes anyway and counts one
// aof_delayed_fsync in INFO persistence, which the table prints from just
// before the kill), and it keeps replying meanwhile; a crash during a
// postponement loses the postponed writes, up to about 2 s of them. A
// crash of the machine (kernel panic, power loss) loses what was not yet
// fsynced: up to about 1 s of acknowledged writes, 2 s or more with slow
// disks. The chaos run kills the process, not the machine, so on a healthy
// disk it should measure no loss in either mode; with appendfsync always
// Redis fsyncs before it replies, and even the machine's crash loses
// nothing acknowledged.
package main
