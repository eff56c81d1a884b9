// Package crkube adapts controller-runtime's client to package kube's
// interfaces, for the manager and the gateway: it is a package of its own
// so that the plugin, which uses kube's own client, does not link
// controller-runtime's.
package crkube

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube"
)

// Getter is r as a kube.Getter.
func Getter(r client.Reader) kube.Getter { return getter{r} }

type getter struct{ r client.Reader }

func (g getter) Get(ctx context.Context, key types.NamespacedName, obj kube.Object) error {
	return g.r.Get(ctx, key, obj)
}

// Creator is c as a creator of objects that knows its own user, as
// kube.Client is.
func Creator(c client.Client) interface {
	Create(ctx context.Context, obj kube.Object) error
	WhoAmI(ctx context.Context) (v1alpha1.Approver, error)
} {
	return creator{c}
}

type creator struct{ c client.Client }

func (c creator) Create(ctx context.Context, obj kube.Object) error {
	co, ok := obj.(client.Object)
	if !ok {
		return fmt.Errorf("crkube: %T is not a client.Object", obj)
	}
	return c.c.Create(ctx, co)
}

func (c creator) WhoAmI(ctx context.Context) (v1alpha1.Approver, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.c.Create(ctx, review); err != nil {
		return v1alpha1.Approver{}, err
	}
	u := review.Status.UserInfo
	return v1alpha1.Approver{Username: u.Username, UID: u.UID, Groups: u.Groups}, nil
}
