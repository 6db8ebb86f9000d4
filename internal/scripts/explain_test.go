package scripts

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reply is an error reply of Redis (go-redis's redis.Error).
type reply string

func (e reply) Error() string { return string(e) }
func (reply) RedisError()     {}

var _ redis.Error = reply("")

// lineOf returns the line of the script made of files on which the n-th
// line containing want (1-based) of its last file is.
func lineOf(t *testing.T, want string, files ...string) int {
	t.Helper()
	line := 0
	for i, f := range files {
		lines := strings.Split(strings.TrimSuffix(f, "\n"), "\n")
		if i < len(files)-1 {
			line += len(lines)
			continue
		}
		for k, l := range lines {
			if strings.Contains(l, want) {
				return line + k + 1
			}
		}
	}
	t.Fatalf("%q not found", want)
	return 0
}

func TestExplain(t *testing.T) {
	t.Parallel()
	refused := func(s *redis.Script, line int) error {
		return fmt.Errorf("retry m1: %w", reply(fmt.Sprintf(
			"ERR The user executing the script can't run this command or subcommand script: %s, on @user_script:%d.", s.Hash(), line)))
	}
	for _, tc := range []struct {
		name    string
		err     error
		script  string
		command string
	}{
		{"a command on its line", refused(Retry, lineOf(t, "'ZADD'", publishSrc, wakeSrc, historySrc, retrySrc)), "retry.lua", "ZADD"},
		{"a pcall raised again", refused(Retry, lineOf(t, "error(r)", publishSrc)), "publish.lua", "SPUBLISH"},
		{"a helper's command", refused(Schedule, lineOf(t, "redis.call(cmd", publishSrc, onceSrc, wakeSrc, idsSrc, scheduleSrc)), "schedule.lua", "one of ZREM, ZADD, HSET"},
		{"Redis 7.2's text", fmt.Errorf("x: %w", reply(fmt.Sprintf(
			"ERR ACL failure in script: User u has no permissions to run the 'xadd' command script: %s, on @user_script:%d.",
			Promote.Hash(), lineOf(t, "call('XADD', KEYS[3], '*', 'd', score, 'p', m)", publishSrc, idsSrc, historySrc, promoteSrc)))), "promote.lua", "XADD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var pe *PermissionError
			require.ErrorAs(t, Explain(tc.err), &pe)
			assert.Equal(t, tc.script, pe.Script)
			assert.Equal(t, tc.command, pe.Command)
			var rerr redis.Error
			assert.ErrorAs(t, pe, &rerr, "Redis's reply stays in the chain")
			assert.Contains(t, pe.Error(), "(refused: "+tc.command+", "+tc.script+" line ")
			again := Explain(fmt.Errorf("wrapped: %w", pe))
			assert.Equal(t, 1, strings.Count(again.Error(), "(refused: "), "explaining twice adds nothing: %v", again)
		})
	}
	for _, err := range []error{
		nil,
		errors.New("dial tcp: connection refused"),
		reply("WRONGTYPE Operation against a key holding the wrong kind of value"),
		reply("ERR The user executing the script can't run this command or subcommand script: " +
			strings.Repeat("0", 40) + ", on @user_script:1."), // not one of ours
	} {
		assert.Equal(t, err, Explain(err))
	}
}

// Name names a script of this package by its SHA1 (either case) and
// nothing else.
func TestName(t *testing.T) {
	assert.Equal(t, "schedule_generated.lua", Name(ScheduleGenerated.Hash()))
	assert.Equal(t, "promote.lua", Name(strings.ToUpper(Promote.Hash())))
	assert.Equal(t, "", Name(redis.NewScript("return 1").Hash()))
	assert.Equal(t, "", Name(""))
}
