package catalog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/providertest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// wholeVersion checks that what Redis holds is one complete version: the
// document, the version key, every tool's vector and metadata, all written
// by the same pass (a forced refresh stamps one time on all of them).
func (h *harness) wholeVersion(tools int) (int64, time.Time) {
	h.t.Helper()
	// One MULTI/EXEC reads all of it, as consumers do.
	snap, err := contract.Read(h.ctx, h.rc, h.keys)
	if err != nil {
		h.t.Fatal(err)
	}
	doc, err := snap.Document()
	if err != nil {
		h.t.Fatal(err)
	}
	cat, err := toolcatalog.New(doc, snap.Vectors)
	if err != nil {
		h.t.Fatal(err)
	}
	if cat.Version() != snap.Version {
		h.t.Fatalf("the document is version %d, P:version names %d", cat.Version(), snap.Version)
	}
	if len(cat.Document.Tools) != tools || len(cat.Vectors) != tools || len(snap.Metadata) != tools {
		h.t.Fatalf("version %d holds %d tools, %d sound vectors and %d metadata entries, want %d", cat.Version(), len(cat.Document.Tools), len(cat.Vectors), len(snap.Metadata), tools)
	}
	var stamp time.Time
	for i, tool := range cat.Document.Tools {
		m, err := contract.ParseMetadata(snap.Metadata[tool.Name])
		if err != nil {
			h.t.Fatalf("metadata of %s: %v", tool.Name, err)
		}
		if m.SpecHash != tool.SpecHash {
			h.t.Fatalf("the metadata of %s belongs to another spec", tool.Name)
		}
		if i == 0 {
			stamp = m.EmbeddedAt
		} else if !m.EmbeddedAt.Equal(stamp) {
			h.t.Fatalf("%s was embedded by another pass than %s", tool.Name, cat.Document.Tools[0].Name)
		}
	}
	return cat.Version(), stamp
}

// request asks the catalog's next pass for a forced refresh with token.
func (h *harness) request(token string) {
	h.tc.Annotations = map[string]string{v1alpha1.AnnotationRefreshRequestedAt: token, v1alpha1.AnnotationRefreshMode: "force"}
}

// Redis killed with SIGKILL while a pass publishes a version of 1,000
// tools, at different moments: after the restart, Redis holds the old
// complete version or the new complete one, never a mix, and the next
// passes carry the refresh through.
func TestRedisKilledDuringPublishLeavesWholeVersions(t *testing.T) {
	const tools, ns = 1000, "crash"
	own := redistest.NewDurable(t)
	p := providertest.New(t)
	p.Vary() // every forced refresh writes new queries and vectors for all tools
	h := newHarness(t, own, providerCatalog(ns, own, p), p, numbered(ns, tools, "Tool number %d.")...)
	h.converge(20, nil)
	// A first forced refresh stamps every tool with one pass's time.
	h.request("baseline")
	h.converge(20, nil)
	h.wholeVersion(tools)

	old, newer := 0, 0
	for round, delay := range []time.Duration{0, 30 * time.Millisecond, 90 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		before, beforeStamp := h.wholeVersion(tools)
		token := fmt.Sprintf("crash-%d", round)
		h.request(token)
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.run()
		}()
		time.Sleep(delay) // the moment of the crash, not an assertion wait
		if err := own.Kill(); err != nil {
			t.Fatal(err)
		}
		<-done
		if err := own.Restart(); err != nil {
			t.Fatal(err)
		}
		after, stamp := h.wholeVersion(tools)
		switch {
		case after == before && stamp.Equal(beforeStamp):
			old++
		case after > before && stamp.After(beforeStamp):
			newer++
		default:
			t.Fatalf("round %d: version %d (stamp %s) after the crash, %d (%s) before", round, after, stamp, before, beforeStamp)
		}
		t.Logf("round %d: killed %v into the pass: version %d before, %d after the restart", round, delay, before, after)

		// The next passes carry the request through.
		h.converge(20, nil)
		if h.tc.Status.LastHandledRefreshAt != token {
			t.Fatalf("round %d: the request %s was not handled", round, token)
		}
		if v, s := h.wholeVersion(tools); v <= before || !s.After(beforeStamp) {
			t.Fatalf("round %d: version %d stamped %s after the request; before the crash %d stamped %s", round, v, s, before, beforeStamp)
		}
	}
	t.Logf("Redis killed 5 times during publishes of %d tools: %d restarts found the old whole version, %d the new one, 0 mixed", tools, old, newer)
}
