package controllers

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/controllers/tooldefinition"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/cached"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
)

// The ToolDefinitions' records follow the pass, through the ledger: a
// pass publishes and writes the catalog's status, hands its records over
// and goes on; the records writer then tells the ToolDefinition
// reconciler which tools have a new record. Only the latest outcome's
// records are kept, and a tool whose record stands is not told.
func TestRecordsFollowThePass(t *testing.T) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	createAll(g,
		testTool(ns, "weather", "get_weather", "Get the current weather conditions and the forecast for a city.", "direct"),
		testTool(ns, "email", "send_email", "Send an email message to a recipient.", "direct"),
	)
	d := newDirectCatalog(t, g, builtinCatalog(ns, "direct"))
	_, err := d.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.get().Status.Version).To(BeEquivalentTo(1))
	g.Expect(d.r.Records.Len()).To(Equal(1), "the pass handed no outcome to the records writer")

	// An edit is published, its status written, with the records of
	// version 1 still untold.
	editTD(g, ns, "email", func(td *v1alpha1.ToolDefinition) {
		td.Spec.Description = "Send an email message with attachments to one or more recipients."
	})
	_, err = d.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	tc := d.get()
	g.Expect(tc.Status.Version).To(BeEquivalentTo(2))
	expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
	g.Expect(d.r.Records.Len()).To(Equal(1), "the second outcome was queued twice")
	// The ToolDefinition's own status says the spec hash of the edit once
	// its reconciler has seen it.
	var email *v1alpha1.ToolDefinition
	g.Eventually(func(g Gomega) {
		email = getTD(g, ns, "email")
		g.Expect(email.Status.ObservedGeneration).To(Equal(email.Generation))
	}).Should(Succeed())
	rec, known := d.r.Records.Ledger().RecordFor("direct", email, nil)
	g.Expect(known).To(BeTrue())
	g.Expect(rec.CatalogVersion).To(BeEquivalentTo(2), "the ledger holds the superseded outcome's records")
	g.Expect(rec.SpecHash).To(Equal(email.Status.SpecHash))

	key := client.ObjectKeyFromObject(d.tc)
	told := func() []string {
		d.r.Records.Turn(t.Context(), key)
		var names []string
		for {
			select {
			case e := <-d.r.Records.Ledger().Changed():
				names = append(names, e.Object.Name)
			default:
				return names
			}
		}
	}
	g.Expect(told()).To(ConsistOf("weather", "email"))

	// The next edit's pass changes the email tool's record alone, and only
	// it is looked at: the weather tool, whose status still lacks its
	// record (nothing wrote it here), is its own reconciler's to write.
	editTD(g, ns, "email", func(td *v1alpha1.ToolDefinition) {
		td.Spec.Description = "Send an email message with attachments and a signature to one or more recipients."
	})
	d.reconcileUntil(3)
	g.Expect(told()).To(ConsistOf("email"))

	// Every tool is looked at when asked (after a restart), and one whose
	// record stands is not told.
	weather := getTD(g, ns, "weather")
	rec, _ = d.r.Records.Ledger().RecordFor("direct", weather, nil)
	weather.Status.Catalogs = []v1alpha1.CatalogEmbeddingStatus{*rec}
	g.Expect(k8sClient.Status().Update(t.Context(), weather)).To(Succeed())
	d.r.Records.Check(key, nil, true)
	g.Expect(told()).To(ConsistOf("email"))

	// A ToolDefinition's update that shows a record the ledger no longer
	// holds (the records writer looked while the cache lacked the
	// reconciler's last write) brings it back to its reconciler; one that
	// shows the ledger's record does not.
	behind := d.r.Records.Ledger().Behind()
	weather = getTD(g, ns, "weather")
	g.Expect(behind.Update(event.UpdateEvent{ObjectOld: weather, ObjectNew: weather})).To(BeFalse())
	stale := weather.DeepCopy()
	stale.Status.Catalogs[0].ConfusableWith = &v1alpha1.ConfusableTool{Name: "send_email", Similarity: "0.9"}
	g.Expect(behind.Update(event.UpdateEvent{ObjectOld: weather, ObjectNew: stale})).To(BeTrue())
}

