package stream_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/redistest"
	"github.com/delaystream/delaystream/internal/stream"
	"github.com/delaystream/delaystream/internal/wire"
)

// laneKeys lists every key of a lane, for checks that apply to all of them.
func laneKeys(l stream.Lane) []string {
	return []string{l.Delayed, l.Envelopes, l.Stream, l.Quarantine, l.Lease, l.Wake}
}

var hashTag = regexp.MustCompile(`\{([^{}]*)\}`)

func TestNewKeysLayout(t *testing.T) {
	t.Parallel()
	k, err := stream.NewKeys("ds", "orders", 0, 1)
	require.NoError(t, err)
	assert.Equal(t, "orders", k.Tag())
	assert.Equal(t, stream.Lane{
		Delayed:     "ds:1:{orders}:z",
		Envelopes:   "ds:1:{orders}:m",
		Stream:      "ds:1:{orders}:s",
		Quarantine:  "ds:1:{orders}:x",
		Lease:       "ds:1:{orders}:l",
		Wake:        "ds:1:{orders}:w",
		Arrivals:    "ds:1:{orders}:n",
		Pause:       "ds:1:{orders}:p",
		Occurrences: "ds:1:{orders}:e:o",
	}, k.Main())
	assert.Equal(t, "ds:1:{orders}:p", k.Pause())
	assert.Equal(t, "ds:1:{orders}:f:billing", k.Flow("billing"))
	state, res := k.KeyRate("billing", "acme:eu", "order:7")
	assert.Equal(t, "ds:1:{orders}:f:billing:k:7:acme:eu", state)
	assert.Equal(t, "ds:1:{orders}:f:billing:k:7:acme:eu:order:7", res)
	other, _ := k.KeyRate("billing", "acme", "x")
	assert.NotEqual(t, state, other, "a key's length leads it")
	assert.Equal(t, stream.Lane{
		Delayed:    "ds:1:{orders}:r:billing:z",
		Envelopes:  "ds:1:{orders}:r:billing:m",
		Stream:     "ds:1:{orders}:r:billing:s",
		Quarantine: "ds:1:{orders}:r:billing:x",
		Lease:      "ds:1:{orders}:r:billing:l",
		Wake:       "ds:1:{orders}:r:billing:w",
		Arrivals:   "ds:1:{orders}:r:billing:n",
	}, k.Retry("billing"))
	assert.Equal(t, "ds:1:{orders}:d:billing", k.DeadLetters("billing"))
}

func TestNewKeysHashTag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		prefix, queue string
		i, n          int
		tag           string
	}{
		{"unsharded", "ds", "orders", 0, 1, "orders"},
		{"custom prefix", "app.prod", "mail", 0, 1, "mail"},
		{"first of four shards", "ds", "q", 0, 4, "q:0.57"},
		{"sharded", "ds", "q", 3, 4, "q:3.138"},
		{"queue with colons", "ds", "billing:eu", 2, 3, "billing:eu:2.153"},
		{"unicode queue", "ds", "débit", 0, 1, "débit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := stream.NewKeys(tt.prefix, tt.queue, tt.i, tt.n)
			require.NoError(t, err)
			assert.Equal(t, tt.tag, k.Tag())
			keys := append(laneKeys(k.Main()), laneKeys(k.Retry("g1"))...)
			keys = append(keys, k.DeadLetters("g1"))
			for _, key := range keys {
				// Redis Cluster hashes the first {...} of a key: it must be
				// the shard's tag in every key, so every script is single-slot.
				m := hashTag.FindStringSubmatch(key)
				require.NotNil(t, m, "key %q has no hash tag", key)
				assert.Equal(t, tt.tag, m[1], "key %q", key)
				assert.Equal(t, 1, strings.Count(key, "{"), "key %q", key)
				assert.True(t, strings.HasPrefix(key, tt.prefix+":"+stream.LayoutVersion+":{"), "key %q", key)
			}
			// All keys are distinct.
			seen := map[string]bool{}
			for _, key := range keys {
				assert.False(t, seen[key], "duplicate key %q", key)
				seen[key] = true
			}
		})
	}
}

func TestNewKeysErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		prefix, queue string
		i, n          int
		msg           string
	}{
		{"empty prefix", "", "q", 0, 1, "prefix name is empty"},
		{"empty queue", "ds", "", 0, 1, "queue name is empty"},
		{"brace in queue", "ds", "a{b}", 0, 1, "queue name"},
		{"space in prefix", "d s", "q", 0, 1, "prefix name"},
		{"zero shards", "ds", "q", 0, 0, "shard 0 of 0"},
		{"negative shard", "ds", "q", -1, 2, "shard -1 of 2"},
		{"shard equal to n", "ds", "q", 4, 4, "shard 4 of 4"},
		{"too many shards", "ds", "q", 0, stream.MaxShards + 1, "1 to 1024 shards"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := stream.NewKeys(tt.prefix, tt.queue, tt.i, tt.n)
			require.Error(t, err)
			assert.ErrorIs(t, err, stream.ErrInvalidName)
			assert.Contains(t, err.Error(), tt.msg)
			assert.Equal(t, stream.Keys{}, k)
		})
	}
}

