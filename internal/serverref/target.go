package serverref

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// Target is where a server object's URL points.
type Target struct {
	// Service and Namespace name the in-cluster Service the URL names,
	// both "" for a URL outside the cluster (External).
	Service, Namespace string
	// External says the URL names a host outside the cluster, which the
	// egress policy decides on as for any URL.
	External bool
}

// apiServerNames are the names of the Kubernetes API server's Service.
var apiServerNames = []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc"}

// metadataNames are the host names of clouds' instance metadata services.
var metadataNames = []string{"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}

// TargetOf reads where the URL a server object of namespace reports
// points. A server object answers for its own namespace only: a URL that
// names a Service of another namespace, an address rather than a name,
// the loopback, a cloud's metadata service or the API server is refused,
// saying which; so is a URL that is not http or https or carries
// credentials. domain is the cluster's DNS domain (cluster.local).
func TargetOf(raw, namespace, domain string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return Target{}, fmt.Errorf("%q is not a URL", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return Target{}, fmt.Errorf("%s is not an http or https URL", raw)
	}
	if u.User != nil {
		return Target{}, fmt.Errorf("the URL carries user information")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return Target{}, fmt.Errorf("the URL names the address %s, not a Service: a server object's address is its Service's name", host)
	}
	for _, n := range apiServerNames {
		if host == n || host == n+"."+domain || host == "kubernetes.default.svc."+domain {
			return Target{}, fmt.Errorf("the URL names the Kubernetes API server (%s)", host)
		}
	}
	for _, n := range metadataNames {
		if host == n {
			return Target{}, fmt.Errorf("the URL names a cloud's metadata service (%s)", host)
		}
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return Target{}, fmt.Errorf("the URL names the loopback (%s)", host)
	}
	labels := strings.Split(strings.TrimSuffix(strings.TrimSuffix(host, "."+domain), ".svc"), ".")
	inCluster := !strings.Contains(host, ".") || strings.HasSuffix(host, ".svc") || strings.HasSuffix(host, "."+domain)
	switch {
	case !inCluster:
		return Target{External: true}, nil
	case len(labels) == 1:
		// One label: the resolver completes it with the pod's own
		// namespace, which is not the object's.
		return Target{}, fmt.Errorf("the URL names %s without its namespace: write %s.%s.svc", host, host, namespace)
	case len(labels) != 2:
		return Target{}, fmt.Errorf("the URL names %s, which is not a Service (NAME.NAMESPACE.svc)", host)
	case labels[1] != namespace:
		return Target{}, fmt.Errorf("the URL names Service %s of namespace %s, not of the server's own namespace %s", labels[0], labels[1], namespace)
	}
	return Target{Service: labels[0], Namespace: labels[1]}, nil
}
