package embedding

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// RetryPolicy says how failed requests are retried: exponential backoff
// with jitter on retryable failures (429, 5xx, timeouts, connection errors,
// malformed responses), a server's Retry-After honoured, nothing else
// retried. The zero value means DefaultRetryPolicy.
type RetryPolicy struct {
	// MaxRetries is the number of retries after the first attempt.
	MaxRetries int
	// Backoff is the delay schedule between attempts (Duration, Factor,
	// Jitter, Cap); Steps is ignored in favour of MaxRetries.
	Backoff wait.Backoff
	// MaxRetryAfter caps a server-requested delay.
	MaxRetryAfter time.Duration
	// Sleep waits for d or until ctx is done; nil uses a timer. Tests
	// inject it to observe delays without waiting.
	Sleep func(ctx context.Context, d time.Duration) error `json:"-"`
}

// DefaultRetryPolicy retries three times, starting at 500ms and doubling,
// with 20% jitter, capped at 30s.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		MaxRetries:    3,
		Backoff:       wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 30 * time.Second},
		MaxRetryAfter: 60 * time.Second,
	}
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.Backoff.Duration == 0 {
		p.Backoff = d.Backoff
	}
	if p.MaxRetryAfter == 0 {
		p.MaxRetryAfter = d.MaxRetryAfter
	}
	if p.Sleep == nil {
		p.Sleep = sleepContext
	}
	if p.MaxRetries < 0 {
		p.MaxRetries = 0
	}
	return p
}

// retryAfterError is a failure for which the server asked to wait.
type retryAfterError interface {
	retryAfter() (time.Duration, bool)
}

// do runs op until it succeeds, fails with a non-retryable error, runs out
// of retries or ctx ends. It returns the number of attempts made.
func (p RetryPolicy) do(ctx context.Context, op func(ctx context.Context) error) (int, error) {
	p = p.withDefaults()
	backoff := p.Backoff
	backoff.Steps = p.MaxRetries + 1
	attempts := 0
	for {
		attempts++
		err := op(ctx)
		if err == nil {
			return attempts, nil
		}
		if ctx.Err() != nil {
			return attempts, fmt.Errorf("%w (last error: %v)", context.Cause(ctx), err)
		}
		if !KindOf(err).Retryable() || attempts > p.MaxRetries {
			return attempts, err
		}
		delay := backoff.Step()
		var ra retryAfterError
		if errors.As(err, &ra) {
			if d, ok := ra.retryAfter(); ok {
				delay = min(d, p.MaxRetryAfter)
			}
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < delay {
			return attempts, fmt.Errorf("not retrying: the next attempt (in %s) is past the deadline: %w", delay.Round(time.Millisecond), err)
		}
		if err := p.Sleep(ctx, delay); err != nil {
			return attempts, err
		}
	}
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
