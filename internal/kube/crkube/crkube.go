// Package crkube adapts controller-runtime's client to package kube's
// interfaces, for the manager and the gateway: it is a package of its own
// so that the plugin, which uses kube's own client, does not link
// controller-runtime's.
package crkube

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/internal/kube"
)

// Getter is r as a kube.Getter.
func Getter(r client.Reader) kube.Getter { return getter{r} }

type getter struct{ r client.Reader }

func (g getter) Get(ctx context.Context, key types.NamespacedName, obj kube.Object) error {
	return g.r.Get(ctx, key, obj)
}
