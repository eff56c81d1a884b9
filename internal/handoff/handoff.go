// Package handoff runs the work that a controller's reconciles hand over,
// off the reconciles, one object at a time: each object has at most one
// job waiting, which a newer one replaces or merges into (Put), and the
// queue's run function does the job it takes (Take). The catalogs'
// passes hand over their records (controllers) and the versions to grade
// (internal/grading) this way, so a pass ends as soon as it has published.
package handoff

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Queue holds the jobs waiting, one per object, and runs them. It is a
// manager Runnable that runs on the leader: the jobs write status.
type Queue[J any] struct {
	queue workqueue.TypedRateLimitingInterface[client.ObjectKey]
	run   func(ctx context.Context, key client.ObjectKey)

	mu   sync.Mutex
	jobs map[client.ObjectKey]J
}

// New returns a queue whose jobs run does; name names its metrics.
func New[J any](name string, run func(ctx context.Context, key client.ObjectKey)) *Queue[J] {
	return &Queue[J]{
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[client.ObjectKey](),
			workqueue.TypedRateLimitingQueueConfig[client.ObjectKey]{Name: name}),
		run:  run,
		jobs: map[client.ObjectKey]J{},
	}
}

// Put sets an object's waiting job to merge(the job waiting, whether one
// is) and queues the object, unless merge says to keep what waits.
func (q *Queue[J]) Put(key client.ObjectKey, merge func(waiting J, ok bool) (J, bool)) {
	q.mu.Lock()
	prev, ok := q.jobs[key]
	job, keep := merge(prev, ok)
	if !keep {
		q.jobs[key] = job
	}
	q.mu.Unlock()
	if !keep {
		q.queue.Add(key)
	}
}

// Take removes and returns an object's waiting job.
func (q *Queue[J]) Take(key client.ObjectKey) (J, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	job, ok := q.jobs[key]
	delete(q.jobs, key)
	return job, ok
}

// Retry puts a job back unless a newer one came meanwhile, and queues the
// object again after the rate limiter's backoff.
func (q *Queue[J]) Retry(key client.ObjectKey, job J) {
	q.putBack(key, job)
	q.queue.AddRateLimited(key)
}

// Continue puts a job back unless a newer one came meanwhile, and queues
// the object again after wait (at once for 0), with its backoff reset.
func (q *Queue[J]) Continue(key client.ObjectKey, job J, wait time.Duration) {
	q.putBack(key, job)
	q.queue.Forget(key)
	q.queue.AddAfter(key, wait)
}

// Done resets an object's backoff after a job that succeeded.
func (q *Queue[J]) Done(key client.ObjectKey) { q.queue.Forget(key) }

// Len is how many objects are queued.
func (q *Queue[J]) Len() int { return q.queue.Len() }

func (q *Queue[J]) putBack(key client.ObjectKey, job J) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.jobs[key]; !ok {
		q.jobs[key] = job
	}
}

// Start runs the jobs until ctx ends.
func (q *Queue[J]) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		q.queue.ShutDown()
	}()
	for {
		key, shutdown := q.queue.Get()
		if shutdown {
			return nil
		}
		q.run(ctx, key)
		q.queue.Done(key)
	}
}

// NeedLeaderElection says the jobs write status: the leader's work.
func (q *Queue[J]) NeedLeaderElection() bool { return true }
