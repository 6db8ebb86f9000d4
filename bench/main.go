// Command bench measures delaystream against asynq v0.26 on the same Redis:
// burst delivery, trickle lateness, scheduling throughput, memory per waiting
// message, Redis CPU and commands per message, crash redelivery and idle cost.
//
// It starts its own redis-server (persistence off) on a free loopback port,
// or uses REDIS_ADDR when -allow-flush is given (every scenario run starts
// with FLUSHALL). Each scenario runs -runs times per system; the table shows
// medians. See README.md for how to read it.
//
//	go run .             # full run, defaults (10-12 minutes)
//	go run . -quick      # smoke run, under a minute
//	go run . -only burst,idle -asynq=false -json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/redistest"
)

// config holds the command-line settings.
type config struct {
	n          int           // burst size
	rate       int           // trickle rate, msg/s
	duration   time.Duration // trickle duration
	runs       int           // runs per scenario and system; medians reported
	only       map[string]bool
	asynq      bool
	raw        bool // also run the raw XREADGROUP floor reference in burst, trickle and crash
	shards     int  // shards of delaystream's queue on the single server
	floor      bool // also run rt-floor (two round trips per message, no queue) in trickle and curve
	json       bool
	quick      bool
	workers    int
	payload    int
	memN       int
	oneN       int           // messages for one-at-a-time scheduling
	python     string        // clients: the Python interpreter
	batch      int           // items per ScheduleBatch call
	parallel   int           // goroutines for parallel scheduling
	idle       time.Duration // idle measurement window
	crashRuns  int
	cpuProfile string
	allowFlush bool
	moverBatch int // 0 = library default
	// consumerPromotes: delaystream's consumer promotes its queue (the
	// library's default) instead of a separate mover.Mover.
	consumerPromotes bool
	// handledRecords: delaystream's group keeps handled records this long
	// (delaystream.WithHandledRecords); 0: none (the default).
	handledRecords time.Duration
	queuesN        int // queues served by one process in the "queues" scenario
	// queues is how many queues a delaystream or asynq system serves, its
	// messages sent to each in turn (0 or 1: one, "bench"); the curve sets
	// it from curveQueues.
	queues int

	// crash: what the killed consumer holds, in its handlers (its workers)
	// and read ahead (group.WithPrefetch)
	crashWorkers, crashPrefetch int

	// The cost issue's scenarios (opt-in: optIn).
	backlogN  int  // messages waiting (due in 1 h) under the backlog trickle
	backlogAB bool // backlog: also the same trickle with nothing waiting, in each run
	// backlogElsewhere fills the backlog into another queue of the same
	// Redis: same memory, the trickle's own delayed set small (a control).
	backlogElsewhere bool
	backlogSettle    time.Duration   // backlog: pause between the fill and the trickle
	bigN             int             // burst1m size
	trimWait         time.Duration   // burst1m: how long to wait for trimming after delivery
	curveRates       []int           // curve: trickle rates, msg/s
	curveDuration    time.Duration   // curve: trickle duration per rate and system (at least)
	curveMinMsgs     int             // curve: a rate's window is long enough for at least this many messages
	curvePrecisions  []time.Duration // curve: delaystream also at these precisions (WithPrecision)
	execTimes        bool            // trickle, curve: note each command's and script's execution time (slow log)
	curveSplit       bool            // curve: also run each system's producer alone, and the server idle, over the same window
	curveSystems     []string        // curve: only these systems (nil: all)
	curveNoResend    bool            // curve: also run each delaystream system with a client that never resends (no call tokens)
	curveLead        time.Duration   // curve: every message due this much later (0: the trickle's delays), measured in steady state
	curveQueues      int             // curve: the rate spread over this many queues (see queues)
	dsMaxRetries     int             // delaystream's client: go-redis MaxRetries (0: its default, 3; -1: none, so no call tokens)
	// scriptFloorInterval is how often script-floor's taker runs.
	scriptFloorInterval time.Duration
	crashdupDuration    time.Duration // crashdup: length of one run
	crashdupKills       int           // crashdup: kills per run
	crashdupRate        int           // crashdup: messages per second, over the child and the survivor

	// limit: a rate-limited group over several consumers (limit.go).
	limitRate, limitBurst, limitConsumers int
	limitDuration                         time.Duration
	// limitcap: a concurrency-capped group over the same processes.
	limitConcurrency int
	limitHold        time.Duration
}

