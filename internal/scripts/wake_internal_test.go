package scripts

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// wake.lua's horizon is WakeHorizon, which the engine's look bound is
// checked against.
func TestWakeHorizonMatchesTheScript(t *testing.T) {
	m := regexp.MustCompile(`(?m)^local WAKE_HORIZON_MS = (\d+)$`).FindStringSubmatch(wakeSrc)
	require.NotNil(t, m, "wake.lua defines WAKE_HORIZON_MS")
	ms, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	require.Equal(t, WakeHorizon.Milliseconds(), ms)
}
