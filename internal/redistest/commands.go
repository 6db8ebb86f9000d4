package redistest

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CommandLog is a go-redis hook that records the name of every command a
// client sends ("pipeline" for a pipeline): add it with AddHook. Safe for
// concurrent use.
type CommandLog struct {
	mu    sync.Mutex
	names []string
}

func (c *CommandLog) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, name)
}

// Take returns the names recorded since the last Take.
func (c *CommandLog) Take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.names
	c.names = nil
	return out
}

// DialHook leaves dialling alone.
func (c *CommandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook records a command.
func (c *CommandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd.Name())
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook records a pipeline.
func (c *CommandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add("pipeline")
		return next(ctx, cmds)
	}
}
