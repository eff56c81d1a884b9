package gateway

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// A catalog pinned at a version is served at that version to a connected
// client, told by notifications/tools/list_changed, while newer versions
// go on being published; clearing the pin serves the newest again, the
// same way. Each step is measured from the API write to the client's
// list.
func TestPinnedCatalogIsServedAtItsVersion(t *testing.T) {
	ns := newNamespace(t)
	standardCatalog(t, ns, "held", v1alpha1.DisclosureOff)
	// The tools may have come over several versions: the one with all
	// five is pinned.
	good := published(t, ns, "held", 5).Version
	changed := make(chan struct{}, 16)
	cs := connect(t, ns, "held", aliceToken, "", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	before := listed(t, cs)
	create(t, testTool(ns, "held", "translate_text", "Translate text between languages."))
	published(t, ns, "held", 6)
	// awaitList waits for notices until the client lists what want says,
	// and returns how long that took since from.
	awaitList := func(what string, from time.Time, want func([]string) bool) time.Duration {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			if got := listed(t, cs); want(got) {
				return time.Since(from)
			}
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("the client does not list %s within 60s: it lists %v", what, listed(t, cs))
			}
		}
	}
	awaitList("version 2", time.Now(), func(got []string) bool { return slices.Contains(got, "translate_text") })

	setPin := func(pin *int64) time.Time {
		t.Helper()
		tc := &v1alpha1.ToolCatalog{}
		if err := kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "held"}, tc); err != nil {
			t.Fatal(err)
		}
		// A merge patch: the operator writes the status meanwhile.
		patch := client.MergeFrom(tc.DeepCopy())
		tc.Spec.Publish.PinVersion = pin
		if err := kube.Patch(context.Background(), tc, patch); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}
	pinned := awaitList("the pinned version", setPin(&good), func(got []string) bool { return slices.Equal(got, before) })

	// A newer version is published while pinned, and not served. The
	// catalog's status says so, and that two tools changed since.
	create(t, testTool(ns, "held", "convert_units", "Convert a quantity between units."))
	want := fmt.Sprintf("pinned to %d, 2 tools changed since", good)
	waitFor(t, "a newer version published and held", func() bool {
		tc := &v1alpha1.ToolCatalog{}
		if err := kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "held"}, tc); err != nil {
			return false
		}
		return tc.Status.Version == good+2 && tc.Status.Pin != nil && tc.Status.Pin.Summary == want
	})
	if got := listed(t, cs); !slices.Equal(got, before) {
		t.Fatalf("while pinned at %d, version %d published: the client lists %v, want %v", good, good+2, got, before)
	}
	if fresh := listed(t, connect(t, ns, "held", aliceToken, "", nil)); !slices.Equal(fresh, before) {
		t.Fatalf("a client connecting while pinned lists %v, want %v", fresh, before)
	}

	newest := awaitList("the newest version once unpinned", setPin(nil), func(got []string) bool {
		return slices.Contains(got, "convert_units") && slices.Contains(got, "translate_text")
	})
	t.Logf("the client lists the pinned version %s after the pin is set, and the newest %s after it is cleared", pinned.Round(time.Millisecond), newest.Round(time.Millisecond))
}
