package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// The ToolDefinitions' records are written off the pass: a pass publishes
// and writes the catalog's status with no record written, so an edit is
// published while the records of earlier versions wait. Only the latest
// outcome's records are written.
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
	g.Expect(d.r.records().queue.Len()).To(Equal(1), "the pass handed no outcome to the records writer")
	for _, name := range []string{"weather", "email"} {
		g.Expect(recordOf(getTD(g, ns, name), "direct")).To(BeNil(), "the pass wrote %s's record itself", name)
	}

	// An edit is published, its status written, with the records of
	// version 1 still unwritten.
	editTD(g, ns, "email", func(td *v1alpha1.ToolDefinition) {
		td.Spec.Description = "Send an email message with attachments to one or more recipients."
	})
	_, err = d.reconcile()
	g.Expect(err).NotTo(HaveOccurred())
	tc := d.get()
	g.Expect(tc.Status.Version).To(BeEquivalentTo(2))
	expectCondition(g, tc, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded)
	g.Expect(d.r.records().queue.Len()).To(Equal(1), "the second outcome did not replace the first")

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- d.r.records().Start(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	g.Eventually(func(g Gomega) {
		weather, email := recordOf(getTD(g, ns, "weather"), "direct"), recordOf(getTD(g, ns, "email"), "direct")
		g.Expect(weather).NotTo(BeNil())
		g.Expect(email).NotTo(BeNil())
		g.Expect(weather.SpecHash).To(Equal(getTD(g, ns, "weather").Status.SpecHash))
		g.Expect(email.SpecHash).To(Equal(getTD(g, ns, "email").Status.SpecHash), "the records of the superseded outcome were written")
		g.Expect(email.CatalogVersion).To(BeEquivalentTo(2))
	}).Should(Succeed())
}
