package main

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/internal/redistest"
)

// childSpec is what a child process runs, passed as JSON in -child.
type childSpec struct {
	Role   string // "producer", "mover" or "consumer"
	Addr   string
	Ledger string // the ledger file ("" for movers)

	// Producer.
	Index    int   // producer number, part of every token
	Count    int   // messages to send
	Start    int64 // Unix ns when sending starts
	Window   time.Duration
	MinDelay time.Duration
	MaxDelay time.Duration
	Seed     uint64

	// Consumer.
	Group    string
	Name     string
	Workers  int
	FailRate float64
}

// childMain runs one child until it is done (a producer), or until SIGTERM
// (a clean stop: Run's ctx is cancelled) or SIGKILL. Like any program
// using the library, it handles the signals itself; the library does not.
func childMain(spec childSpec, stderr io.Writer) int {
	tc, err := redistest.LoadTLSConfig() // DELAYSTREAM_TLS and _DIR from the parent
	if err != nil {
		fmt.Fprintln(stderr, "chaos child:", err)
		return 2
	}
	// go-redis's default options, as a user who sets none would have.
	rdb := redis.NewClient(&redis.Options{Addr: spec.Addr, TLSConfig: tc})
	defer rdb.Close()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var led *ledger
	if spec.Ledger != "" {
		if led, err = openLedger(spec.Ledger); err != nil {
			fmt.Fprintln(stderr, "chaos child:", err)
			return 2
		}
		defer led.close()
	}
	switch spec.Role {
	case "producer":
		err = runProducer(ctx, rdb, spec, led, logger)
	case "mover":
		var q *delaystream.Queue
		q, err = delaystream.New(rdb, queueName, delaystream.WithPrefix(keyPrefix), delaystream.WithLogger(logger))
		if err == nil {
			err = q.Run(ctx)
		}
	case "consumer":
		err = runConsumer(ctx, rdb, spec, led, logger)
	default:
		err = fmt.Errorf("unknown role %q", spec.Role)
	}
	if err != nil {
		fmt.Fprintf(stderr, "chaos child %s: %v\n", spec.Role, err)
		return 1
	}
	return 0
}

// Payloads are "t|<token>", or "x|<token>" for a poison message, which
// every handler fails, so that it is dead-lettered after maxAttempts.
func payloadOf(token string, poison bool) []byte {
	if poison {
		return []byte("x|" + token)
	}
	return []byte("t|" + token)
}

func parsePayload(p []byte) (token string, poison, ok bool) {
	s := string(p)
	switch {
	case strings.HasPrefix(s, "t|"):
		return s[2:], false, true
	case strings.HasPrefix(s, "x|"):
		return s[2:], true, true
	}
	return "", false, false
}

// isPoison says which messages are poison: one in 400, by sequence number.
func isPoison(seq int) bool { return seq%400 == 7 }

// callerID is the message id of a token scheduled with an id of its own;
// the others get generated ids.
func callerID(token string) string { return "m:" + token }

// tokenPlan is what a producer does with one message.
type tokenPlan struct {
	token     string
	generated bool // scheduled without an id: the queue generates one
	poison    bool
	delay     time.Duration
	at        bool // delay.At(now+delay) instead of delay.After(delay)
	follow    []followUp
}

// followUp is a cancel or a reschedule, made this long after the previous
// step of the message returned.
type followUp struct {
	after  time.Duration
	cancel bool
	target time.Duration // reschedule: At(time of the call + target)
}

// planTokens decides everything a producer will do, up front, from its seed.
func planTokens(spec childSpec) []tokenPlan {
	rng := rand.New(rand.NewPCG(spec.Seed, uint64(spec.Index)))
	span := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	out := make([]tokenPlan, spec.Count)
	for i := range out {
		t := tokenPlan{
			token:     fmt.Sprintf("p%d-%06d", spec.Index, i),
			generated: rng.Float64() < 0.25,
			poison:    isPoison(i),
			delay:     span(spec.MinDelay, spec.MaxDelay),
			at:        rng.Float64() < 0.2,
		}
		if !t.poison {
			switch r := rng.Float64(); {
			case r < 0.12: // cancel: before, around or after the due time
				t.follow = []followUp{{after: span(0, t.delay+500*time.Millisecond), cancel: true}}
			case r < 0.24: // reschedule once, or twice
				n := 1
				if rng.Float64() < 0.3 {
					n = 2
				}
				wait := t.delay
				for range n {
					f := followUp{after: span(0, wait), target: span(spec.MinDelay, spec.MaxDelay/2)}
					t.follow = append(t.follow, f)
					wait = f.target
				}
			}
		}
		out[i] = t
	}
	return out
}

// action is one producer step due at a time: a send of one or more
// messages, or a follow-up of one message.
type action struct {
	at     time.Time
	send   []*tokenPlan
	tok    *tokenPlan
	id     string // the message id, for follow-ups
	step   int    // index into tok.follow
	seqNum int    // tie-break
}

