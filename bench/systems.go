package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/delay"
	"github.com/delaystream/delaystream/internal/group"
	"github.com/delaystream/delaystream/internal/mover"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// System names as printed.
const (
	sysDS    = "delaystream"
	sysAsynq = "asynq"
	sysRaw   = "ds-raw-floor"
)

const (
	benchQueue = "bench"
	benchGroup = "bench"
	asynqType  = "bench"
)

// when is a due time: absolute (at) or relative (in).
type when struct {
	at  time.Time
	in  time.Duration
	abs bool
}

// delivery is what a handler saw.
type delivery struct {
	payload  []byte
	due      time.Time // delaystream: Message.Due (Redis clock, ms); asynq: the due time written into the payload
	appended time.Time // delaystream: stream entry id time (Redis clock); zero for asynq
}

// handler is called once per delivery, on the consumer's worker goroutine.
type handler func(ctx context.Context, d delivery) error

// system is one implementation under test: a producer plus, once Start is
// called, everything that delivers (mover and one consumer with the
// configured workers).
type system interface {
	Name() string
	ScheduleOne(ctx context.Context, payload []byte, w when) error
	// ScheduleMany schedules all payloads: delaystream with ScheduleBatch
	// calls of the batch size, asynq (which has no batch API) with parallel
	// Enqueue calls.
	ScheduleMany(ctx context.Context, payloads [][]byte, ws []when) error
	Start(ctx context.Context, h handler) error
	Stop()
	Close()
}

func newSystem(name, addr string, cfg config) (system, error) {
	if base, ok := strings.CutSuffix(name, noResendSuffix); ok {
		if !isDS(base) {
			return nil, fmt.Errorf("unknown system %q", name)
		}
		cfg.dsMaxRetries = -1
		s, err := newSystem(base, addr, cfg)
		if err != nil {
			return nil, err
		}
		s.(*dsSystem).noResend = true
		return s, nil
	}
	if p, ok, err := precisionOf(name); err != nil || ok {
		if err != nil {
			return nil, err
		}
		s, err := newDS(addr, cfg, false)
		if err != nil {
			return nil, err
		}
		s.precision = p
		return s, nil
	}
	switch name {
	case sysDS, sysRaw:
		return newDS(addr, cfg, name == sysRaw)
	case sysAsynq:
		return newAsynq(addr, cfg), nil
	case sysFloor:
		return newFloor(addr), nil
	case sysScriptFloor:
		return newScriptFloor(addr, cfg.scriptFloorInterval), nil
	}
	return nil, fmt.Errorf("unknown system %q", name)
}

// payloadFor returns a payload of size bytes: the sequence number, the due
// time in Unix ns (used for asynq, whose tasks carry no due time), filler.
func payloadFor(seq int, due time.Time, size int) []byte {
	p := make([]byte, size)
	binary.BigEndian.PutUint64(p, uint64(seq))
	binary.BigEndian.PutUint64(p[8:], uint64(due.UnixNano()))
	for i := 16; i < size; i++ {
		p[i] = byte('a' + i%26)
	}
	return p
}

func payloadSeq(p []byte) int {
	if len(p) < 16 {
		return -1
	}
	return int(binary.BigEndian.Uint64(p))
}

func payloadDue(p []byte) time.Time {
	if len(p) < 16 {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(p[8:])))
}

// errSeveralQueues: the scenarios that schedule in bulk run on one queue.
var errSeveralQueues = errors.New("a system of several queues schedules one message at a time (the curve)")

// ---- delaystream ----

type dsSystem struct {
	rdb    *redis.Client
	q      *delaystream.Queue // scheduling only: promotion and the group run on queues of their own (Start)
	keys   stream.Keys        // shard 0's keys, for the raw reader and the scenarios' probes
	shards int
	cfg    config
	raw    bool
	// precision is the queue's (delaystream.WithPrecision), for the mover
	// and the consumer; 0 = the default.
	precision time.Duration
	// noResend: the system was asked for by a name with noResendSuffix (its
	// client never sends a command again).
	noResend bool
	stops    []func()
	timer    *scriptTimer // round trips of the library's script calls, once timeScripts is called
	// qs are the producers of a system of several queues (config.queues >
	// 1; nil otherwise), names their queues: ScheduleOne sends to each in
	// turn, next counting its calls, and Start runs a group on each,
	// promoting its queue.
	qs    []*delaystream.Queue
	names []string
	next  atomic.Uint64
}

// queueNames returns the names of a system's n queues: "bench-0"... for
// n > 1, nil for one (it is benchQueue).
func queueNames(n int) []string {
	if n <= 1 {
		return nil
	}
	names := make([]string, n)
	for i := range names {
		names[i] = benchQueue + "-" + strconv.Itoa(i)
	}
	return names
}

