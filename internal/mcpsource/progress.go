package mcpsource

import (
	"context"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProgressFunc receives the progress a server reports for one call:
// progress so far, the total when known (0 otherwise), and a message.
type ProgressFunc func(progress, total float64, message string)

type progressKey struct{}

// WithProgress returns ctx carrying receive, for Session.CallTool.
func WithProgress(ctx context.Context, receive ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, receive)
}

// maxProgressPerCall bounds the notifications one call passes on: a
// server that floods them is not relayed past it.
const maxProgressPerCall = 1000

// progressRoutes maps the progress tokens of a session's calls in flight
// to their receivers. Tokens are the session's own, so a server cannot
// reach another call's receiver, and one that names an unknown token is
// ignored.
type progressRoutes struct {
	mu     sync.Mutex
	next   uint64
	routes map[string]*progressRoute
}

type progressRoute struct {
	receive ProgressFunc
	sent    int
}

func (p *progressRoutes) add(receive ProgressFunc) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.routes == nil {
		p.routes = map[string]*progressRoute{}
	}
	p.next++
	token := "toolcatalog-" + strconv.FormatUint(p.next, 10)
	p.routes[token] = &progressRoute{receive: receive}
	return token
}

func (p *progressRoutes) remove(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.routes, token)
}

// route is the session's ProgressNotificationHandler.
func (p *progressRoutes) route(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	p.mu.Lock()
	r := p.routes[token]
	if r == nil || r.sent >= maxProgressPerCall {
		p.mu.Unlock()
		return
	}
	r.sent++
	p.mu.Unlock()
	r.receive(req.Params.Progress, req.Params.Total, req.Params.Message)
}