type actionHeap []*action

func (h actionHeap) Len() int { return len(h) }
func (h actionHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seqNum < h[j].seqNum
	}
	return h[i].at.Before(h[j].at)
}
func (h actionHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *actionHeap) Push(x any)   { *h = append(*h, x.(*action)) }
func (h *actionHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// producer sends its plan through a Queue: sends spread over the window,
// singly (Schedule) or ten at a time (ScheduleBatch), then each message's
// follow-ups. Calls run on a pool of workers, so that a slow call (a paused
// server) does not hold the others up more than Redis itself does.
type producer struct {
	q       *delaystream.Queue
	led     *ledger
	mu      sync.Mutex
	h       actionHeap
	seq     int
	pending atomic.Int64 // actions pushed and not finished
}

func (p *producer) push(a *action) {
	p.pending.Add(1)
	p.mu.Lock()
	p.seq++
	a.seqNum = p.seq
	heap.Push(&p.h, a)
	p.mu.Unlock()
}

// popDue returns the earliest action if it is due, and the wait otherwise.
func (p *producer) popDue(now time.Time) (*action, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.h) == 0 {
		return nil, 5 * time.Millisecond
	}
	if d := p.h[0].at.Sub(now); d > 0 {
		return nil, min(d, 5*time.Millisecond)
	}
	return heap.Pop(&p.h).(*action), 0
}

func runProducer(ctx context.Context, rdb redis.UniversalClient, spec childSpec, led *ledger, logger *slog.Logger) error {
	q, err := delaystream.New(rdb, queueName, delaystream.WithPrefix(keyPrefix),
		delaystream.WithoutPromotion(), delaystream.WithLogger(logger))
	if err != nil {
		return err
	}
	p := &producer{q: q, led: led}
	toks := planTokens(spec)
	rng := rand.New(rand.NewPCG(spec.Seed, uint64(spec.Index)+1000))
	var sends [][]*tokenPlan
	for i := 0; i < len(toks); {
		n := 1
		if rng.Float64() < 0.3 {
			n = 10
		}
		n = min(n, len(toks)-i)
		batch := make([]*tokenPlan, n)
		for k := range batch {
			batch[k] = &toks[i+k]
		}
		sends = append(sends, batch)
		i += n
	}
	start := time.Unix(0, spec.Start)
	for i, s := range sends {
		p.push(&action{at: start.Add(spec.Window * time.Duration(i) / time.Duration(len(sends))), send: s})
	}

	work := make(chan *action)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				p.do(a)
				p.pending.Add(-1)
			}
		}()
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	for p.pending.Load() > 0 {
		a, wait := p.popDue(time.Now())
		if a == nil {
			select {
			case <-ctx.Done():
				return fmt.Errorf("stopped with %d actions left", p.pending.Load())
			case <-time.After(wait):
			}
			continue
		}
		select {
		case work <- a:
		case <-ctx.Done():
			return fmt.Errorf("stopped with %d actions left", p.pending.Load())
		}
	}
	led.write(recEnd, fmt.Sprint(spec.Index))
	return nil
}

func (p *producer) do(a *action) {
	// Bounded: go-redis's own timeouts end a call to a dead server sooner.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if a.send != nil {
		p.send(ctx, a.send)
		return
	}
	f := a.tok.follow[a.step]
	start := time.Now()
	if f.cancel {
		ok, err := p.q.Cancel(ctx, a.id)
		end := time.Now()
		res := "0"
		switch {
		case err != nil:
			res = "E"
		case ok:
			res = "1"
		}
		p.led.write(recCancel, a.tok.token, a.id, res, itoa(start.UnixNano()), itoa(end.UnixNano()), errText(err))
		return
	}
	target := start.Add(f.target)
	due, err := p.q.Reschedule(ctx, a.id, delaystream.At(target))
	end := time.Now()
	targetMs := ceilMs(target)
	res, dueMs := "ok", due.UnixMilli()
	switch {
	case errors.Is(err, delaystream.ErrNotFound):
		res, dueMs = "nf", 0
	case err != nil:
		res, dueMs = "E", targetMs
	}
	p.led.write(recReschedule, a.tok.token, a.id, itoa(dueMs), res, itoa(targetMs), itoa(start.UnixNano()), itoa(end.UnixNano()), errText(err))
	if err == nil && a.step+1 < len(a.tok.follow) {
		p.push(&action{at: end.Add(a.tok.follow[a.step+1].after), tok: a.tok, id: a.id, step: a.step + 1})
	}
}

