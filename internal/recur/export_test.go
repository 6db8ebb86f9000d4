package recur

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/delaystream/delaystream/internal/scripts"
)

func scriptsRecurDefine(ctx context.Context, rdb redis.UniversalClient, s *Store, sid, op string) (any, error) {
	return scripts.RecurDefine.Run(ctx, rdb, s.homeKeys(), sid, op, "").Result()
}
