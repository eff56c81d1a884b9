package reconcile

import (
	"errors"
	"time"

	"k8s.io/client-go/util/workqueue"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Queue is the queue a controller's event handlers add requests to.
type Queue = workqueue.TypedRateLimitingInterface[ctrl.Request]

// Now reads clock, time.Now when nil: reconcilers take their clock as a
// field so tests can set it.
func Now(clock func() time.Time) time.Time {
	if clock != nil {
		return clock()
	}
	return time.Now()
}

// Kind says what retrying a failed step can achieve.
type Kind int

const (
	// Transient: the API server, a write conflict or an outage; retried
	// with the queue's backoff.
	Transient Kind = iota
	// Waiting: something outside the cluster (an MCP server) is not
	// reachable or refused us; retried after a fixed delay.
	Waiting
	// Stalled: the user must change the object or a Secret; nothing is
	// retried before that change (which triggers a reconcile) or the
	// periodic resync.
	Stalled
)

// Error is a step's failure, classified for status: the condition reason,
// a message that says what happened and what to do, and what retrying
// can do.
type Error struct {
	Kind            Kind
	Reason, Message string
	// Also are the conditions besides Ready that the failure sets False
	// (a catalog that cannot reach Redis is not Published either).
	Also []string
	Err  error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// As is the *Error in err's chain, nil when there is none.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// HasReason reports whether err is an *Error with the given reason.
func HasReason(err error, reason string) bool {
	e := As(err)
	return e != nil && e.Reason == reason
}

// RequeueFor says when an object is due again after a reconcile that
// ended with err: a stalled error waits for resync (a fix triggers a
// reconcile sooner), a waiting one for wait, any other error goes back to
// the rate-limited queue, and success waits for resync.
func RequeueFor(err error, resync, wait time.Duration) (ctrl.Result, error) {
	e := As(err)
	switch {
	case e != nil && e.Kind == Stalled:
		return ctrl.Result{RequeueAfter: resync}, nil
	case e != nil && e.Kind == Waiting:
		return ctrl.Result{RequeueAfter: wait}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}