var scenarioNames = []string{"burst", "trickle", "schedule", "memory", "layouts", "crash", "idle", "queues", "cluster", "backlog", "burst1m", "curve", "crashdup", "recurring", "limit", "limitcap", "clients"}

// optIn are the scenarios a run without -only leaves out: each takes
// minutes at its real size.
var optIn = map[string]bool{"clients": true, "backlog": true, "burst1m": true, "curve": true, "crashdup": true, "recurring": true, "limit": true, "limitcap": true}

func main() {
	if len(os.Args) > 2 && os.Args[1] == childFlag {
		os.Exit(childMain(os.Args[2:]))
	}
	var cfg config
	var only string
	flag.IntVar(&cfg.n, "n", 50000, "burst size: messages all due at the same instant")
	flag.IntVar(&cfg.rate, "rate", 500, "trickle rate, messages per second")
	flag.DurationVar(&cfg.duration, "duration", 20*time.Second, "trickle duration")
	flag.IntVar(&cfg.runs, "runs", 3, "runs per scenario and system; the table shows medians")
	flag.StringVar(&only, "only", "", "comma-separated scenarios to run ("+strings.Join(scenarioNames, ",")+"); efficiency figures come from burst and trickle; default all but backlog, burst1m and curve")
	flag.BoolVar(&cfg.asynq, "asynq", true, "also run asynq v0.26 through the same scenarios")
	flag.BoolVar(&cfg.raw, "raw", true, "also run the raw XREADGROUP/XACK reader (a floor reference, not the library) in burst, trickle and crash")
	flag.IntVar(&cfg.shards, "shards", 1, "shards of delaystream's queue on the single server (a control for the cluster scenario: sharding without spreading over masters)")
	flag.BoolVar(&cfg.floor, "floor", true, "also run rt-floor (two round trips per message, no queue: the least Redis CPU per message any design pays) in trickle and curve, and script-floor (one script per message by the Redis clock, deliveries taken every -script-floor-interval, no queue) in curve")
	flag.BoolVar(&cfg.json, "json", false, "also print JSON lines (one per metric and system, plus one per run) to stdout")
	flag.BoolVar(&cfg.quick, "quick", false, "small sizes for a smoke run (under a minute); skips asynq's crash scenario")
	flag.IntVar(&cfg.workers, "workers", 8, "handler workers per consumer (both systems)")
	flag.IntVar(&cfg.payload, "payload", 128, "payload size in bytes (>= 16)")
	flag.IntVar(&cfg.memN, "mem-n", 100000, "messages scheduled 1 h ahead for the memory scenario")
	flag.StringVar(&cfg.python, "python", "python3", "clients: the Python interpreter with the redis and msgpack packages (make bench passes Debian's)")
	flag.IntVar(&cfg.oneN, "one-n", 5000, "messages scheduled one call at a time in the schedule scenario")
	flag.IntVar(&cfg.batch, "batch", 1000, "items per ScheduleBatch call")
	flag.IntVar(&cfg.parallel, "parallel", 16, "goroutines for parallel one-at-a-time scheduling")
	flag.DurationVar(&cfg.idle, "idle", 10*time.Second, "idle measurement window")
	flag.IntVar(&cfg.crashRuns, "crash-runs", 0, "runs of the crash scenario (default -runs)")
	flag.IntVar(&cfg.crashWorkers, "crash-workers", 100, "crash: messages the killed consumer holds in its handlers (its workers)")
	flag.IntVar(&cfg.crashPrefetch, "crash-prefetch", 100, "crash: messages the killed consumer holds read ahead (group.WithPrefetch; asynq: more workers)")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (producers, mover, consumers) to this file")
	flag.BoolVar(&cfg.consumerPromotes, "consumer-promotes", false, "delaystream: the consumer promotes its queue (the library's default for a consumer) instead of a separate mover.Mover (burst, trickle, curve)")
	flag.DurationVar(&cfg.handledRecords, "handled-records", 0, "delaystream: the group keeps a record of each handled message this long (delaystream.WithHandledRecords); 0 = none, the default")
	flag.IntVar(&cfg.moverBatch, "mover-batch", 0, "delaystream mover batch size (mover.WithBatchSize); 0 = the library default")
	flag.IntVar(&cfg.queuesN, "queues-n", 100, "queues served by one process (one consumer each, one client) in the queues scenario")
	flag.BoolVar(&cfg.allowFlush, "allow-flush", false, "with REDIS_ADDR: allow FLUSHALL on that server (required)")
	flag.IntVar(&cfg.backlogN, "backlog-n", 1000000, "backlog: messages waiting (due in 1 h) under the trickle (-rate, -duration)")
	flag.BoolVar(&cfg.backlogAB, "backlog-ab", true, "backlog: each run also runs the trickle with nothing waiting (order alternating by run)")
	flag.BoolVar(&cfg.backlogElsewhere, "backlog-elsewhere", false, "backlog: fill the waiting messages into another queue of the same Redis (a control: same memory, small delayed set under the trickle)")
	flag.DurationVar(&cfg.backlogSettle, "backlog-settle", 0, "backlog: pause between filling and the trickle (to tell a fill's aftermath from the backlog itself)")
	flag.IntVar(&cfg.bigN, "burst1m-n", 1000000, "burst1m: messages all due at the same instant")
	flag.DurationVar(&cfg.trimWait, "trim-wait", 90*time.Second, "burst1m: longest wait, after all is delivered, for the stream to be trimmed below 1 % of n")
	curveRates := flag.String("curve-rates", "50,500,5000", "curve: trickle rates in msg/s, comma-separated")
	flag.DurationVar(&cfg.curveDuration, "curve-duration", 10*time.Second, "curve: trickle duration per rate and system (at least)")
	flag.IntVar(&cfg.curveMinMsgs, "curve-min-msgs", 2000, "curve: each rate's window is long enough for at least this many messages (50 msg/s: 40 s at 2000)")
	flag.IntVar(&cfg.dsMaxRetries, "ds-max-retries", 0, "delaystream's go-redis client MaxRetries: 0 = go-redis's default (3); -1 = never resend a command, so that Schedule carries no call token (see docs/reliability.md)")
	flag.BoolVar(&cfg.execTimes, "exec-times", false, "trickle, curve: log every command's execution time (SLOWLOG at a threshold of 0 while a run lasts, its cost included) and note each script's and command's µs per message and per call")
	flag.DurationVar(&cfg.scriptFloorInterval, "script-floor-interval", 100*time.Millisecond, "curve: how often script-floor takes what is due (the precision it stands for)")
	flag.BoolVar(&cfg.curveSplit, "curve-split", false, "curve: after each system's run, run its producer alone (the same messages at the same pace, nothing promoting or consuming) on a fresh server over the same window, and once per rate and run the server with nothing connected: the table then splits each system's Redis CPU per message into its producer's and the rest (delivery)")
	flag.BoolVar(&cfg.curveNoResend, "curve-no-resend", false, "curve: also run delaystream at each precision with a client that never sends a command again (go-redis MaxRetries -1, so Schedule carries no call token), as \"... no-resend\", in the same run")
	flag.DurationVar(&cfg.curveLead, "curve-lead", 0, "curve: every message is due this much later than the trickle's delays (lead plus [0, 3 s]), and each window is measured in steady state, once the first messages are due and delivery keeps the producer's pace (a queue whose messages wait minutes); -curve-split does not apply")
	flag.IntVar(&cfg.curveQueues, "curve-queues", 1, "curve: spread each rate over this many queues of one server, one message to each in turn (delaystream: a Queue per queue, its group promoting it, as -consumer-promotes; asynq: one Server serving every queue, weight 1 each; the floors are no queue and stay as they are)")
	curveSystems := flag.String("curve-systems", "", "curve: run only these systems (comma-separated names as the table prints them, e.g. \"delaystream p=100ms,asynq,script-floor\"); empty: all")
	curvePrecisions := flag.String("curve-precisions", "10ms,100ms", "curve: delaystream also runs at these precisions (WithPrecision), comma-separated; empty: only the default (0)")
	flag.DurationVar(&cfg.crashdupDuration, "crashdup-duration", 12*time.Second, "crashdup: length of one run")
	flag.IntVar(&cfg.crashdupKills, "crashdup-kills", 5, "crashdup: child consumers killed (SIGKILL) per run")
	flag.IntVar(&cfg.crashdupRate, "crashdup-rate", 1500, "crashdup: messages per second, shared by the child and the survivor (8 workers, 10 ms handlers each)")
	flag.IntVar(&cfg.limitRate, "limit-rate", 200, "limit: the group's rate limit, messages per second")
	flag.IntVar(&cfg.limitBurst, "limit-burst", 20, "limit: the rate limit's burst")
	flag.IntVar(&cfg.limitConsumers, "limit-consumers", 3, "limit, limitcap: consumer processes of the group (this binary re-executed; the first also promotes)")
	flag.DurationVar(&cfg.limitDuration, "limit-duration", 60*time.Second, "limit, limitcap: the measurement window")
	flag.IntVar(&cfg.limitConcurrency, "limit-concurrency", 10, "limitcap: the group's concurrency cap (WithConcurrencyLimit)")
	flag.DurationVar(&cfg.limitHold, "limit-hold", 20*time.Millisecond, "limitcap: how long each handler takes")
	flag.Parse()
	var err error
	if cfg.curvePrecisions, err = parsePrecisions(*curvePrecisions); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if cfg.curveRates, err = parseRates(*curveRates); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if cfg.curveSystems, err = parseCurveSystems(*curveSystems, curveSystemNames(cfg)); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}

	if cfg.quick {
		cfg.n = min(cfg.n, 5000)
		cfg.duration = min(cfg.duration, 4*time.Second)
		cfg.runs = 1
		cfg.memN = min(cfg.memN, 10000)
		cfg.oneN = min(cfg.oneN, 500)
		cfg.idle = min(cfg.idle, 2*time.Second)
		cfg.backlogN = min(cfg.backlogN, 100000)
		cfg.bigN = min(cfg.bigN, 100000)
		cfg.curveDuration = min(cfg.curveDuration, 3*time.Second)
		cfg.curveMinMsgs = 0
	}
	if cfg.curveQueues < 1 || cfg.curveQueues > 1000 {
		fmt.Fprintln(os.Stderr, "bench: -curve-queues must be from 1 to 1000")
		os.Exit(2)
	}
	if cfg.curveLead > 0 && cfg.curveSplit {
		fmt.Fprintln(os.Stderr, "bench: -curve-split does not apply with -curve-lead")
		os.Exit(2)
	}
	if cfg.backlogN < 1 || cfg.bigN < 1 {
		fmt.Fprintln(os.Stderr, "bench: -backlog-n and -burst1m-n must be >= 1")
		os.Exit(2)
	}
	if cfg.crashRuns == 0 {
		cfg.crashRuns = cfg.runs
	}
	if cfg.crashWorkers < 1 || cfg.crashPrefetch < 0 {
		fmt.Fprintln(os.Stderr, "bench: -crash-workers must be >= 1 and -crash-prefetch >= 0")
		os.Exit(2)
	}
	if cfg.limitConsumers < 1 || cfg.limitRate < 1 || cfg.limitBurst < 1 || cfg.limitConcurrency < 1 || cfg.limitHold <= 0 || cfg.limitDuration <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -limit-consumers, -limit-rate, -limit-burst and -limit-concurrency must be >= 1, -limit-hold and -limit-duration > 0")
		os.Exit(2)
	}
	if cfg.payload < 16 {
		fmt.Fprintln(os.Stderr, "bench: -payload must be >= 16")
		os.Exit(2)
	}
	if cfg.scriptFloorInterval <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -script-floor-interval must be > 0")
		os.Exit(2)
	}
	cfg.only = map[string]bool{}
	if only != "" {
		for _, s := range strings.Split(only, ",") {
			s = strings.TrimSpace(s)
			if s == "efficiency" {
				s = "burst"
			}
			ok := false
			for _, n := range scenarioNames {
				ok = ok || n == s
			}
			if !ok {
				fmt.Fprintf(os.Stderr, "bench: unknown scenario %q (have %s)\n", s, strings.Join(scenarioNames, ","))
				os.Exit(2)
			}
			cfg.only[s] = true
		}
	} else {
		for _, n := range scenarioNames {
			cfg.only[n] = !optIn[n]
		}
	}
	// The libraries' background warnings go to stderr; info lines would drown the progress.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	ctx := context.Background()
	addr := os.Getenv("REDIS_ADDR")
	var srv *redistest.Server
	if addr == "" {
		var err error
		// Persistence off (redistest adds --save "" --appendonly no).
		srv, err = redistest.Spawn()
		if err != nil {
			return err
		}
		defer srv.Stop()
		addr = srv.Addr
	} else if !cfg.allowFlush {
		return fmt.Errorf("REDIS_ADDR=%s: every scenario run starts with FLUSHALL; pass -allow-flush to accept that", addr)
	}
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	if err := admin.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", addr, err)
	}

	m := machineInfo(ctx, admin, addr, srv != nil)
	printHeader(os.Stdout, m, cfg)
	if cfg.json {
		b, _ := json.Marshal(map[string]any{"type": "machine", "machine": m})
		fmt.Println(string(b))
	}

	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	b := &bench{cfg: cfg, addr: addr, admin: admin, res: newResults()}
	start := time.Now()
	systems := []string{sysDS}
	if cfg.asynq {
		systems = append(systems, sysAsynq)
	}
	for _, sc := range scenarioNames {
		if !cfg.only[sc] {
			continue
		}
		logf("== %s", sc)
		switch sc {
		case "burst":
			sys := systems
			if cfg.raw {
				sys = append(append([]string(nil), systems...), sysRaw)
			}
			b.repeat(ctx, sc, sys, cfg.runs, b.burst)
		case "trickle":
			sys := systems
			if cfg.raw {
				sys = append(append([]string(nil), systems...), sysRaw)
			}
			if cfg.floor {
				sys = append(append([]string(nil), sys...), sysFloor)
			}
			b.repeat(ctx, sc, sys, cfg.runs, b.trickle)
		case "schedule":
			b.repeat(ctx, sc, systems, cfg.runs, b.schedule)
		case "clients":
			b.repeat(ctx, sc, clientSystems, cfg.runs, b.clients)
		case "memory":
			b.repeat(ctx, sc, systems, cfg.runs, b.memory)
		case "layouts":
			b.repeat(ctx, sc, []string{sysDS}, cfg.runs, b.layoutsRun)
		case "crash":
			sys := systems
			if cfg.quick && cfg.asynq {
				sys = []string{sysDS}
				b.res.note(sc, sysAsynq, "skipped in -quick (asynq recovers a killed worker's tasks only after its 30 s lease, a 30 s grace and a 1 min recoverer tick)")
			}
			if cfg.raw {
				sys = append(append([]string(nil), sys...), sysRaw)
			}
			b.repeat(ctx, sc, sys, cfg.crashRuns, b.crash)
		case "idle":
			b.repeat(ctx, sc, systems, cfg.runs, b.idleCost)
		case "queues":
			b.repeat(ctx, sc, []string{sysDS}, cfg.runs, b.manyQueues)
		case "backlog":
			b.repeat(ctx, sc, []string{sysDS}, cfg.runs, b.backlog)
		case "burst1m":
			b.repeat(ctx, sc, []string{sysDS}, cfg.runs, b.burstBig)
		case "recurring":
			b.repeat(ctx, sc, []string{sysDS}, cfg.runs, b.recurringCost)
		case "limit":
			b.repeat(ctx, sc, []string{sysDS}, cfg.runs, b.limitRun)
		case "limitcap":
			b.repeat(ctx, sc, []string{sysDS}, cfg.runs, b.limitCapRun)
		case "curve":
			sys := curveSystemNames(cfg)
			if !cfg.asynq {
				sys = slices.DeleteFunc(sys, func(s string) bool { return s == sysAsynq })
			}
			if cfg.curveSystems != nil {
				sys = slices.DeleteFunc(sys, func(s string) bool { return !slices.Contains(cfg.curveSystems, s) })
			}
			b.curve(ctx, sys)
		case "crashdup":
			b.repeat(ctx, sc, []string{sysDS}, cfg.runs, b.crashdup)
		case "cluster":
			// delaystream only: the same queue unsharded and sharded, each
			// with 1 mover + 1 consumer and 2 + 2 (clusterSpecs), on a
			// cluster of its own (or REDIS_CLUSTER_ADDRS with -allow-flush).
			cl, err := openCluster(ctx, cfg)
			if err != nil {
				logf("cluster: %v", err)
				b.res.note(sc, clusterSpecs[0].name(), "not run: "+err.Error())
				continue
			}
			b.cl = cl
			b.repeat(ctx, sc, clusterSystems(), cfg.runs, b.clusterRun)
			cl.Close()
			b.cl = nil
		}
	}
	logf("done in %s", time.Since(start).Round(time.Second))
	fmt.Println()
	printTable(os.Stdout, b.res, cfg)
	printCurveTable(os.Stdout, b.res, cfg)
	printCrashdupTable(os.Stdout, b.res)
	printClusterTable(os.Stdout, b.res, cfg)
	fmt.Printf("\nload average at end: %s\n", loadAvg())
	if cfg.json {
		b.res.printJSON(os.Stdout)
		printCurveJSON(os.Stdout, b.res, cfg)
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000")+" "+format+"\n", args...)
}

