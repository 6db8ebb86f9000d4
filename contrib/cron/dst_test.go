package cron_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/contrib/cron"
)

// A queue on miniredis inside a testing/synctest bubble: time is fake
// (miniredis's TIME follows it), so days pass in no real time and every
// occurrence's time is exact. The queue runs over Berlin's two
// daylight-saving nights of 2026 with a daily 02:30 schedule: the stream
// gets each occurrence once, at its time, as the cron library defines
// them (the nonexistent 02:30 at 03:30 CEST; the repeated one twice).
func TestQueueAcrossDaylightSaving(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, from, to string
		want           []string
	}{
		{"spring forward", "2026-03-28T23:00:00Z", "2026-03-29T03:00:00Z",
			[]string{"2026-03-29T01:30:00Z"}},
		{"fall back", "2026-10-24T22:00:00Z", "2026-10-25T03:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				mr := miniredis.NewMiniRedis()
				rdb := redis.NewClient(&redis.Options{
					Addr:                     "127.0.0.1:6379", // no DNS in a bubble
					MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
					Dialer:                   func(context.Context, string, string) (net.Conn, error) { return mr.Dial() },
				})
				defer mr.Close()
				defer rdb.Close()
				time.Sleep(time.Until(utc(c.from)))

				q, err := delaystream.New(rdb, "q", cron.Option(), delaystream.WithRecurringHorizon(time.Hour))
				require.NoError(t, err)
				spec, err := cron.New("30 2 * * *", "Europe/Berlin")
				require.NoError(t, err)
				_, err = q.DefineRecurring(context.Background(), delaystream.Recurring{ID: "nightly", Spec: spec})
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- q.Run(ctx) }()
				time.Sleep(time.Until(utc(c.to)))
				cancel()
				require.NoError(t, <-done)

				entries, err := rdb.XRange(context.Background(), "ds:1:{q}:s", "-", "+").Result()
				require.NoError(t, err)
				var got []string
				for _, e := range entries {
					id, _ := e.Values["i"].(string)
					at, ok := strings.CutPrefix(id, "nightly@")
					require.True(t, ok, id)
					ms, err := strconv.ParseInt(strings.SplitN(at, "#", 2)[0], 10, 64)
					require.NoError(t, err)
					appended, err := strconv.ParseInt(strings.SplitN(e.ID, "-", 2)[0], 10, 64)
					require.NoError(t, err)
					assert.Equal(t, ms, appended, "%s appended at its time", id)
					got = append(got, time.UnixMilli(ms).UTC().Format(time.RFC3339))
				}
				assert.Equal(t, c.want, got)
			})
		})
	}
}
