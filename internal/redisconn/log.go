package redisconn

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
)

// RouteLogs sends go-redis's own messages (dial failures, pool notices) to
// log at V(1) instead of printing them on stderr: the reconciler already
// reports Redis errors through conditions, events and its own log.
func RouteLogs(log logr.Logger) {
	redis.SetLogger(logrAdapter{log: log.WithName("redis")})
}

type logrAdapter struct{ log logr.Logger }

func (a logrAdapter) Printf(_ context.Context, format string, v ...any) {
	a.log.V(1).Info(fmt.Sprintf(format, v...))
}
