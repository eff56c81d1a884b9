package gateway

import (
	"slices"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// What tools/list returns follows the catalog's disclosure policy, for
// the caller's principal and window.
func TestListFollowsTheDisclosurePolicy(t *testing.T) {
	ns := newNamespace(t)
	threshold := func(f float64) *float64 { return &f }
	catalogs := map[string]v1alpha1.DisclosureSpec{
		"off":       {Mode: v1alpha1.DisclosureOff},
		"on":        {Mode: v1alpha1.DisclosureOn},
		"auto-low":  {Mode: v1alpha1.DisclosureAuto, Threshold: threshold(0.001)},
		"auto-high": {Mode: v1alpha1.DisclosureAuto, Threshold: threshold(1)},
		"auto":      {},
	}
	for name, d := range catalogs {
		create(t, testCatalog(ns, name, d))
		create(t, standardTools(ns, name)...)
	}
	for name := range catalogs {
		published(t, ns, name, 5)
	}
	tools := []string{"create_issue", "get_weather", "send_email", "web_search"}
	bridge := []string{"tool_call", "tool_describe", "tool_search", "web_search"}
	for _, tt := range []struct {
		catalog, token, query string
		want                  []string
	}{
		{"off", aliceToken, "", tools},
		{"off", finToken, "", append(slices.Clone(tools), "run_sql")},
		{"on", aliceToken, "", bridge},
		{"auto-low", aliceToken, "", bridge},
		{"auto-high", aliceToken, "", tools},
		{"auto", aliceToken, "", tools},
		// Five small tools are far below 10 % of 128,000 tokens, but not
		// of a 1,000-token window.
		{"auto", aliceToken, "?contextWindow=1000", bridge},
	} {
		got := listed(t, connect(t, ns, tt.catalog, tt.token, tt.query, nil))
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tt.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s%s as %s: listed %v, want %v", tt.catalog, tt.query, strings.SplitN(tt.token, "-", 2)[0], got, want)
		}
	}
}
