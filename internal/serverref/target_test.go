package serverref

import (
	"strings"
	"testing"
)

// A server object's URL is followed to a Service of the object's own
// namespace or outside the cluster, and every other place it could point
// the operator at is refused, saying which.
func TestTargetOfAServersURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want Target
		err  string
	}{
		{url: "http://fetch.tools.svc.cluster.local:8080/mcp", want: Target{Service: "fetch", Namespace: "tools"}},
		{url: "https://fetch.tools.svc/mcp", want: Target{Service: "fetch", Namespace: "tools"}},
		{url: "http://FETCH.tools.svc.cluster.local./mcp", want: Target{Service: "fetch", Namespace: "tools"}},
		{url: "https://mcp.example.com/mcp", want: Target{External: true}},
		{url: "http://fetch.payroll.svc.cluster.local:8080/mcp", err: "of namespace payroll, not of the server's own namespace tools"},
		{url: "http://fetch.payroll.svc/mcp", err: "of namespace payroll"},
		{url: "http://fetch:8080/mcp", err: "without its namespace"},
		{url: "http://a.b.c.svc.cluster.local/mcp", err: "is not a Service"},
		{url: "http://kubernetes.default.svc.cluster.local/api", err: "Kubernetes API server"},
		{url: "https://kubernetes.default/api", err: "Kubernetes API server"},
		{url: "https://kubernetes/api", err: "Kubernetes API server"},
		{url: "http://metadata.google.internal/computeMetadata/v1/", err: "metadata service"},
		{url: "http://169.254.169.254/latest/meta-data/", err: "names the address 169.254.169.254"},
		{url: "http://[::1]:8080/mcp", err: "names the address ::1"},
		{url: "http://10.96.0.10:8080/mcp", err: "names the address 10.96.0.10"},
		{url: "http://localhost:8080/mcp", err: "loopback"},
		{url: "http://mcp.localhost/mcp", err: "loopback"},
		{url: "file:///etc/passwd", err: "is not a URL"},
		{url: "ftp://fetch.tools.svc/mcp", err: "not an http or https URL"},
		{url: "http://user:secret@fetch.tools.svc/mcp", err: "user information"},
	} {
		got, err := TargetOf(tc.url, "tools", "cluster.local")
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %+v, %v; want an error saying %q", tc.url, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %+v, %v; want %+v", tc.url, got, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("%s: the refusal repeats the credentials: %v", tc.url, err)
		}
	}
}
