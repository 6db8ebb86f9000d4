// Command delaystream inspects and operates delaystream queues on Redis
// from a terminal or a script: which queues exist, what waits and what is
// overdue, which consumer group is behind or stuck and since when, the dead
// letters and the quarantine; and it cancels, reschedules, redrives and
// purges.
//
// Install it with
//
//	go install github.com/delaystream/delaystream/cmd/delaystream@latest
//
// # Connecting
//
//	--redis-url, $REDIS_URL   redis://[user:password@]host:port[/db], rediss:// for TLS
//	                          (default redis://localhost:6379); several comma-separated
//	                          host:port ("redis://a:7000,b:7001") name Cluster seed nodes
//	--cluster                 use a Cluster client even with one seed address
//	--prefix, $DELAYSTREAM_PREFIX   the queues' key prefix (default "ds")
//	--tls-ca, --tls-cert, --tls-key, --tls-insecure   TLS files (PEM) and verification
//
// # Commands
//
//	queues                          the queues under the prefix, found on every master, with their figures
//	stats <queue>                   waiting, overdue, next due, stream, quarantine; per group; --per-shard
//	peek <queue>                    the earliest waiting messages: overdue first, then upcoming
//	get <queue> <id>                one waiting message, its payload in full
//	cancel <queue> <id>             remove a waiting message
//	reschedule <queue> <id>         --in 10m (Redis clock) or --at 2025-01-02T15:04:05Z
//	groups <queue>                  pending, oldest pending age, lag, consumers, retry lane, dead letters
//	forget-group <queue> <group>    retire a group for good: trimming no longer waits for it
//	pause|resume <queue> [group]    stop (or restart) a queue's promotion or a group's consumers in every
//	                                process; kept in Redis, shown in the PAUSED columns of queues, stats, groups
//	dlq ls|show|redrive|purge       a group's dead letters; redrive and purge by id, by --from/--to/--since
//	                                and --reason with --all, or all; --dry-run writes nothing
//	quarantine ls <queue>           members the mover could not promote, with their reason
//	recurring ls <queue>            recurring schedules: spec, state, next and last occurrence, how late it fired
//	recurring define <queue> <id>   --every 30s or --cron "0 9 * * MON" --zone Europe/Berlin, --payload,
//	                                --header k=v, --missed skip|fire-once; the same definition again is kept
//	recurring pause|resume|rm <queue> <id>   pause, resume or delete a schedule (rm asks for confirmation)
//	watch [queue...]                a live view refreshing every --interval, with depth and lag bars
//	serve                           the web view (loopback by default): queues, groups, dead letters
//	                                with redrive and purge buttons; see internal/web
//
// Every read command takes --json and then prints one JSON document (the
// structs of package github.com/delaystream/delaystream/admin, with a
// payload preview added where there is a payload; snake_case fields, times
// in RFC 3339, ages in milliseconds) and nothing else on stdout.
//
// Destructive commands (cancel, reschedule, dlq redrive, dlq purge,
// recurring rm) ask for
// confirmation when stdin is a terminal; otherwise they need --yes, and
// without it refuse with exit code 4, having written nothing.
//
// # Exit codes
//
//	0  success
//	1  failure: Redis unreachable, a command failed
//	2  usage: unknown command or flag, bad argument
//	3  not found: no such queue, group, message or dead letter
//	   (dlq redrive / purge: some of the ids given were not found; the others were acted on)
//	4  not confirmed: a destructive command was declined, or run without a terminal and without --yes
//
// Errors are printed on stderr, prefixed "delaystream: ".
package main