func TestValidateName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		valid bool
	}{
		{"simple", "orders", true},
		{"punctuation", "orders-eu_1.v2:x", true},
		{"unicode", "café-☕", true},
		{"max length", strings.Repeat("a", stream.MaxNameLen), true},
		{"empty", "", false},
		{"too long", strings.Repeat("a", stream.MaxNameLen+1), false},
		{"too long in bytes not runes", strings.Repeat("é", stream.MaxNameLen/2+1), false},
		{"open brace", "a{b", false},
		{"close brace", "a}b", false},
		{"hash tag", "{q}", false},
		{"space", "a b", false},
		{"leading space", " a", false},
		{"tab", "a\tb", false},
		{"newline", "a\nb", false},
		{"nul", "a\x00b", false},
		{"escape", "a\x1bb", false},
		{"delete", "a\x7fb", false},
		{"C1 control", "a\u0085b", false},
		{"no-break space", "a\u00a0b", false},
		{"invalid UTF-8", "a\xffb", false},
		{"truncated UTF-8", "caf\xc3", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := stream.ValidateName("queue", tt.in)
			if tt.valid {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, stream.ErrInvalidName)
			assert.Contains(t, err.Error(), "queue name")
		})
	}
}

func TestShardOf(t *testing.T) {
	t.Parallel()
	// FNV-1a 32: these values must never change between releases, or
	// Cancel and Reschedule would look for messages in the wrong shard.
	tests := []struct {
		id   string
		n    int
		want int
	}{
		{"", 16, 5}, // offset basis 2166136261
		{"a", 16, 12},
		{"a", 10, 0},
		{"order:5001", 4, 1},
		{"order:5001", 16, 5},
		{"user-42", 4, 3},
		{"user-42", 10, 9},
		{"user-42", 1, 0},
		{"user-42", 0, 0},
		{"user-42", -3, 0},
		// Generated-id layout: only the random part counts.
		{"01M80NE4RXRC8JEFXHRF88SGQA", 16, wire.ShardOf("RC8JEFXHRF88SGQA", 16)},
		{"7ZZZZZZZZZRC8JEFXHRF88SGQA", 16, wire.ShardOf("RC8JEFXHRF88SGQA", 16)},
		{"0000000000ABCDEFGHJKMNPQRS", 7, wire.ShardOf("ABCDEFGHJKMNPQRS", 7)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.id, tt.n), func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, wire.ShardOf(tt.id, tt.n))
		})
	}
}

func TestGeneratedLayout(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"01M80NE4RXRC8JEFXHRF88SGQA":  true,
		"7ZZZZZZZZZZZZZZZZZZZZZZZZZ":  true,
		"8ZZZZZZZZZZZZZZZZZZZZZZZZZ":  false, // more than 48 bits of time
		"01M80NE4RXRC8JEFXHRF88SGQ":   false, // 25 characters
		"01M80NE4RXRC8JEFXHRF88SGQAA": false,
		"01m80ne4rxrc8jefxhrf88sgqa":  false, // lower case
		"01M80NE4RXRC8JEFXHRF88SGQI":  false, // I is not in the alphabet
		"order:5001":                  false,
	} {
		assert.Equal(t, want, wire.GeneratedLayout(id), id)
	}
}

func TestShardOfRangeAndSpread(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3, 7, 16, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			counts := make([]int, n)
			const ids = 20000
			for i := range ids {
				id := fmt.Sprintf("msg-%d", i)
				s := wire.ShardOf(id, n)
				if s < 0 || s >= n || s != wire.ShardOf(id, n) {
					t.Fatalf("ShardOf(%q, %d) = %d: out of range or not stable", id, n, s)
				}
				counts[s]++
			}
			for s, c := range counts {
				// A usable hash puts every shard within 30% of the mean.
				assert.InDelta(t, ids/n, c, 0.3*float64(ids/n), "shard %d", s)
			}
		})
	}
}

// A group's presence pattern matches its consumers' channels only, also
// when names hold glob characters or one group's name extends another's:
// checked by a real server's PUBSUB SHARDCHANNELS.
func TestPresencePattern(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Client(t)
	k, err := stream.NewKeys(redistest.Prefix(t), "q*", 0, 4)
	require.NoError(t, err)
	members := map[string][]string{ // group -> its consumers
		"g":   {"c1", "a:b[1]*"},
		"g:x": {"c1"},
		"g?":  {"c2"},
		"g1":  {"c3"},
		"h":   {"c1"},
	}
	var chans []string
	for g, cs := range members {
		for _, c := range cs {
			chans = append(chans, k.Presence(g, c))
		}
	}
	ps := rdb.SSubscribe(ctx, chans...)
	defer ps.Close()
	for range chans {
		_, err := ps.Receive(ctx)
		require.NoError(t, err)
	}
	for g, cs := range members {
		var want []string
		for _, c := range cs {
			want = append(want, k.Presence(g, c))
		}
		got, err := rdb.PubSubShardChannels(ctx, k.PresencePattern(g)).Result()
		require.NoError(t, err)
		assert.ElementsMatch(t, want, got, "group %q", g)
	}
}
