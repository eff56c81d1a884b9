package reconcile

import (
	"context"
	"errors"

	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// QuietOnShutdown is r, except that an error a reconcile meets because
// the manager is stopping (its context canceled) is not returned: it is
// no fault, the work is not lost (the next leader reconciles every object
// when it starts), and controller-runtime would log it at error level.
func QuietOnShutdown(r crreconcile.Reconciler) crreconcile.Reconciler {
	return crreconcile.Func(func(ctx context.Context, req crreconcile.Request) (crreconcile.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return crreconcile.Result{}, nil
		}
		return res, err
	})
}
