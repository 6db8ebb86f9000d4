package delaystream_test

import (
	"context"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
)

// Every error of bad input says "delaystream:" once, however many parts
// it went through (the front door, a group's consumer, its retry lane's
// mover, the key builder), and matches the sentinels it is documented
// to: an invalid name is an invalid option too.
func TestErrorsHaveOnePrefix(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	t.Cleanup(func() { _ = rdb.Close() })
	h := func(context.Context, *delaystream.Delivery) error { return nil }
	q, err := delaystream.New(rdb, "q")
	require.NoError(t, err)
	handle := func(name string, opts ...delaystream.GroupOption) error {
		_, err := q.Handle(name, h, opts...)
		return err
	}
	newQueue := func(name string, opts ...delaystream.Option) error {
		_, err := delaystream.New(rdb, name, opts...)
		return err
	}
	in, err := admin.New(rdb, "")
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		err     error
		want    string // the whole text
		badName bool   // an invalid name (also an invalid option)
	}{
		{"queue name", newQueue("a b"), `delaystream: invalid name: queue name "a b" contains ' ' (no braces, spaces or control characters)`, true},
		{"prefix", newQueue("q", delaystream.WithPrefix("a{b")), `delaystream: invalid name: prefix name "a{b" contains '{' (no braces, spaces or control characters)`, true},
		{"scheduling option", newQueue("q", delaystream.WithMaxPayload(-1)), "delaystream: invalid option: max payload (bytes) must be 1..67108864, got -1", false},
		{"promotion option", newQueue("q", delaystream.WithPrecision(time.Hour)), "delaystream: invalid option: precision must be 0s..1s, got 1h", false},
		{"group name", handle("g h"), `group "g h": delaystream: invalid name: group name "g h" contains ' ' (no braces, spaces or control characters)`, true},
		{"empty group name", handle(""), `group "": delaystream: invalid name: group name is empty`, true},
		{"group option", handle("g", delaystream.WithWorkers(0)), `group "g": delaystream: invalid option: workers must be 1..4096, got 0`, false},
		{"consumer name", handle("g", delaystream.WithConsumerName("a b")), `group "g": delaystream: invalid name: consumer name "a b" contains ' ' (no braces, spaces or control characters)`, true},
		{"handler option", handle("g", delaystream.WithHandlerTimeout(-1)), `group "g": delaystream: invalid option: handler timeout must be 1ms..24h, got -1ns`, false},
		{"nil handler", func() error { _, err := q.Handle("g", nil); return err }(), `group "g": delaystream: invalid option: nil handler`, false},
		{"operator, queue name", func() error { _, err := in.Stats(context.Background(), "a b"); return err }(),
			`delaystream: invalid name: queue name "a b" contains ' ' (no braces, spaces or control characters)`, true},
		{"operator, prefix", func() error { _, err := admin.New(rdb, "a b"); return err }(),
			`delaystream: invalid name: prefix name "a b" contains ' ' (no braces, spaces or control characters)`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Error(t, tc.err)
			assert.Equal(t, 1, strings.Count(tc.err.Error(), "delaystream:"), "one prefix: %s", tc.err)
			assert.EqualError(t, tc.err, tc.want)
			assert.ErrorIs(t, tc.err, delaystream.ErrInvalidOption)
			if tc.badName {
				assert.ErrorIs(t, tc.err, delaystream.ErrInvalidName)
			}
		})
	}
}

// A Redis that is down: the error a call returns once its ctx ends says
// why ("connection refused"), not only "context deadline exceeded" with
// the cause left to go-redis's own log.
func TestRedisDownErrorSaysWhy(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	q, err := delaystream.New(rdb, "down")
	require.NoError(t, err)

	for _, call := range []struct {
		name string
		do   func(context.Context) error
	}{
		{"schedule", func(ctx context.Context) error {
			_, err := q.Schedule(ctx, delaystream.Message{ID: "a", Payload: []byte("x")}, delaystream.After(time.Minute))
			return err
		}},
		{"len", func(ctx context.Context) error { _, err := q.Len(ctx); return err }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := call.do(ctx)
		cancel()
		require.Error(t, err, call.name)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED, "%s: %v", call.name, err)
		assert.Contains(t, err.Error(), "connection refused", call.name)
		assert.Contains(t, err.Error(), addr, call.name)
	}
}
