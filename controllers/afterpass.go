package controllers

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// afterPass runs work that catalog passes hand over, off the passes, one
// catalog at a time: each catalog has at most one job waiting, which a
// newer one replaces or merges into (put), and run does the job taken
// from the queue. It runs with the manager, on the leader: the work
// writes status.
type afterPass[J any] struct {
	queue workqueue.TypedRateLimitingInterface[client.ObjectKey]
	run   func(ctx context.Context, key client.ObjectKey)

	mu   sync.Mutex
	jobs map[client.ObjectKey]J
}

func newAfterPass[J any](name string) *afterPass[J] {
	return &afterPass[J]{
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[client.ObjectKey](),
			workqueue.TypedRateLimitingQueueConfig[client.ObjectKey]{Name: name}),
		jobs: map[client.ObjectKey]J{},
	}
}

// put sets a catalog's waiting job to merge(the job waiting, whether one
// is) and queues the catalog, unless merge says to keep what waits.
func (q *afterPass[J]) put(key client.ObjectKey, merge func(waiting J, ok bool) (J, bool)) {
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

// take removes and returns a catalog's waiting job.
func (q *afterPass[J]) take(key client.ObjectKey) (J, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	job, ok := q.jobs[key]
	delete(q.jobs, key)
	return job, ok
}

// retry puts a job back unless a newer one came meanwhile, and queues
// the catalog with add.
func (q *afterPass[J]) retry(key client.ObjectKey, job J, add func(client.ObjectKey)) {
	q.mu.Lock()
	if _, ok := q.jobs[key]; !ok {
		q.jobs[key] = job
	}
	q.mu.Unlock()
	add(key)
}

// Start runs the jobs until ctx ends.
func (q *afterPass[J]) Start(ctx context.Context) error {
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
func (q *afterPass[J]) NeedLeaderElection() bool { return true }
