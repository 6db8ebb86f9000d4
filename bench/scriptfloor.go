package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// sysScriptFloor is no queue: the least Redis CPU per message of a design
// that keeps delaystream's first two invariants (one script per transition,
// due times by the Redis clock) and gathers deliveries within an interval.
// The producer runs one script per message that reads TIME and ZADDs the
// message; a taker runs, every interval, one script that reads TIME and
// takes what is due (ZRANGEBYSCORE, ZREMRANGEBYRANK) and hands it to the
// handler. No call tokens, no wake-ups (the taker polls), no stream, no
// consumer group, no acknowledgement, no lease: a crash loses what it
// holds. Its figures are what delaystream at WithPrecision(interval) would
// pay without any of those; the gap to asynq at a rate says how much room
// a design under these invariants has there.
const sysScriptFloor = "script-floor"

// scriptFloorSchedule adds one message (ARGV[1]) due ARGV[2] ms after
// Redis TIME and returns its due time in ms.
var scriptFloorSchedule = redis.NewScript(`
local t = redis.call('TIME')
local due = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], due, ARGV[1])
return due`)

// scriptFloorTake removes and returns up to ARGV[1] messages due by Redis
// TIME, with their due times (WITHSCORES).
var scriptFloorTake = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
if #due > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #due / 2 - 1)
end
return due`)

const scriptFloorKey = "script-floor:z"

type scriptFloorSystem struct {
	prod, cons *redis.Client
	interval   time.Duration
	mu         sync.Mutex
	cancel     context.CancelFunc
	done       chan struct{}
	errOnce    sync.Once
}

func newScriptFloor(addr string, interval time.Duration) *scriptFloorSystem {
	return &scriptFloorSystem{
		prod:     redis.NewClient(&redis.Options{Addr: addr}),
		cons:     redis.NewClient(&redis.Options{Addr: addr}),
		interval: interval,
	}
}

func (s *scriptFloorSystem) Name() string { return sysScriptFloor }

// ScheduleOne runs the schedule script (one round trip). The payload
// starts with its sequence number, so each member is unique.
func (s *scriptFloorSystem) ScheduleOne(ctx context.Context, payload []byte, w when) error {
	if w.abs {
		return errors.New("script-floor: only relative due times (the trickle's)")
	}
	return scriptFloorSchedule.Run(ctx, s.prod, []string{scriptFloorKey}, payload, w.in.Milliseconds()).Err()
}

// ScheduleMany is ScheduleOne for each payload (the floor is for trickles).
func (s *scriptFloorSystem) ScheduleMany(ctx context.Context, payloads [][]byte, ws []when) error {
	for i, p := range payloads {
		if err := s.ScheduleOne(ctx, p, ws[i]); err != nil {
			return err
		}
	}
	return nil
}

// Start starts the taker: one take script every interval, and again at
// once while a take was full.
func (s *scriptFloorSystem) Start(ctx context.Context, h handler) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("script-floor: started twice")
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.take(ctx, h)
	return nil
}

const scriptFloorBatch = 1000

func (s *scriptFloorSystem) take(ctx context.Context, h handler) {
	defer close(s.done)
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for {
			n, err := s.takeOnce(ctx, h)
			if err != nil {
				if ctx.Err() == nil {
					s.errOnce.Do(func() { logf("script-floor: %v", err) }) // the tracker counts what is lost
				}
				break
			}
			if n < scriptFloorBatch {
				break
			}
		}
	}
}

// takeOnce runs the take script once and hands what it took to h.
func (s *scriptFloorSystem) takeOnce(ctx context.Context, h handler) (int, error) {
	v, err := scriptFloorTake.Run(ctx, s.cons, []string{scriptFloorKey}, scriptFloorBatch).Slice()
	if err != nil {
		return 0, err
	}
	for i := 0; i+1 < len(v); i += 2 {
		m, _ := v[i].(string)
		sc, _ := v[i+1].(string)
		ms, err := strconv.ParseFloat(sc, 64)
		if err != nil {
			return 0, fmt.Errorf("take: score %q: %w", sc, err)
		}
		_ = h(ctx, delivery{payload: []byte(m), due: time.UnixMilli(int64(ms))})
	}
	return len(v) / 2, nil
}

// Stop stops the taker and waits for it.
func (s *scriptFloorSystem) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (s *scriptFloorSystem) Close() {
	s.Stop()
	s.prod.Close()
	s.cons.Close()
}
