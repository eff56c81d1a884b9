package contract

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClientOptions are the settings of a connection to a catalog's Redis, as
// a ToolCatalog's spec.redis gives them.
type ClientOptions struct {
	// Addresses are host:port of the server, of the sentinels (Mode
	// sentinel) or of some cluster nodes (Mode cluster).
	Addresses []string
	// Mode is standalone (the default), sentinel or cluster.
	Mode string
	// MasterName is the name the sentinels know the primary by.
	MasterName string
	DB         int
	Username   string
	Password   string
	// TLS is nil for plain TCP.
	TLS *tls.Config
}

// The timing every client of a catalog's Redis shares: fail fast (the
// caller retries), and follow a Cluster's topology within seconds.
const (
	// ClientDialTimeout bounds a connection attempt, which is not
	// repeated (go-redis would try five times): a node that does not
	// answer in time is taken for gone, and the topology is asked again.
	// ClientReadTimeout and ClientWriteTimeout bound a command.
	ClientDialTimeout  = 3 * time.Second
	ClientReadTimeout  = 10 * time.Second
	ClientWriteTimeout = 10 * time.Second
	// ClusterStateReload is how old a Cluster client's slot map may grow
	// before a command reloads it in the background (go-redis's default is
	// a minute); a connection error or timeout reloads it at once.
	ClusterStateReload = 5 * time.Second
)

// NewClient returns the client every part of the product uses for a
// catalog's Redis (the manager, the gateway, the kubectl plugin), and
// the one a consumer should use: a standalone client, a Sentinel failover
// client that follows the sentinels' promotions, or a Cluster client that
// reloads its slot map as soon as a node fails to answer, so that a
// failover costs the seconds the promotion takes, not a minute. A command
// is tried again once, after a short backoff; callers retry the rest.
func NewClient(o ClientOptions) redis.UniversalClient {
	u := &redis.UniversalOptions{
		Addrs:         o.Addresses,
		MasterName:    o.MasterName,
		DB:            o.DB,
		Username:      o.Username,
		Password:      o.Password,
		TLSConfig:     o.TLS,
		DialTimeout:   ClientDialTimeout,
		DialerRetries: 1,
		ReadTimeout:   ClientReadTimeout,
		WriteTimeout:  ClientWriteTimeout,
		MaxRetries:    1,
	}
	switch o.Mode {
	case "cluster":
		co := u.Cluster()
		co.ClusterStateReloadInterval = ClusterStateReload
		c := redis.NewClusterClient(co)
		c.OnNewNode(func(node *redis.Client) { node.AddHook(reloadOnFailure{c}) })
		return c
	case "sentinel":
		return redis.NewFailoverClient(u.Failover())
	default:
		return redis.NewClient(u.Simple())
	}
}

// reloadOnFailure reloads a Cluster client's slot map when one of its
// nodes fails to answer: the node may be gone and its slots served by a
// replica promoted since.
type reloadOnFailure struct{ cluster *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			h.cluster.ReloadState(ctx)
		}
		return conn, err
	}
}

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if TopologyError(err) {
			h.cluster.ReloadState(ctx)
		}
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if TopologyError(err) {
			h.cluster.ReloadState(ctx)
		}
		return err
	}
}

// TopologyError says whether err is one a failover causes: the server
// cannot be reached, the connection broke or timed out, or the server
// says the cluster or its primary is down, or that it is a replica now.
func TopologyError(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	msg := err.Error()
	for _, prefix := range []string{"CLUSTERDOWN", "MASTERDOWN", "READONLY", "LOADING", "TRYAGAIN"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}