// machine describes where the figures were taken.
type machine struct {
	Date       string `json:"date"`
	CPUs       int    `json:"nproc"`
	CPUModel   string `json:"cpu_model"`
	GoVersion  string `json:"go_version"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Kernel     string `json:"kernel"`
	Redis      string `json:"redis_version"`
	RedisAddr  string `json:"redis_addr"`
	OwnServer  bool   `json:"own_server"`
	LoadAvg    string `json:"load_avg"`
	Asynq      string `json:"asynq_version"`
	Library    string `json:"library_commit"`
	GoRedis    string `json:"go_redis_version"`
}

func machineInfo(ctx context.Context, rdb *redis.Client, addr string, own bool) machine {
	m := machine{
		Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), RedisAddr: addr, OwnServer: own, LoadAvg: loadAvg(),
		Asynq: "v0.26.0", GoRedis: redis.Version(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if _, v, ok := strings.Cut(l, ":"); ok {
					m.CPUModel = strings.TrimSpace(v)
					break
				}
			}
		}
	}
	if out, err := exec.Command("nproc").Output(); err == nil {
		fmt.Sscan(string(out), &m.CPUs)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Library = libraryCommit()
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		m.Redis = infoField(info, "redis_version")
	}
	return m
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// libraryCommit describes the library tree the bench was built against:
// HEAD of the enclosing repository and the library paths with uncommitted
// changes (bench/ itself is not counted).
func libraryCommit() string {
	out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (not run from bench/ in a git checkout)"
	}
	s := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--", ".", ":!bench", ":!go.work", ":!go.work.sum").Output()
	if err == nil {
		dirs := map[string]bool{}
		var list []string
		for _, l := range strings.Split(strings.TrimRight(string(st), "\n"), "\n") {
			if len(l) < 4 || strings.HasSuffix(l, "_test.go") {
				continue
			}
			d, _, _ := strings.Cut(strings.TrimSpace(l[3:]), "/")
			if !dirs[d] {
				dirs[d] = true
				list = append(list, d)
			}
		}
		if len(list) > 0 {
			s += " + uncommitted changes in " + strings.Join(list, ", ")
		}
	}
	return s
}
