package controllers

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/onsi/gomega"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/cached"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
)

const goldenPublished = "../internal/catalog/testdata/published.golden"

// What two passes write to Redis (a first version of three tools, then a
// second after one description changed) is pinned byte for byte.
func TestPublishedVersionGolden(t *testing.T) {
	g := gomegaFor(t)
	ctx := context.Background()
	cluster.Use(t)
	const ns = "golden"
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	own := redistest.New(t)
	tc := builtinCatalog(ns, "tools")
	tc.UID = "6a1f3c2e-0000-4000-8000-000000000001"
	tc.Spec.Redis.Addresses = []string{own.Addr}
	tc.Spec.Publish.Channel = "toolcatalog:golden"
	weather := testTool(ns, "weather", "get_weather", "Get the current weather for a city.", "tools")
	weather.Spec.AlwaysInclude = true
	issue := testTool(ns, "issue", "create_issue", "Open an issue in a GitHub repository.", "tools")
	issue.Spec.ExampleQueries = []string{"file a bug about the login page"}
	email := testTool(ns, "email", "send_email", "Send an email to a recipient.", "tools")
	email.Spec.Parameters = nil
	createAll(g, weather, issue, email)

	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	clock := func() time.Time { return at }
	objects := &cached.Objects{Reader: k8sClient}
	pass := catalogReconciler(k8sClient, k8sClient, nil, nil, nil, &catalogconfig.ProviderCache{}, records.NewWriter(records.NewLedger(), objects, k8sClient), clock).Pass
	rc := own.Client()
	var dumps string
	for i, edit := range []func(){nil, func() {
		editTD(g, ns, "email", func(td *v1alpha1.ToolDefinition) { td.Spec.Description = "Send an email to one or more recipients." })
	}} {
		if edit != nil {
			edit()
			at = at.Add(time.Minute)
		}
		res := pass.Run(ctx, tc)
		g.Expect(res.Err).NotTo(HaveOccurred())
		g.Expect(res.Outcome.Version).To(BeEquivalentTo(i + 1))
		tc.Status.Version = res.Outcome.Version
		d, err := redistest.Dump(ctx, rc, "*")
		g.Expect(err).NotTo(HaveOccurred())
		dumps += "# after pass " + string(rune('1'+i)) + "\n" + d
	}
	if os.Getenv("UPDATE_GOLDEN") != "" {
		g.Expect(os.WriteFile(goldenPublished, []byte(dumps), 0o644)).To(Succeed())
	}
	want, err := os.ReadFile(goldenPublished)
	g.Expect(err).NotTo(HaveOccurred(), "no golden file: run with UPDATE_GOLDEN=1 once")
	g.Expect(dumps).To(Equal(string(want)), "what a pass writes to Redis changed; if that is meant, run with UPDATE_GOLDEN=1 and say so in the Redis contract")
}