// A ToolDefinition's status has one writer, whatever number of catalogs
// select the tool: the managed fields of the status subresource name the
// ToolDefinition reconciler's field manager and no other.
func TestToolDefinitionStatusHasOneWriter(t *testing.T) {
	g, ns := toolOfTwoCatalogs(t)

	writers := map[string][]string{}
	for _, m := range getTD(g, ns, "weather").ManagedFields {
		if m.Subresource != "status" || m.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Status map[string]json.RawMessage `json:"f:status"`
		}
		g.Expect(json.Unmarshal(m.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
		for f := range fields.Status {
			writers[m.Manager] = append(writers[m.Manager], f)
		}
	}
	g.Expect(writers).To(HaveLen(1), "the status has several writers: %v", writers)
	g.Expect(writers).To(HaveKeyWithValue(tooldefinition.FieldOwner, ContainElements("f:catalogs", "f:conditions", "f:specHash")))
}

// A deleted catalog's record goes from every ToolDefinition, and does not
// come back when the tool is reconciled after: the ledger forgets it.
func TestDeletedCatalogRecordsGo(t *testing.T) {
	g, ns := toolOfTwoCatalogs(t)

	g.Expect(k8sClient.Delete(context.Background(), getTC(g, ns, "more"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		td := getTD(g, ns, "weather")
		g.Expect(records.Of(td, "more")).To(BeNil())
		g.Expect(records.Of(td, "tools")).NotTo(BeNil())
		expectCondition(g, td, v1alpha1.ConditionEmbedded, metav1.ConditionTrue, v1alpha1.ReasonEmbedded)
	}).Should(Succeed())

	// A new spec makes the reconciler write the tool again (and the
	// remaining catalog its record of the new spec): still no record of
	// the deleted catalog.
	editTD(g, ns, "weather", func(td *v1alpha1.ToolDefinition) {
		td.Spec.Description = "Get the current weather conditions, the forecast and the alerts for a city."
	})
	g.Eventually(func(g Gomega) {
		td := getTD(g, ns, "weather")
		g.Expect(td.Status.ObservedGeneration).To(Equal(td.Generation))
		g.Expect(records.Of(td, "tools")).NotTo(BeNil())
		g.Expect(records.Of(td, "tools").SpecHash).To(Equal(td.Status.SpecHash))
	}).Should(Succeed())
	g.Expect(records.Of(getTD(g, ns, "weather"), "more")).To(BeNil())
}

// toolOfTwoCatalogs makes a namespace with a tool, weather, that two
// catalogs (tools and more) select, and waits for the tool to be embedded
// in both.
func toolOfTwoCatalogs(t *testing.T) (*WithT, string) {
	g := gomegaFor(t)
	ns := newNamespace(t)
	more := builtinCatalog(ns, "more")
	more.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{catalogLabel: "tools"}}
	createAll(g, testTool(ns, "weather", "get_weather", "Get the current weather conditions and the forecast for a city.", "tools"),
		builtinCatalog(ns, "tools"), more)
	g.Eventually(func(g Gomega) {
		td := getTD(g, ns, "weather")
		g.Expect(records.Of(td, "tools")).NotTo(BeNil())
		g.Expect(records.Of(td, "more")).NotTo(BeNil())
		expectCondition(g, td, v1alpha1.ConditionEmbedded, metav1.ConditionTrue, v1alpha1.ReasonEmbedded)
	}).Should(Succeed())
	return g, ns
}

// cached.Objects lists the cache's own objects that the selector matches,
// without a copy: two listings hand out the same objects. Without the
// cache's index it lists through the client, to the same tools.
func TestToolDefinitionsAreTheCachesOwn(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	ns := newNamespace(t)
	for name, lbls := range map[string]map[string]string{"a": {"team": "x"}, "b": {"team": "x"}, "c": {"team": "y"}} {
		td := &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
			Spec: v1alpha1.ToolDefinitionSpec{Name: name, Description: "does " + name}}
		g.Expect(k8sClient.Create(ctx, td)).To(Succeed())
	}
	sel := labels.SelectorFromSet(labels.Set{"team": "x"})
	r := &cached.Objects{Reader: suiteManager.GetClient(), Informers: suiteManager.GetCache()}
	names := func(tds []*v1alpha1.ToolDefinition) []string {
		var out []string
		for _, td := range tds {
			out = append(out, td.Name)
		}
		slices.Sort(out)
		return out
	}
	var first []*v1alpha1.ToolDefinition
	g.Eventually(func(g Gomega) {
		var err error
		first, err = r.ToolDefinitions(ctx, ns, sel)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(names(first)).To(Equal([]string{"a", "b"}))
	}).Should(Succeed())
	again, err := r.ToolDefinitions(ctx, ns, sel)
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]*v1alpha1.ToolDefinition{}
	for _, td := range first {
		byName[td.Name] = td
	}
	for _, td := range again {
		g.Expect(td).To(BeIdenticalTo(byName[td.Name]), "a second listing copied %s", td.Name)
	}

	listed, err := (&cached.Objects{Reader: suiteManager.GetClient()}).ToolDefinitions(ctx, ns, sel)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(listed)).To(Equal([]string{"a", "b"}))
	g.Expect(listed[0]).NotTo(BeIdenticalTo(byName[listed[0].Name]), "the client's list is a copy")
}
