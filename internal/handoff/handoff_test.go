package handoff

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// One job waits per object: a newer one replaces or merges into it, a
// retried one never overwrites a newer, and the object is queued once.
// A plain test: no manager.
func TestOneJobWaitsPerObject(t *testing.T) {
	q := New[[]int]("test", func(context.Context, client.ObjectKey) {})
	key := client.ObjectKey{Namespace: "ns", Name: "a"}
	appendJob := func(v int) func([]int, bool) ([]int, bool) {
		return func(waiting []int, _ bool) ([]int, bool) { return append(waiting, v), false }
	}
	q.Put(key, appendJob(1))
	q.Put(key, appendJob(2))
	q.Put(key, func(waiting []int, ok bool) ([]int, bool) { return waiting, ok }) // keep what waits
	if q.Len() != 1 {
		t.Fatalf("queued %d times; want once", q.Len())
	}
	job, ok := q.Take(key)
	if !ok || len(job) != 2 || job[0] != 1 || job[1] != 2 {
		t.Fatalf("job %v, %v; want [1 2]", job, ok)
	}
	if _, ok := q.Take(key); ok {
		t.Fatal("a job taken is still waiting")
	}

	q.Put(key, appendJob(3))
	q.Retry(key, []int{0})
	if job, _ := q.Take(key); len(job) != 1 || job[0] != 3 {
		t.Fatalf("a retry overwrote the newer job: %v", job)
	}
	q.Continue(key, []int{4}, 0)
	if job, _ := q.Take(key); len(job) != 1 || job[0] != 4 {
		t.Fatalf("a job continued is %v; want [4]", job)
	}
}