// ceilMs is t in Unix ms, rounded up: what delay.At stores.
func ceilMs(t time.Time) int64 {
	return int64(math.Ceil(float64(t.UnixNano()) / 1e6))
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (p *producer) send(ctx context.Context, toks []*tokenPlan) {
	items := make([]delaystream.Item, len(toks))
	for i, t := range toks {
		id := ""
		if !t.generated {
			id = callerID(t.token)
		}
		when := delaystream.After(t.delay)
		if t.at {
			when = delaystream.At(time.Now().Add(t.delay))
		}
		items[i] = delaystream.Item{Message: delaystream.Message{ID: id, Payload: payloadOf(t.token, t.poison)}, When: when}
	}
	start := time.Now()
	var res []delaystream.Result
	var err error
	if len(items) == 1 {
		var r delaystream.Result
		r, err = p.q.Schedule(ctx, items[0].Message, items[0].When)
		res = []delaystream.Result{r}
	} else {
		res, err = p.q.ScheduleBatch(ctx, items)
	}
	end := time.Now()
	for i, t := range toks {
		var r delaystream.Result
		if i < len(res) {
			r = res[i]
		}
		id := r.ID
		if id == "" {
			id = items[i].Message.ID
		}
		// A batch's error may leave some results known: a message with an
		// outcome was written, whatever happened to the others.
		if r.Outcome == delaystream.OutcomeUnknown || (len(items) == 1 && err != nil) {
			if id == "" {
				id = "-"
			}
			p.led.write(recUnknown, t.token, id, itoa(start.UnixNano()), itoa(end.UnixNano()), errText(err))
			continue
		}
		p.led.write(recScheduled, t.token, id, itoa(r.Due.UnixMilli()), r.Outcome.String(), itoa(start.UnixNano()), itoa(end.UnixNano()))
		if len(t.follow) > 0 {
			p.push(&action{at: end.Add(t.follow[0].after), tok: t, id: id})
		}
	}
}

func runConsumer(ctx context.Context, rdb redis.UniversalClient, spec childSpec, led *ledger, logger *slog.Logger) error {
	q, err := delaystream.New(rdb, queueName, delaystream.WithPrefix(keyPrefix),
		delaystream.WithoutPromotion(), delaystream.WithLogger(logger), delaystream.WithDrainTimeout(time.Second))
	if err != nil {
		return err
	}
	h := func(ctx context.Context, m *delaystream.Delivery) error {
		if m.Headers[delaystream.HeaderSchedule] != "" {
			return handleOccurrence(m, spec, led)
		}
		token, poison, ok := parsePayload(m.Payload)
		if !ok {
			token = "-"
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // some work, so that kills find handlers running
		fail := poison || rand.Float64() < spec.FailRate
		// A first attempt is read from the queue stream, a later one from
		// the group's retry lane (this program never snoozes).
		lane, res := "q", "ok"
		if m.Attempt > 1 {
			lane = "r"
		}
		if fail {
			res = "fail"
		}
		led.write(recHandled, spec.Group, spec.Name, token, m.ID, lane, m.EntryID, itoa(m.Due.UnixMilli()),
			fmt.Sprint(m.Attempt), fmt.Sprint(m.Deliveries), res, itoa(time.Now().UnixNano()))
		if fail {
			return errors.New("chaos: induced failure")
		}
		return nil
	}
	_, err = q.Handle(spec.Group, h,
		delaystream.WithConsumerName(spec.Name),
		delaystream.WithWorkers(spec.Workers),
		delaystream.WithMaxAttempts(maxAttempts),
		delaystream.WithBackoff(delaystream.ExponentialBackoff(100*time.Millisecond, time.Second)),
		delaystream.WithHooks(delaystream.Hooks{
			OnDeadLettered: func(m *delaystream.Delivery, reason string) {
				token, id := "-", "-"
				if m != nil {
					id = m.ID
					if t, _, ok := parsePayload(m.Payload); ok {
						token = t
					}
				}
				led.write(recDead, spec.Group, spec.Name, token, id, reason, itoa(time.Now().UnixNano()))
			},
			OnDataLoss: func(err error) {
				led.write(recDataLoss, spec.Group, spec.Name, itoa(time.Now().UnixNano()), errText(err))
			},
		}))
	if err != nil {
		return err
	}
	return q.Run(ctx)
}

// handleOccurrence records a recurring occurrence's handling. It fails at
// the consumers' rate on its first two attempts only, so that occurrences
// take the retry lane too and are never dead-lettered.
func handleOccurrence(m *delaystream.Delivery, spec childSpec, led *ledger) error {
	at, err := time.Parse(time.RFC3339Nano, m.Headers[delaystream.HeaderOccurrence])
	if err != nil {
		return delaystream.DeadLetter(err)
	}
	fail := m.Attempt < 3 && rand.Float64() < spec.FailRate
	lane, res := "q", "ok"
	if m.Attempt > 1 {
		lane = "r"
	}
	if fail {
		res = "fail"
	}
	led.write(recOccurrence, spec.Group, spec.Name, itoa(at.UnixMilli()), m.ID, lane, m.EntryID, res, itoa(time.Now().UnixNano()))
	if fail {
		return errors.New("chaos: induced failure")
	}
	return nil
}
