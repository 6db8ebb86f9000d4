package cron_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/delaystream/delaystream/contrib/cron"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// occurrences returns the n occurrences of s after t, in UTC.
func occurrences(s cron.Spec, t time.Time, n int) []string {
	var out []string
	for range n {
		t = s.Next(t)
		out = append(out, t.UTC().Format(time.RFC3339))
	}
	return out
}

// Berlin's clocks spring forward on 2026-03-29 (02:00 CET -> 03:00 CEST)
// and fall back on 2026-10-25 (03:00 CEST -> 02:00 CET).
func TestDaylightSaving(t *testing.T) {
	t.Parallel()
	s, err := cron.New("30 2 * * *", "Europe/Berlin")
	require.NoError(t, err)
	// The nonexistent 02:30 fires at 03:30 CEST (01:30 UTC), once.
	assert.Equal(t, []string{"2026-03-28T01:30:00Z", "2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"},
		occurrences(s, utc("2026-03-27T12:00:00Z"), 3))
	// The repeated 02:30 fires at both of its instants: 02:30 CEST (00:30
	// UTC) and 02:30 CET (01:30 UTC).
	assert.Equal(t, []string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"},
		occurrences(s, utc("2026-10-23T12:00:00Z"), 4))
	// An hourly spec on the fall-back night fires at every real hour.
	h, err := cron.New("0 * * * *", "Europe/Berlin")
	require.NoError(t, err)
	assert.Equal(t, []string{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"},
		occurrences(h, utc("2026-10-24T23:30:00Z"), 3))
}

func TestNewAndParse(t *testing.T) {
	t.Parallel()
	s, err := cron.New(" 0  9 * * MON ", "Europe/Berlin")
	require.NoError(t, err)
	assert.Equal(t, "CRON_TZ=Europe/Berlin 0 9 * * MON", s.String())
	assert.Equal(t, "cron", s.Kind())
	back, err := cron.Parse(s.String())
	require.NoError(t, err)
	assert.Equal(t, s.String(), back.String())
	assert.Equal(t, s.Next(utc("2026-11-28T00:00:00Z")), back.Next(utc("2026-11-28T00:00:00Z")))
	assert.Equal(t, utc("2026-11-30T08:00:00Z"), s.Next(utc("2026-11-28T00:00:00Z")).UTC())
	sec, err := cron.New("*/10 * * * * *", "")
	require.NoError(t, err)
	assert.Equal(t, "CRON_TZ=UTC */10 * * * * *", sec.String())
	assert.Equal(t, utc("2026-11-28T00:00:10Z"), sec.Next(utc("2026-11-28T00:00:00Z")).UTC())

	for name, c := range map[string][2]string{
		"bad expression": {"61 * * * *", "UTC"},
		"bad zone":       {"0 9 * * *", "Mars/Olympus"},
		"local zone":     {"0 9 * * *", "Local"},
		"zone in expr":   {"CRON_TZ=UTC 0 9 * * *", "UTC"},
		"every":          {"@every 1h", "UTC"},
	} {
		_, err := cron.New(c[0], c[1])
		assert.Error(t, err, name)
	}
	_, err = cron.Parse("0 9 * * *")
	assert.Error(t, err)
}
