package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"time"

	"github.com/delaystream/delaystream/internal/heal"
	"github.com/delaystream/delaystream/internal/stream"
)

// dataCheckEvery is how often a mover checks that Redis still has its
// queue's record (stream.ErrDataLost).
const dataCheckEvery = 30 * time.Second

// watchData checks the queue's record every dataCheckEvery, and when a
// lane's calls work again after failing (Redis may have restarted), until
// ctx ends; it reports once each time it finds the record gone or recreated:
// Redis lost the queue's data (the record is recreated by the check, so
// the next loss is seen too). A failed check is retried at the next tick.
func (m *Engine) watchData(ctx context.Context, log *slog.Logger) {
	tick := time.NewTicker(dataCheckEvery)
	defer tick.Stop()
	// The client reconnects by itself after a restart, often without a
	// failed call: a drop of pooled connections (StaleConns, which counts
	// every connection removed from the pool) also triggers a check, at
	// most once a second. It costs no call.
	conns := time.NewTicker(time.Second)
	defer conns.Stop()
	stale := m.rdb.PoolStats().StaleConns
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-m.dataPoke:
		case <-conns.C:
			s := m.rdb.PoolStats().StaleConns
			if s == stale {
				continue
			}
			stale = s
		}
		cctx, cancel := context.WithTimeout(ctx, m.cfg.callLimit)
		lost, err := m.guard.Verify(cctx, m.rdb)
		cancel()
		if err != nil {
			heal.After(m.rdb, err)
			continue
		}
		if lost {
			err := m.guard.LostError("within the last " + time.Since(last).Round(time.Second).String())
			log.ErrorContext(ctx, "Redis lost the queue's data", slog.Any("err", err))
			if h := m.cfg.hooks.OnDataLoss; h != nil {
				h(err)
			}
		}
		last = time.Now()
	}
}

// checkShards checks the queue's shard count recorded in Redis (recording
// it if the queue is new), retrying with backoff while the check fails,
// until ctx ends. It returns the error of a mismatch, nil otherwise.
func (m *Engine) checkShards(ctx context.Context, log *slog.Logger) error {
	backoff := 50 * time.Millisecond
	var fails failing
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, m.cfg.callLimit)
		err := m.guard.Check(cctx, m.rdb)
		heal.After(m.rdb, err)
		cancel()
		switch {
		case err == nil:
			if fails.n > 0 {
				log.InfoContext(ctx, "shard count check recovered", slog.Int("failures", fails.n),
					slog.Duration("after", time.Since(fails.since)))
			}
			return nil
		case errors.Is(err, stream.ErrShardCount):
			return fmt.Errorf("mover %s: %w", m.queue, err)
		case ctx.Err() != nil:
			return nil
		}
		now := time.Now()
		if fails.n == 0 {
			fails.since = now
		}
		fails.n++
		if fails.pace.Due(now) {
			log.WarnContext(ctx, "checking the queue's shard count failed; the mover waits",
				slog.Any("err", err), slog.Int("failures", fails.n), slog.Duration("retry_in", backoff))
		}
		timer.Reset(backoff + time.Duration(mrand.Int64N(int64(backoff/2))))
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		backoff = min(2*backoff, max(m.cfg.maxIdle, time.Second))
	}
}