// timeScripts starts recording the round trip of every library script
// call (before Start: go-redis hooks are not added safely under load).
func (s *dsSystem) timeScripts() *scriptTimer {
	if s.timer == nil {
		s.timer = newScriptTimer()
		s.rdb.AddHook(s.timer)
	}
	return s.timer
}

func newDS(addr string, cfg config, raw bool) (*dsSystem, error) {
	if cfg.shards > 1 && raw {
		return nil, fmt.Errorf("%s reads one stream: -shards %d applies to delaystream only", sysRaw, cfg.shards)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: cfg.dsMaxRetries})
	shards := max(1, cfg.shards)
	q, err := delaystream.New(rdb, benchQueue, delaystream.WithShards(shards), delaystream.WithoutPromotion())
	if err != nil {
		rdb.Close()
		return nil, err
	}
	layout, err := stream.NewLayout(delaystream.DefaultPrefix, benchQueue, shards)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	s := &dsSystem{rdb: rdb, q: q, keys: layout.Shard(0), shards: shards, cfg: cfg, raw: raw, names: queueNames(cfg.queues)}
	if s.names != nil && (raw || shards > 1) {
		rdb.Close()
		return nil, fmt.Errorf("several queues apply to delaystream on one shard only")
	}
	for _, name := range s.names {
		q, err := delaystream.New(rdb, name, delaystream.WithoutPromotion())
		if err != nil {
			rdb.Close()
			return nil, err
		}
		s.qs = append(s.qs, q)
	}
	return s, nil
}

func (s *dsSystem) Name() string {
	if s.raw {
		return sysRaw
	}
	if s.noResend {
		return dsPrecisionName(s.precision) + noResendSuffix
	}
	return dsPrecisionName(s.precision)
}

func (w when) ds() delaystream.When {
	if w.abs {
		return delaystream.At(w.at)
	}
	return delaystream.After(w.in)
}

func (s *dsSystem) ScheduleOne(ctx context.Context, p []byte, w when) error {
	q := s.q
	if s.qs != nil {
		q = s.qs[(s.next.Add(1)-1)%uint64(len(s.qs))]
	}
	_, err := q.Schedule(ctx, delaystream.Message{Payload: p}, w.ds())
	return err
}

func (s *dsSystem) ScheduleMany(ctx context.Context, ps [][]byte, ws []when) error {
	if s.qs != nil {
		return errSeveralQueues
	}
	items := make([]delaystream.Item, 0, s.cfg.batch)
	for i := 0; i < len(ps); i += s.cfg.batch {
		items = items[:0]
		for j := i; j < min(i+s.cfg.batch, len(ps)); j++ {
			items = append(items, delaystream.Item{Message: delaystream.Message{Payload: ps[j]}, When: ws[j].ds()})
		}
		if _, err := s.q.ScheduleBatch(ctx, items); err != nil {
			return err
		}
	}
	return nil
}

// scheduleWithIDs schedules all payloads like ScheduleMany, each with a
// caller-chosen id (a ULID, as generated ids are), and returns how many were created.
func (s *dsSystem) scheduleWithIDs(ctx context.Context, ps [][]byte, ws []when) (int, error) {
	items := make([]delaystream.Item, 0, s.cfg.batch)
	created := 0
	for i := 0; i < len(ps); i += s.cfg.batch {
		items = items[:0]
		for j := i; j < min(i+s.cfg.batch, len(ps)); j++ {
			items = append(items, delaystream.Item{Message: delaystream.Message{ID: delay.NewID(), Payload: ps[j]}, When: ws[j].ds()})
		}
		res, err := s.q.ScheduleBatch(ctx, items)
		if err != nil {
			return created, err
		}
		for _, r := range res {
			if r.Outcome == delaystream.OutcomeCreated {
				created++
			}
		}
	}
	return created, nil
}

// Start runs the mover and one consumer group (or, for the floor reference,
// a bare XREADGROUP reader) until Stop; a system of several queues runs a
// group on each, promoting its queue, and no mover.
func (s *dsSystem) Start(ctx context.Context, h handler) error {
	if s.names != nil {
		for _, name := range s.names {
			if err := s.startGroup(ctx, h, name, true); err != nil {
				return err
			}
		}
		return nil
	}
	if s.cfg.consumerPromotes && !s.raw {
		return s.startConsumer(ctx, h)
	}
	if err := s.startMoverOnly(ctx); err != nil {
		return err
	}
	return s.startConsumer(ctx, h)
}

