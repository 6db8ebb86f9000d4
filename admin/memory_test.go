package admin_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/internal/redistest"
)

// Memory reports each server's settings, and Stats names the servers that
// can evict; a server with noeviction is not named.
func TestMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		policy   string
		evicting bool
	}{{"allkeys-lru", true}, {"noeviction", false}} {
		t.Run(c.policy, func(t *testing.T) {
			s, err := redistest.Spawn("--maxmemory", "8mb", "--maxmemory-policy", c.policy)
			require.NoError(t, err)
			defer s.Stop()
			rdb := redis.NewClient(redistest.Options(t, s.Addr))
			defer rdb.Close()
			prefix := redistest.Prefix(t)
			q, err := delaystream.New(rdb, "orders", delaystream.WithPrefix(prefix))
			require.NoError(t, err)
			_, err = q.Schedule(ctx, delaystream.Message{ID: "a"}, delaystream.After(time.Hour))
			require.NoError(t, err)

			in, err := admin.New(rdb, prefix)
			require.NoError(t, err)
			mem, err := in.Memory(ctx)
			require.NoError(t, err)
			require.Len(t, mem, 1)
			assert.True(t, mem[0].Known)
			assert.Equal(t, c.policy, mem[0].Policy)
			assert.Equal(t, int64(8<<20), mem[0].Max)
			assert.Equal(t, c.evicting, mem[0].Evicts())
			assert.Zero(t, mem[0].Evicted, "nothing evicted yet (and known: not -1)")
			reps, err := in.Stats(ctx)
			require.NoError(t, err)
			require.Len(t, reps, 1)
			if c.evicting {
				require.Len(t, reps[0].Evicting, 1)
				assert.Equal(t, s.Addr, reps[0].Evicting[0].Addr)
			} else {
				assert.Empty(t, reps[0].Evicting)
			}
			if c.evicting {
				// Fill the server past maxmemory: it evicts (the queue's
				// keys too), and Memory reports the server's count.
				big := strings.Repeat("x", 100<<10)
				for i := 0; i < 200; i++ {
					require.NoError(t, rdb.Set(ctx, prefix+":filler:"+strconv.Itoa(i), big, 0).Err())
				}
				mem, err = in.Memory(ctx)
				require.NoError(t, err)
				info, err := rdb.Info(ctx, "stats").Result()
				require.NoError(t, err)
				assert.Positive(t, mem[0].Evicted)
				assert.Contains(t, info, "evicted_keys:"+strconv.FormatInt(mem[0].Evicted, 10)+"\r\n")
			}

		})
	}
}
