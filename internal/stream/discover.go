package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Found is a queue that [Discover] found under a prefix.
type Found struct {
	Queue string // the queue's name
	// Shards is the shard count recorded for the queue (see [Layout.Meta]);
	// 0 when the record holds no valid count (someone else wrote it).
	Shards int
	Meta   string // the key of the queue's record
}

// discoverPage is the COUNT hint of Discover's SCAN calls: each call looks
// at about this many keys, so no call holds Redis for long.
const discoverPage = 1000

// Discover returns the queues under prefix that Redis holds, sorted by
// name, without being told their names. A queue is recognised by its
// record, the HASH [Layout.Meta] ("<prefix>:1:{<queue>}:q") that every part
// of a queue writes at its first call: Discover SCANs for those keys (with
// MATCH, in pages, so it never blocks the server the way KEYS would), on a
// single server, on every master of a *redis.ClusterClient and on every
// shard of a *redis.Ring, and reads each record's shard count (HGET).
//
// Keys that merely look like a record (a queue name with braces, which
// [ValidateName] refuses) are skipped. A queue whose parts never ran
// (nothing was scheduled, promoted or consumed) has no record and is not
// found. SCAN guarantees only what exists for the whole scan: a queue
// created or removed meanwhile may or may not be reported. The figures are
// read with plain commands (SCAN, HGET): a read-only ACL user may call it.
// It returns an error wrapping [ErrInvalidName] for an invalid prefix.
func Discover(ctx context.Context, rdb redis.UniversalClient, prefix string) ([]Found, error) {
	if err := ValidateName("prefix", prefix); err != nil {
		return nil, err
	}
	head := prefix + ":" + LayoutVersion + ":{"
	match := EscapeGlob(head) + "*}:q"
	var (
		mu  sync.Mutex
		out []Found
	)
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, match, discoverPage).Result()
			if err != nil {
				return fmt.Errorf("discover %s: scan: %w", prefix, err)
			}
			found, err := readRecords(ctx, c, head, keys)
			if err != nil {
				return fmt.Errorf("discover %s: %w", prefix, err)
			}
			mu.Lock()
			out = append(out, found...)
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
	default:
		err = scan(ctx, rdb)
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Found) int { return strings.Compare(a.Queue, b.Queue) })
	// A key seen twice (SCAN may return a key more than once) counts once.
	return slices.CompactFunc(out, func(a, b Found) bool { return a.Queue == b.Queue }), nil
}

// readRecords turns the record keys of one SCAN page into Found entries,
// reading their shard counts with one pipeline on c (the node that holds
// them).
func readRecords(ctx context.Context, c redis.UniversalClient, head string, keys []string) ([]Found, error) {
	var found []Found
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, head)
		if !ok {
			continue
		}
		if name, ok = strings.CutSuffix(name, "}:q"); !ok || ValidateName("queue", name) != nil {
			continue
		}
		found = append(found, Found{Queue: name, Meta: k})
	}
	if len(found) == 0 {
		return nil, nil
	}
	pipe := c.Pipeline()
	cmds := make([]*redis.StringCmd, len(found))
	for i, f := range found {
		cmds[i] = pipe.HGet(ctx, f.Meta, "shards")
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	kept := found[:0]
	for i, f := range found {
		v, err := cmds[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			// The record is gone, or has no count: report what is there.
		case redis.HasErrorPrefix(err, "WRONGTYPE"):
			continue // not a record: someone else's key
		case err != nil:
			return nil, fmt.Errorf("read %s: %w", f.Meta, err)
		}
		if n, err := strconv.Atoi(v); err == nil && n >= 1 && n <= MaxShards {
			f.Shards = n
		}
		kept = append(kept, f)
	}
	return kept, nil
}

// EscapeGlob escapes the characters a SCAN MATCH or KEYS pattern gives a
// meaning to, so that s matches only itself.
func EscapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
