package cli_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/delaystream/delaystream"
	"github.com/delaystream/delaystream/cmd/delaystream/internal/cli"
)

func TestPreview(t *testing.T) {
	t.Parallel()
	mp, err := msgpack.Marshal(map[string]any{"order": 5001})
	require.NoError(t, err)
	for _, c := range []struct {
		name    string
		payload []byte
		max     int
		want    string
	}{
		{"empty", nil, 10, ""},
		{"text", []byte("hello world"), 80, "hello world"},
		{"json, whitespace folded", []byte("{\n  \"a\": 1\n}"), 80, `{ "a": 1 }`},
		{"cut", []byte("abcdefghij"), 5, "abcd…"},
		{"msgpack", mp, 80, `msgpack:{"order":5001}`},
		{"binary", []byte{0xc1, 0x00, 0xff}, 80, "hex:c100ff"},
		{"msgpack with trailing bytes is binary", append([]byte{0x05}, 0xc1), 80, "hex:05c1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, c.want, cli.Preview(c.payload, c.max))
		})
	}
}

func TestConnect(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, url string
		cluster   bool
		addrs     []string
		user      string
		tls       bool
	}{
		{"default", "", false, []string{"localhost:6379"}, "", false},
		{"bare address", "10.0.0.1:7000", false, []string{"10.0.0.1:7000"}, "", false},
		{"acl user over TLS", "rediss://ops:secret@r.example:6380/2", false, []string{"r.example:6380"}, "ops", true},
		{"cluster seeds", "redis://a:7000,b:7001,c:7002", true, []string{"a:7000", "b:7001", "c:7002"}, "", false},
		{"forced cluster", "redis://ops:pw@a:7000", true, []string{"a:7000"}, "ops", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rdb, err := cli.Connect(cli.ConnConfig{URL: c.url, Cluster: c.cluster && len(c.addrs) == 1})
			require.NoError(t, err)
			defer rdb.Close()
			switch r := rdb.(type) {
			case *redis.ClusterClient:
				require.True(t, c.cluster)
				o := r.Options()
				assert.Equal(t, c.addrs, o.Addrs)
				assert.Equal(t, c.user, o.Username)
				assert.Equal(t, c.tls, o.TLSConfig != nil)
			case *redis.Client:
				require.False(t, c.cluster)
				o := r.Options()
				assert.Equal(t, c.addrs[0], o.Addr)
				assert.Equal(t, c.user, o.Username)
				assert.Equal(t, c.tls, o.TLSConfig != nil)
			}
		})
	}
	_, err := cli.Connect(cli.ConnConfig{URL: "http://x"})
	require.ErrorIs(t, err, delaystream.ErrInvalidOption)
}

// A malformed Redis URL is refused with an error that names it without
// its password, nor any piece of it that the parser quoted.
func TestConnectRedactsPassword(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url    string
		secret []string // what the error must not hold
		keeps  string   // what it still says
	}{
		{"redis://user:secret@host:notaport/0", []string{"secret"}, "notaport"},
		{"redis://user:s3cr3t@host:6379/notadb", []string{"s3cr3t"}, "notadb"},
		{"redis://user:12/topsecret@host/0", []string{"topsecret"}, "invalid URL path"},
		{"rediss://ops:se%zzcret@host:6380", []string{"se%zzcret", "%zz", "cret"}, "escape"},
		{"redis://user:secret@a:7000,b:notaport", []string{"secret"}, "notaport"},
		{"user:secret@host:notaport", []string{"secret"}, "notaport"},
	} {
		t.Run(c.url, func(t *testing.T) {
			t.Parallel()
			_, err := cli.Connect(cli.ConnConfig{URL: c.url})
			require.Error(t, err)
			assert.ErrorIs(t, err, delaystream.ErrInvalidOption)
			for _, s := range c.secret {
				assert.NotContains(t, err.Error(), s)
			}
			assert.Contains(t, err.Error(), "xxxxx", "the password's place is marked")
			assert.Contains(t, err.Error(), c.keeps, "the error still says what is wrong")
		})
	}
	// Without a password the URL is named as given.
	_, err := cli.Connect(cli.ConnConfig{URL: "redis://host:notaport"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redis://host:notaport")
}