// startMoverOnly runs the queue's mover until Stop.
func (s *dsSystem) startMoverOnly(ctx context.Context) error {
	opts := []mover.Option{mover.WithShards(s.shards), mover.WithPrecision(s.precision)}
	if s.cfg.moverBatch > 0 {
		opts = append(opts, mover.WithBatchSize(s.cfg.moverBatch))
	}
	mv, err := mover.New(s.rdb, benchQueue, opts...)
	if err != nil {
		return err
	}
	s.goRun(ctx, mv.Run)
	return nil
}

// startConsumer runs one consumer until Stop and waits until its group exists.
func (s *dsSystem) startConsumer(ctx context.Context, h handler) error {
	if s.raw {
		ready := make(chan struct{})
		s.goRun(ctx, func(ctx context.Context) error { return s.rawRead(ctx, h, ready) })
		<-ready
		return nil
	}
	return s.startGroup(ctx, h, benchQueue, s.cfg.consumerPromotes)
}

// startGroup runs the group of queue name until Stop, on a Queue of its
// own, as a consumer process has (promoting the queue if promote), and
// waits until its group exists.
func (s *dsSystem) startGroup(ctx context.Context, h handler, name string, promote bool) error {
	// The queue's precision, as a user's consumer process configures its
	// queue (it sets the group's acknowledgement delay and retry lanes).
	opts := []delaystream.Option{delaystream.WithShards(s.shards), delaystream.WithPrecision(s.precision)}
	if !promote {
		opts = append(opts, delaystream.WithoutPromotion())
	}
	q, err := delaystream.New(s.rdb, name, opts...)
	if err != nil {
		return err
	}
	gopts := []delaystream.GroupOption{delaystream.WithWorkers(s.cfg.workers)}
	if s.cfg.handledRecords > 0 {
		gopts = append(gopts, delaystream.WithHandledRecords(s.cfg.handledRecords))
	}
	_, err = q.Handle(benchGroup, func(ctx context.Context, d *delaystream.Delivery) error {
		return h(ctx, delivery{payload: d.Payload, due: d.Due, appended: d.Appended()})
	}, gopts...)
	if err != nil {
		return err
	}
	s.goRun(ctx, q.Run)
	// The queue creates its group in Run; wait for it so startup is not timed.
	layout, err := stream.NewLayout(delaystream.DefaultPrefix, name, s.shards)
	if err != nil {
		return err
	}
	key := layout.Shard(0).Main().Stream
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		gs, err := s.rdb.XInfoGroups(ctx, key).Result()
		if err == nil && len(gs) > 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("delaystream consumer did not create its group within 5 s")
}

// startIdleFleet runs groups × perGroup consumers of the queue, each on
// its own client and promoting the queue (no mover), until Stop, and waits
// until every group exists.
func (s *dsSystem) startIdleFleet(ctx context.Context, groups, perGroup int) error {
	for g := range groups {
		name := fmt.Sprintf("idle%d", g)
		for range perGroup {
			rdb := redis.NewClient(&redis.Options{Addr: s.rdb.Options().Addr})
			c, err := group.New(rdb, benchQueue, name, func(context.Context, *group.Message) error { return nil },
				group.WithWorkers(s.cfg.workers))
			if err != nil {
				rdb.Close()
				return err
			}
			s.stops = append(s.stops, func() { rdb.Close() }) // Stop runs stops last first
			s.goRun(ctx, c.Run)
		}
	}
	key := s.keys.Main().Stream
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		gs, err := s.rdb.XInfoGroups(ctx, key).Result()
		if err == nil && len(gs) >= groups {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("the idle fleet did not create its %d groups within 5 s", groups)
}

// goRun runs f until Stop.
func (s *dsSystem) goRun(ctx context.Context, f func(context.Context) error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f(ctx); err != nil {
			logf("%s: %v", s.Name(), err)
		}
	}()
	s.stops = append(s.stops, func() { cancel(); <-done })
}

