package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/admin"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/web"
	"github.com/delaystream/delaystream/internal/redistest"
)

// countingConn counts the bytes read from its connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// Pages and the JSON API never read a large payload whole: 50 waiting
// messages and 10 dead letters of 1 MiB each (half the waiting ones with
// an id of the caller's, half with a generated one: both kinds of
// delayed-set member) are listed, with previews that start as the payloads
// do and say their whole size, for a few KiB read from Redis per message
// where whole payloads would be 50 MiB.
func TestLargePayloadsAreNotReadWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	writer := redistest.Client(t)
	prefix := redistest.Prefix(t)
	t.Cleanup(func() { // 60 MiB on the shared server: give it back
		it := writer.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
		for it.Next(context.Background()) {
			_ = writer.Del(context.Background(), it.Val()).Err()
		}
	})
	const size = 1 << 20
	payload := func(tag string) []byte {
		return append([]byte(tag+":"), bytes.Repeat([]byte("x"), size-len(tag)-1)...)
	}
	q, err := delaystream.New(writer, queueName, delaystream.WithPrefix(prefix))
	require.NoError(t, err)
	for i := range 50 {
		m := delaystream.Message{Payload: payload(fmt.Sprintf("wait-%02d", i))}
		if i%2 == 0 {
			m.ID = fmt.Sprintf("w%02d", i) // plain member; the others are packed
		}
		_, err := q.Schedule(ctx, m, delaystream.After(time.Hour+time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	for i := range 10 {
		_, err := q.Schedule(ctx, delaystream.Message{ID: fmt.Sprintf("d%02d", i), Payload: payload(fmt.Sprintf("dead-%02d", i))},
			delaystream.After(0))
		require.NoError(t, err)
	}
	_, err = q.Handle("billing", func(context.Context, *delaystream.Delivery) error {
		return delaystream.DeadLetter(errors.New("refused"))
	})
	require.NoError(t, err)
	in, err := admin.New(writer, prefix)
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- q.Run(runCtx) }()
	require.Eventually(t, func() bool {
		rs, err := in.Stats(ctx, queueName)
		return err == nil && len(rs[0].Groups) == 1 && rs[0].Groups[0].DeadLetters == 10
	}, 60*time.Second, 50*time.Millisecond, "the 10 dead letters")
	stop()
	require.NoError(t, <-done)

	// The web view reads through a client that counts what it reads.
	var read atomic.Int64
	opt := redistest.Options(t, redistest.Addr(t))
	opt.Dialer = redistest.WrapDialer(t, func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, n: &read}, nil
	})
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	srv, err := web.New(rdb, prefix)
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)

	// Whole payloads would be 50 MiB for the API's page, 20 + 10 MiB for
	// the queue page: 5 MiB is far below, and far above what previews cost.
	const bound = 5 << 20
	get := func(path string) string {
		t.Helper()
		before := read.Load()
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		n := read.Load() - before
		assert.Less(t, n, int64(bound), "%s read %d bytes from Redis", path, n)
		t.Logf("%s: %d bytes read from Redis, %d served", path, n, len(body))
		return string(body)
	}
	type item struct {
		ID        string `json:"id"`
		Preview   string `json:"preview"`
		Size      int    `json:"size"`
		Truncated bool   `json:"truncated"`
	}
	api := "/api/p/" + url.PathEscape(prefix) + "/q/" + queueName
	var next []item
	require.NoError(t, json.Unmarshal([]byte(get(api+"/next?limit=50")), &next))
	require.Len(t, next, 50)
	for i, m := range next {
		assert.True(t, strings.HasPrefix(m.Preview, fmt.Sprintf("wait-%02d:xxx", i)), "preview %d: %q", i, m.Preview)
		assert.LessOrEqual(t, len(m.Preview), web.DefaultPreviewBytes)
		assert.Equal(t, size, m.Size, "the whole payload's size")
		assert.True(t, m.Truncated)
	}
	assert.Equal(t, "w00", next[0].ID)

	var dead []item
	require.NoError(t, json.Unmarshal([]byte(get(api+"/g/billing/dead?limit=50")), &dead))
	require.Len(t, dead, 10)
	for _, d := range dead {
		assert.True(t, strings.HasPrefix(d.Preview, "dead-"), d.Preview)
		assert.Equal(t, size, d.Size)
		assert.True(t, d.Truncated)
	}

	base := "/p/" + url.PathEscape(prefix) + "/q/" + queueName
	page := get(base)
	assert.Contains(t, page, "wait-00:xxx")
	assert.Contains(t, page, "dead-00:xxx")
	assert.Contains(t, page, "(preview of "+strconv.Itoa(size)+" bytes)")
	assert.NotContains(t, page, strings.Repeat("x", 2*web.DefaultPreviewBytes), "more than a preview on the page")
	list := get(base + "/next?limit=50")
	assert.Contains(t, list, "wait-49:xxx")
	group := get(base + "/g/billing")
	assert.Contains(t, group, "dead-09:xxx")
}
