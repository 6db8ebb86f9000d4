package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/cmd/delaystream/internal/web"
	"github.com/delaystream/delaystream/internal/redistest"
)

// Every page carries a banner naming a Redis server that can evict the
// queues' keys; none on a server with noeviction.
func TestEvictionBanner(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy string
		banner bool
	}{{"allkeys-lru", true}, {"noeviction", false}} {
		t.Run(c.policy, func(t *testing.T) {
			s, err := redistest.Spawn("--maxmemory", "8mb", "--maxmemory-policy", c.policy)
			require.NoError(t, err)
			defer s.Stop()
			rdb := redis.NewClient(redistest.Options(t, s.Addr))
			defer rdb.Close()
			srv, err := web.New(rdb, redistest.Prefix(t))
			require.NoError(t, err)
			hs := httptest.NewServer(srv)
			defer hs.Close()
			res, err := http.Get(hs.URL + "/")
			require.NoError(t, err)
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			require.Equal(t, http.StatusOK, res.StatusCode)
			if c.banner {
				assert.Contains(t, string(body), `class="banner evicting"`)
				assert.Contains(t, string(body), "Redis "+s.Addr+" has maxmemory-policy <b>allkeys-lru</b> with maxmemory ")
				banner := regexp.MustCompile(`(?s)<p class="banner evicting"[^>]*>.*?</p>`).FindString(string(body))
				assert.Equal(t, 1, strings.Count(banner, s.Addr), "the banner names the server once: %s", banner)
				assert.Equal(t, 1, strings.Count(banner, "allkeys-lru"), "and its policy once: %s", banner)
			} else {
				assert.NotContains(t, string(body), "evicting")
			}
		})
	}
}
