package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// sysFloor is no queue: the producer SETs each message under its own key
// and, at the due time, a client-side timer has a second client GETDEL it
// and hand it to the handler. Two round trips per message, each its own
// read event on Redis, no promotion, no stream, no acknowledgement: the
// least Redis CPU that any design pays per message when each message costs
// its producer one call and its consumer one call (the trickle's and the
// curve's floor on this machine; not a queue: a crash loses what it holds).
const sysFloor = "rt-floor"

type floorSystem struct {
	prod, cons *redis.Client
	mu         sync.Mutex
	h          handler
	ctx        context.Context
	seq        atomic.Int64
	wg         sync.WaitGroup
	timers     map[int64]*time.Timer
	stopped    bool
	errOnce    sync.Once
}

func newFloor(addr string) *floorSystem {
	return &floorSystem{
		prod:   redis.NewClient(&redis.Options{Addr: addr}),
		cons:   redis.NewClient(&redis.Options{Addr: addr}),
		timers: map[int64]*time.Timer{},
	}
}

func (s *floorSystem) Name() string { return sysFloor }

// ScheduleOne SETs the payload (one round trip) and arms the timer that
// fetches it at its due time.
func (s *floorSystem) ScheduleOne(ctx context.Context, payload []byte, w when) error {
	due := w.at
	if !w.abs {
		due = time.Now().Add(w.in)
	}
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return errors.New("rt-floor: stopped")
	}
	k := s.seq.Add(1)
	key := "floor:" + strconv.FormatInt(k, 36)
	if err := s.prod.Set(ctx, key, payload, 0).Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("rt-floor: stopped")
	}
	s.wg.Add(1)
	s.timers[k] = time.AfterFunc(time.Until(due), func() { s.fire(k, key, due) })
	return nil
}

// fire fetches one message (one round trip) and hands it to the handler.
func (s *floorSystem) fire(k int64, key string, due time.Time) {
	defer s.wg.Done()
	s.mu.Lock()
	delete(s.timers, k)
	h, ctx := s.h, s.ctx
	s.mu.Unlock()
	if h == nil {
		s.fail(errors.New("rt-floor: a message fell due before Start"))
		return
	}
	p, err := s.cons.GetDel(ctx, key).Bytes()
	if err != nil {
		s.fail(fmt.Errorf("rt-floor: GETDEL %s: %w", key, err))
		return
	}
	_ = h(ctx, delivery{payload: p, due: due}) // no stream: no appended time, no split
}

func (s *floorSystem) fail(err error) {
	s.errOnce.Do(func() { logf("%v", err) }) // the tracker counts the message lost
}

// ScheduleMany is ScheduleOne for each payload (the floor is for trickles).
func (s *floorSystem) ScheduleMany(ctx context.Context, payloads [][]byte, ws []when) error {
	for i, p := range payloads {
		if err := s.ScheduleOne(ctx, p, ws[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *floorSystem) Start(ctx context.Context, h handler) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h, s.ctx = h, ctx
	return nil
}

// Stop cancels the timers not yet fired and waits for those firing.
func (s *floorSystem) Stop() {
	s.mu.Lock()
	s.stopped = true
	for k, t := range s.timers {
		if t.Stop() {
			s.wg.Done()
		}
		delete(s.timers, k)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *floorSystem) Close() {
	s.Stop()
	s.prod.Close()
	s.cons.Close()
}
