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

// maxUnknownTools bounds status.lastRefresh.unknownTools.
const maxUnknownTools = 20

// Result says how the request went in a pass with these plans; nil when
// there is no request.
func (r Request) Result(plans []ToolPlan) *v1alpha1.RefreshResult {
	if r.Token == "" {
		return nil
	}
	res := &v1alpha1.RefreshResult{RequestedAt: r.Token, Result: v1alpha1.RefreshSucceeded}
	if r.Invalid != "" {
		res.Result, res.Message = v1alpha1.RefreshFailed, r.Invalid
		return res
	}
	known := map[string]bool{}
	for _, pl := range plans {
		known[pl.Name] = true
	}
	var unknown []string
	for _, t := range r.Targets {
		if !known[t] {
			unknown = append(unknown, t)
		}
	}
	res.UnknownTools = unknown[:min(len(unknown), maxUnknownTools)]
	switch {
	case len(r.Targets) > 0 && len(unknown) == len(r.Targets):
		res.Result = v1alpha1.RefreshFailed
		res.Message = fmt.Sprintf("refresh request %q failed: none of the requested tools (%s) is in the catalog; %s takes tool names (spec.name) of selected ToolDefinitions",
			r.Token, ListNames(unknown), v1alpha1.AnnotationRefreshTools)
	case len(unknown) > 0:
		res.Result = v1alpha1.RefreshPartiallyIgnored
		res.Message = fmt.Sprintf("refresh request %q ignored %d tools that are not in the catalog (%s) and refreshed the others",
			r.Token, len(unknown), ListNames(unknown))
	default:
		mode := string(r.Mode)
		if mode == "" {
			mode = "normal"
		}
		scope := "every tool"
		if len(r.Targets) > 0 {
			scope = ListNames(r.Targets)
		}
		res.Message = fmt.Sprintf("refresh request %q handled: %s refresh of %s", r.Token, mode, scope)
	}
	return res
}
