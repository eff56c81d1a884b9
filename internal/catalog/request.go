package catalog

import (
	"fmt"
	"strings"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// Request is a refresh request read from a catalog's annotations.
type Request struct {
	// Token is the request's toolcatalog.dev/refresh-requested-at value;
	// empty when there is no request that was not handled before.
	Token string
	// Mode and Targets restrict what the pass does; see Plan.
	Mode    v1alpha1.RefreshMode
	Targets []string
	// Invalid explains why the request is ignored (an unknown mode); the
	// pass then runs as a normal one and the token is still used up.
	Invalid string
}

// ReadRequest returns the refresh request in annotations unless its token
// is lastHandled.
func ReadRequest(annotations map[string]string, lastHandled string) Request {
	token := annotations[v1alpha1.AnnotationRefreshRequestedAt]
	if token == "" || token == lastHandled {
		return Request{}
	}
	r := Request{Token: token, Mode: v1alpha1.RefreshMode(annotations[v1alpha1.AnnotationRefreshMode])}
	switch r.Mode {
	case modeNormal, v1alpha1.RefreshModeForce, v1alpha1.RefreshModeInvalidOnly, v1alpha1.RefreshModeEmbedOnly:
	default:
		r.Invalid = fmt.Sprintf("refresh request %q ignored: %s must be force, invalid-only or embed-only, not %q",
			token, v1alpha1.AnnotationRefreshMode, r.Mode)
		r.Mode = modeNormal
		return r
	}
	for _, t := range strings.Split(annotations[v1alpha1.AnnotationRefreshTools], ",") {
		if t = strings.TrimSpace(t); t != "" {
			r.Targets = append(r.Targets, t)
		}
	}
	return r
}
