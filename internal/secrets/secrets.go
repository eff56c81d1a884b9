// Package secrets reads the Secret keys that ToolCatalogs and ToolSources
// name, for the manager and the gateway alike. Only Secrets labelled
// v1alpha1.LabelSecret=v1alpha1.LabelSecretValue are read: the right to
// create a catalog or a source in a namespace is not the right to read its
// Secrets, so a Secret's owner opts it in.
package secrets

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube"
)

// Selector matches the Secrets that opted in; caches that watch Secrets
// watch only these.
func Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{v1alpha1.LabelSecret: v1alpha1.LabelSecretValue})
}

// UnusableError says that a named Secret key cannot be used, and how to fix
// it. A Secret that does not exist and one that did not opt in read alike,
// so the message tells nobody which Secrets exist.
type UnusableError struct {
	Message string
}

func (e *UnusableError) Error() string { return e.Message }

// Value returns the key ref names of a Secret in namespace; field is the
// spec field that names it, for the message. A Secret that is missing, not
// opted in or without the key is an *UnusableError; anything else (the API
// server unreachable, access denied) is returned wrapped.
func Value(ctx context.Context, r kube.Getter, namespace string, ref *v1alpha1.SecretKeySelector, field string) ([]byte, error) {
	s := &corev1.Secret{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, s); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading Secret %s/%s: %w", namespace, ref.Name, err)
		}
		s = nil
	}
	if s == nil || !Selector().Matches(labels.Set(s.Labels)) {
		return nil, &UnusableError{Message: fmt.Sprintf("Secret %s/%s named in %s does not exist or is not labelled %s=%s: create it, or label it to let catalogs and sources of its namespace use it",
			namespace, ref.Name, field, v1alpha1.LabelSecret, v1alpha1.LabelSecretValue)}
	}
	v, ok := s.Data[ref.Key]
	if !ok {
		return nil, &UnusableError{Message: fmt.Sprintf("Secret %s/%s has no key %q named in %s", namespace, ref.Name, ref.Key, field)}
	}
	return v, nil
}
