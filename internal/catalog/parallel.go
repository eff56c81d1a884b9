package catalog

import (
	"context"
	"runtime"

	"k8s.io/client-go/util/workqueue"
)

// parallelFrom is the number of items from which parallel works on every
// core: below it, starting the workers costs more than they save.
const parallelFrom = 4096

// parallel calls do for each of n items, on every core when there are
// many, in chunks that keep each worker on neighbouring items. do must
// only write what belongs to its item.
func parallel(n int, do func(i int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < parallelFrom || workers == 1 {
		for i := range n {
			do(i)
		}
		return
	}
	workqueue.ParallelizeUntil(context.Background(), workers, n, do, workqueue.WithChunkSize(n/(4*workers)+1))
}
