package flow

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/stream"
)

// Limits are a group's flow limits, as its consumers run with them.
type Limits struct {
	Concurrency int           // most entries handled at once by all consumers; 0 none
	Rate        int           // most entries started per Per by all consumers; 0 none
	Per         time.Duration // the rate's interval
	Burst       int           // rate permits that may be taken at once (>= 1 with a rate)
}

// Zero reports whether l limits nothing.
func (l Limits) Zero() bool { return l.Concurrency == 0 && l.Rate == 0 }

// Interval returns the time between two rate permits, 0 without a rate.
func (l Limits) Interval() time.Duration {
	if l.Rate == 0 {
		return 0
	}
	return l.Per / time.Duration(l.Rate)
}

// PerSecond returns the rate in permits per second, 0 without a rate.
func (l Limits) PerSecond() float64 {
	if l.Rate == 0 {
		return 0
	}
	return float64(l.Rate) / l.Per.Seconds()
}

// The fields of a group's flow state (stream.Keys.Flow) that this package
// reads and writes; scripts/flow.lua owns the others.
const (
	fieldLimits = "limits"
	fieldWaited = "waited"
	slotPrefix  = "c:"
)

// SlotsNotice starts the payload published on shard 0's arrivals channel
// when a consumer freed concurrency slots another one was refused; the
// group's name follows.
const SlotsNotice = "f:"

// Record writes the limits a consumer of group starts with into the
// group's flow state (on shard 0), so that operators see them; limits
// that limit nothing remove the record. The last consumer started wins.
func Record(ctx context.Context, rdb redis.UniversalClient, layout *stream.Layout, group string, l Limits) error {
	key := layout.Shard(0).Flow(group)
	var err error
	if l.Zero() {
		err = rdb.HDel(ctx, key, fieldLimits).Err()
	} else {
		err = rdb.HSet(ctx, key, fieldLimits, fmt.Sprintf("%d %d %d %d", l.Concurrency, l.Rate, l.Per.Microseconds(), l.Burst)).Err()
	}
	if err != nil {
		err = stream.ExplainWrongType(ctx, rdb, err, stream.KeyType{Key: key, Want: "hash"})
		return fmt.Errorf("record the limits of group %s: %w", group, err)
	}
	return nil
}

// State is what a group's flow state holds: its recorded limits and the
// concurrency slots its consumers hold now.
type State struct {
	Limits Limits
	Held   int64         // slots held by live consumers (lapsed ones not counted)
	Waited time.Duration // how long its consumers waited for permits, in all, since the state was created
}

// Read returns group's flow state. A record of another form (written by
// someone else) reads as no limits.
func Read(ctx context.Context, rdb redis.UniversalClient, layout *stream.Layout, group string) (State, error) {
	key := layout.Shard(0).Flow(group)
	pipe := rdb.Pipeline()
	all := pipe.HGetAll(ctx, key)
	now := pipe.Time(ctx)
	_, _ = pipe.Exec(ctx)
	fields, err := all.Result()
	if err == nil {
		err = now.Err()
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		err = stream.ExplainWrongType(ctx, rdb, err, stream.KeyType{Key: key, Want: "hash"})
		return State{}, fmt.Errorf("flow state of group %s: %w", group, err)
	}
	var st State
	st.Limits = parseLimits(fields[fieldLimits])
	if us, err := strconv.ParseInt(fields[fieldWaited], 10, 64); err == nil && us > 0 {
		st.Waited = time.Duration(us) * time.Microsecond
	}
	nowUs := now.Val().UnixMicro()
	for f, v := range fields {
		if !strings.HasPrefix(f, slotPrefix) {
			continue
		}
		held, deadline, ok := strings.Cut(v, " ")
		h, err1 := strconv.ParseInt(held, 10, 64)
		d, err2 := strconv.ParseInt(deadline, 10, 64)
		if ok && err1 == nil && err2 == nil && d > nowUs {
			st.Held += h
		}
	}
	return st, nil
}

// parseLimits reads a limits record, "<concurrency> <rate> <per µs>
// <burst>"; anything else is no limits.
func parseLimits(v string) Limits {
	f := strings.Fields(v)
	if len(f) != 4 {
		return Limits{}
	}
	var n [4]int64
	for i, s := range f {
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil || x < 0 {
			return Limits{}
		}
		n[i] = x
	}
	l := Limits{Concurrency: int(n[0]), Rate: int(n[1]), Per: time.Duration(n[2]) * time.Microsecond, Burst: int(n[3])}
	if l.Rate > 0 && (l.Per <= 0 || l.Burst < 1) {
		l.Rate, l.Per, l.Burst = 0, 0, 0
	}
	return l
}
