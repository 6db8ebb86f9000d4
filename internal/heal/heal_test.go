package heal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/redis/go-redis/v9"
)

type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

func TestSuggests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want bool
	}{
		{io.EOF, true},
		{fmt.Errorf("dial tcp 127.0.0.1:1: connect: connection refused"), true},
		{context.DeadlineExceeded, true},
		{reply("CLUSTERDOWN The cluster is down"), true},
		{reply("READONLY You can't write against a read only replica."), true},
		{reply("MOVED 3999 127.0.0.1:6381"), true},
		{fmt.Errorf("promote: %w", reply("TRYAGAIN Multiple keys request during rehashing of slot")), true},
		{reply("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{reply("ERR user_script:1: Script attempted to access nonexistent global variable"), false},
		{reply("NOGROUP No such key"), false},
	}
	for _, tt := range tests {
		if got := Suggests(tt.err); got != tt.want {
			t.Errorf("Suggests(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	var _ redis.Error = reply("")
	if Suggests(errors.New("x")) != true {
		t.Errorf("a plain error (network) must suggest a reload")
	}
}
