package optcheck_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/internal/optcheck"
)

var errInvalid = errors.New("pkg: invalid option")

func TestRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"int in range", optcheck.Range(errInvalid, "workers", 4, 1, 8), ""},
		{"int below", optcheck.Range(errInvalid, "workers", 0, 1, 8), "pkg: invalid option: workers must be 1..8, got 0"},
		{"duration above", optcheck.Range(errInvalid, "max idle", 2*time.Minute, 10*time.Millisecond, time.Minute), "pkg: invalid option: max idle must be 10ms..1m, got 2m"},
		{"hours", optcheck.Range(errInvalid, "ttl", 0, time.Second, 2*time.Hour), "pkg: invalid option: ttl must be 1s..2h, got 0s"},
		{"bounds inclusive", optcheck.Range(errInvalid, "n", int64(5), 5, 5), ""},
		{"prefix ok", optcheck.Prefix(errInvalid, "ds"), ""},
		{"prefix braces", optcheck.Prefix(errInvalid, "{x}"), `delaystream: invalid name: prefix name "{x}" contains '{' (no braces, spaces or control characters)`},
		{"nil", optcheck.NotNil(errInvalid, "logger", true), "pkg: invalid option: nil logger"},
		{"not nil", optcheck.NotNil(errInvalid, "logger", false), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.want == "" {
				assert.NoError(t, tc.err)
				return
			}
			require.ErrorIs(t, tc.err, errInvalid)
			assert.EqualError(t, tc.err, tc.want)
		})
	}
}

func TestApply(t *testing.T) {
	t.Parallel()
	type cfg struct{ n int }
	type option func(*cfg) error
	set := func(n int) option { return func(c *cfg) error { c.n = n; return nil } }
	fail := option(func(*cfg) error { return errors.New("bad value") })

	var c cfg
	require.NoError(t, optcheck.Apply(errInvalid, &c, []option{set(1), set(2)}))
	assert.Equal(t, 2, c.n, "in order")
	err := optcheck.Apply(errInvalid, &c, []option{set(3), nil, set(4)})
	require.ErrorIs(t, err, errInvalid)
	assert.EqualError(t, err, "pkg: invalid option: nil option")
	assert.EqualError(t, optcheck.Apply(errInvalid, &c, []option{fail, set(5)}), "bad value")
	assert.Equal(t, 3, c.n, "nothing after the failing option")
}