// rawRead is the floor reference: one reader, XREADGROUP COUNT 256 BLOCK
// 100 ms, entries fanned out to the workers, one XACK per batch. No
// reclaim, retry, dead letters, lease extension or trimming.
func (s *dsSystem) rawRead(ctx context.Context, h handler, ready chan<- struct{}) error {
	key := s.keys.Main().Stream
	if err := s.rdb.XGroupCreateMkStream(ctx, key, benchGroup, "0").Err(); err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		close(ready)
		return err
	}
	close(ready)
	type job struct {
		x  redis.XMessage
		wg *sync.WaitGroup
	}
	jobs := make(chan job, 256)
	var workers sync.WaitGroup
	for range s.cfg.workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for j := range jobs {
				if e, err := wire.Decode(key, j.x.ID, j.x.Values); err == nil {
					_ = h(ctx, delivery{payload: e.Envelope.Payload, due: e.Envelope.Due, appended: e.Appended()})
				}
				j.wg.Done()
			}
		}()
	}
	defer func() { close(jobs); workers.Wait() }()
	for ctx.Err() == nil {
		res, err := s.rdb.XReadGroup(context.WithoutCancel(ctx), &redis.XReadGroupArgs{
			Group: benchGroup, Consumer: "raw", Streams: []string{key, ">"}, Count: 256, Block: 100 * time.Millisecond,
		}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var wg sync.WaitGroup
		var ids []string
		for _, st := range res {
			for _, x := range st.Messages {
				wg.Add(1)
				ids = append(ids, x.ID)
				jobs <- job{x, &wg}
			}
		}
		wg.Wait()
		if len(ids) > 0 {
			_ = s.rdb.XAck(context.WithoutCancel(ctx), key, benchGroup, ids...).Err()
		}
	}
	return nil
}

// Stop stops everything started, consumers before the mover.
func (s *dsSystem) Stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

func (s *dsSystem) Close() { s.Stop(); s.rdb.Close() }

// ---- asynq ----

// asynqConfig is asynq at its fastest sensible settings: the same worker
// count, delayed-task and empty-queue checks every 100 ms (defaults 5 s and
// 1 s), and a task whose worker died retried at once instead of after the
// default backoff (15 s and more).
func asynqConfig(workers int) asynq.Config {
	return asynq.Config{
		Concurrency:              workers,
		TaskCheckInterval:        100 * time.Millisecond,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		ShutdownTimeout:          time.Second,
		LogLevel:                 asynq.WarnLevel,
		Queues:                   map[string]int{benchQueue: 1},
		RetryDelayFunc: func(n int, err error, t *asynq.Task) time.Duration {
			if errors.Is(err, asynq.ErrLeaseExpired) {
				return 0
			}
			return asynq.DefaultRetryDelayFunc(n, err, t)
		},
	}
}

type asynqSystem struct {
	rdb    *redis.Client
	client *asynq.Client
	srv    *asynq.Server
	cfg    config
	// queues are the system's queues; ScheduleOne sends to each in turn,
	// next counting its calls.
	queues []string
	next   atomic.Uint64
}

func newAsynq(addr string, cfg config) *asynqSystem {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	queues := queueNames(cfg.queues)
	if queues == nil {
		queues = []string{benchQueue}
	}
	return &asynqSystem{rdb: rdb, client: asynq.NewClientFromRedisClient(rdb), cfg: cfg, queues: queues}
}

func (s *asynqSystem) Name() string { return sysAsynq }

func (w when) asynq() asynq.Option {
	if w.abs {
		return asynq.ProcessAt(w.at)
	}
	return asynq.ProcessIn(w.in)
}

func (s *asynqSystem) ScheduleOne(ctx context.Context, p []byte, w when) error {
	queue := s.queues[(s.next.Add(1)-1)%uint64(len(s.queues))]
	_, err := s.client.EnqueueContext(ctx, asynq.NewTask(asynqType, p), asynq.Queue(queue), w.asynq())
	return err
}

func (s *asynqSystem) ScheduleMany(ctx context.Context, ps [][]byte, ws []when) error {
	if len(s.queues) > 1 {
		return errSeveralQueues
	}
	return parallelDo(ctx, s.cfg.parallel, len(ps), func(i int) error { return s.ScheduleOne(ctx, ps[i], ws[i]) })
}

func (s *asynqSystem) Start(ctx context.Context, h handler) error {
	cfg := asynqConfig(s.cfg.workers)
	cfg.Queues = make(map[string]int, len(s.queues))
	for _, q := range s.queues {
		cfg.Queues[q] = 1
	}
	s.srv = asynq.NewServerFromRedisClient(s.rdb, cfg)
	return s.srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		return h(ctx, delivery{payload: t.Payload(), due: payloadDue(t.Payload())})
	}))
}

func (s *asynqSystem) Stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv = nil
	}
}

func (s *asynqSystem) Close() { s.Stop(); s.client.Close(); s.rdb.Close() }

// parallelDo runs f(0..n-1) on p goroutines and returns the first error.
func parallelDo(ctx context.Context, p, n int, f func(i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	var mu sync.Mutex
	next := 0
	for range p {
		g.Go(func() error {
			for ctx.Err() == nil {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return nil
				}
				if err := f(i); err != nil {
					return err
				}
			}
			return ctx.Err()
		})
	}
	return g.Wait()
}
