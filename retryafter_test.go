package delaystream_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream"
)

// A Retry-After value is a number of seconds or an HTTP date in any of
// the three formats RFC 9110 makes recipients accept; a past date waits
// 0, a huge number of seconds is capped, anything else is refused.
func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	// RFC 9110's example date, two minutes ahead.
	now := time.Date(1994, time.November, 6, 8, 47, 37, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		value string
		want  time.Duration
		bad   bool // an error wrapping ErrInvalidOption
	}{
		{"seconds", "120", 2 * time.Minute, false},
		{"zero", "0", 0, false},
		{"leading zeros", "007", 7 * time.Second, false},
		{"spaces around", " \t120 ", 2 * time.Minute, false},
		{"largest whole seconds", "9223372036", 9223372036 * time.Second, false},
		{"overflow capped", "9223372037", math.MaxInt64, false},
		{"overflow past uint64 capped", "99999999999999999999999", math.MaxInt64, false},
		{"IMF-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT", 2 * time.Minute, false},
		{"RFC 850 date", "Sunday, 06-Nov-94 08:49:37 GMT", 2 * time.Minute, false},
		{"asctime date", "Sun Nov  6 08:49:37 1994", 2 * time.Minute, false},
		{"date with spaces around", "  Sun, 06 Nov 1994 08:49:37 GMT ", 2 * time.Minute, false},
		{"date now", "Sun, 06 Nov 1994 08:47:37 GMT", 0, false},
		{"past date", "Sun, 06 Nov 1994 08:00:00 GMT", 0, false},
		{"empty", "", 0, true},
		{"spaces only", "   ", 0, true},
		{"negative", "-5", 0, true},
		{"plus sign", "+5", 0, true},
		{"fraction", "1.5", 0, true},
		{"unit", "120s", 0, true},
		{"digits apart", "1 20", 0, true},
		{"garbage", "soon", 0, true},
		{"RFC 3339 date", "1994-11-06T08:49:37Z", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := delaystream.ParseRetryAfter(tc.value, now)
			if tc.bad {
				require.ErrorIs(t, err, delaystream.ErrInvalidOption)
				assert.Contains(t, err.Error(), fmt.Sprintf("%q", tc.value))
				assert.Zero(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The wait is counted from now: the same date asks for less later on.
func TestParseRetryAfterFromNow(t *testing.T) {
	t.Parallel()
	const date = "Sun, 06 Nov 1994 08:49:37 GMT"
	now := time.Date(1994, time.November, 6, 8, 49, 0, 0, time.UTC)
	got, err := delaystream.ParseRetryAfter(date, now)
	require.NoError(t, err)
	assert.Equal(t, 37*time.Second, got)
	got, err = delaystream.ParseRetryAfter(date, now.Add(30*time.Second))
	require.NoError(t, err)
	assert.Equal(t, 7*time.Second, got)
	// A now in another zone is the same instant.
	got, err = delaystream.ParseRetryAfter(date, now.In(time.FixedZone("UTC+2", 2*60*60)))
	require.NoError(t, err)
	assert.Equal(t, 37*time.Second, got)
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Mon, 02 Mar 2026 09:05:00 GMT", "Mon, 02 Mar 2026 08:00:00 GMT", "soon"} {
		wait, err := delaystream.ParseRetryAfter(v, now)
		fmt.Println(wait, err)
	}
	// Output:
	// 2m0s <nil>
	// 5m0s <nil>
	// 0s <nil>
	// 0s delaystream: invalid option: Retry-After "soon": want a number of seconds or an HTTP date
}
