package egress

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// counted is a loopback server that counts the requests it receives.
func counted(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func mustNew(t *testing.T, allow []string, deny ...string) *Policy {
	t.Helper()
	p, err := New(allow, deny...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func get(p *Policy, url string) error {
	c, err := p.Client(url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// The default policy refuses loopback by address and by a name that
// resolves to it; the server never sees a request. Proof that it would:
// listing the address reaches it.
func TestDefaultRefusesLoopback(t *testing.T) {
	srv, hits := counted(t, nil)
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	for _, url := range []string{srv.URL + "/mcp", "http://localhost" + port + "/mcp"} {
		if err := get(Default(), url); !errors.Is(err, ErrDenied) {
			t.Errorf("%s: got %v, want a denial", url, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the loopback server received %d requests", hits.Load())
	}
	if err := get(mustNew(t, []string{"127.0.0.1/32"}), srv.URL+"/mcp"); err != nil {
		t.Fatalf("listed loopback address: %v", err)
	}
	if hits.Load() != 1 {
		t.Fatalf("the listed server received %d requests, want 1", hits.Load())
	}
}

// Metadata services, link-local, unspecified and multicast addresses are
// refused however the URL spells them, and a catch-all range does not
// open them.
func TestDeniedRangesNeedTheirOwnEntry(t *testing.T) {
	p := mustNew(t, []string{"0.0.0.0/0", "::/0"})
	for _, url := range []string{
		"http://169.254.169.254/latest/meta-data/iam",
		"http://[fd00:ec2::254]/latest",
		"http://100.100.100.200/latest",
		"http://[::ffff:169.254.169.254]/",
		"http://[::1]:8080/",
		"http://0.0.0.0:80/",
		"http://[fe80::1]/",
		"http://224.0.0.1/",
	} {
		if err := p.CheckURL(url); !errors.Is(err, ErrDenied) {
			t.Errorf("%s: got %v, want a denial", url, err)
		}
	}
	for _, url := range []string{"http://203.0.113.9/mcp", "https://[2001:db8::1]/mcp", "https://mcp.example.com/"} {
		if err := p.CheckURL(url); err != nil {
			t.Errorf("%s: %v", url, err)
		}
	}
	open := mustNew(t, []string{"169.254.169.254/32"})
	if err := open.CheckAddr(netip.MustParseAddr("169.254.169.254")); err != nil {
		t.Errorf("a listed metadata address: %v", err)
	}
	if err := open.CheckAddr(netip.MustParseAddr("169.254.1.1")); !errors.Is(err, ErrDenied) {
		t.Errorf("an unlisted link-local address: %v", err)
	}
}

// The API server is denied even inside a listed loopback range.
func TestAPIServerIsDenied(t *testing.T) {
	p := mustNew(t, []string{"127.0.0.0/8"}, "https://127.0.0.2:6443")
	if err := p.CheckAddr(netip.MustParseAddr("127.0.0.2")); !errors.Is(err, ErrDenied) {
		t.Errorf("API server: got %v, want a denial", err)
	}
	if err := p.CheckAddr(netip.MustParseAddr("127.0.0.3")); err != nil {
		t.Errorf("another listed loopback address: %v", err)
	}
}

// A URL prefix allows its own host and paths below it, nothing that
// merely starts with the same characters.
func TestURLPrefixes(t *testing.T) {
	p := mustNew(t, []string{"https://tools.example.com/mcp"})
	for url, ok := range map[string]bool{
		"https://tools.example.com/mcp":             true,
		"https://tools.example.com/mcp/":            true,
		"https://tools.example.com/mcp/v2":          true,
		"https://tools.example.com/mcpx":            false,
		"https://tools.example.com.evil.net/mcp":    false,
		"http://tools.example.com/mcp":              false,
		"https://tools.example.com:8443/mcp":        false,
		"https://user:pw@tools.example.com/mcp":     false,
		"https://other.example.com/mcp":             false,
		"ftp://tools.example.com/mcp":               false,
		"https://tools.example.com/other/../mcp/x":  false,
		"https://tools.example.com/mcp/../admin":    false,
		"https://tools.example.com/mcp/./x":         false,
		"https://TOOLS.example.com/mcp/upper-cased": true,
	} {
		err := p.CheckURL(url)
		if ok != (err == nil) {
			t.Errorf("%s: allowed=%v, want %v (%v)", url, err == nil, ok, err)
		}
	}
	if _, err := New([]string{"not a range"}); err == nil {
		t.Error("a bad entry was accepted")
	}
}

// A redirect is not followed: the target never sees a request, so a
// header set for the first host cannot reach it.
func TestRedirectsAreNotFollowed(t *testing.T) {
	target, hits := counted(t, nil)
	first, _ := counted(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/steal", http.StatusTemporaryRedirect)
	})
	p := Unrestricted()
	c, err := p.Client(first.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, first.URL+"/mcp", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer secret")
	_, err = c.Do(req)
	if !errors.Is(err, ErrRedirect) {
		t.Fatalf("got %v, want ErrRedirect", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("the redirect target received %d requests", hits.Load())
	}
}

func TestNilPolicyDeniesEverything(t *testing.T) {
	var p *Policy
	if err := p.CheckURL("https://mcp.example.com/"); !errors.Is(err, ErrDenied) {
		t.Fatalf("got %v", err)
	}
}

// By default a cluster's own network is out of reach: private ranges
// (where pods, Services and nodes are), by address, and cluster names, by
// name, as a ToolSource pointed at the DNS service, a kubelet or another
// team's Redis would reach them. Public addresses stay open, and listing
// a range or a URL prefix opens just that.
func TestPrivateNetworksAndClusterNamesNeedAnEntry(t *testing.T) {
	for _, url := range []string{
		"http://10.96.0.10:53/", "http://192.168.1.20:10255/pods", "http://172.16.0.1/", "http://100.64.1.1/",
		"http://[fd00::1]/", "http://[::ffff:10.0.0.7]/",
		"http://redis.team-a.svc:6379/", "http://redis.team-a.svc.cluster.local:6379/", "http://redis:6379/", "http://kubernetes.default.svc./",
	} {
		if err := Default().CheckURL(url); !errors.Is(err, ErrDenied) {
			t.Errorf("%s: got %v, want a denial", url, err)
		}
	}
	for _, url := range []string{"https://mcp.example.com/", "http://203.0.113.9/mcp", "https://[2001:db8::1]/mcp", "https://svc.example.com/"} {
		if err := Default().CheckURL(url); err != nil {
			t.Errorf("%s: %v", url, err)
		}
	}
	if err := Default().CheckAddr(netip.MustParseAddr("10.244.1.7")); !errors.Is(err, ErrDenied) {
		t.Errorf("a pod address dialled for a public name: %v", err)
	}
	ranges := mustNew(t, []string{"0.0.0.0/0", "10.0.0.0/8"})
	if err := ranges.CheckAddr(netip.MustParseAddr("10.96.0.10")); err != nil {
		t.Errorf("a listed private range: %v", err)
	}
	if err := ranges.CheckAddr(netip.MustParseAddr("192.168.1.20")); !errors.Is(err, ErrDenied) {
		t.Errorf("an unlisted private range beside a listed one: %v", err)
	}
	prefix := mustNew(t, []string{"http://mcp.team-a.svc:8080/"})
	if err := prefix.CheckURL("http://mcp.team-a.svc:8080/mcp"); err != nil {
		t.Errorf("a listed cluster name: %v", err)
	}
	if err := prefix.CheckURL("http://redis.team-a.svc:6379/"); !errors.Is(err, ErrDenied) {
		t.Errorf("another cluster name: %v", err)
	}
}

// A pinned client reaches the pinned address whatever the URL's host
// resolves to (here: nothing), sends that host as the Host header, and
// refuses to be pinned where no Pod is: metadata, link-local, unspecified,
// multicast, the API server.
func TestPinnedClientDialsOnlyWhereTheReferenceLeads(t *testing.T) {
	var host atomic.Value
	srv, n := counted(t, func(_ http.ResponseWriter, r *http.Request) { host.Store(r.Host) })
	pod := netip.MustParseAddrPort(strings.TrimPrefix(srv.URL, "http://"))
	p := mustNew(t, nil, "192.0.2.10:6443")
	hc, err := p.PinnedClient("http://docs.team-a.svc.cluster.local:8080/mcp", []netip.AddrPort{pod}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get("http://docs.team-a.svc.cluster.local:8080/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n.Load() != 1 || host.Load() != "docs.team-a.svc.cluster.local:8080" {
		t.Fatalf("requests %d, Host %v; want one request for the Service's name", n.Load(), host.Load())
	}
	// A URL of another host through the same client still reaches only
	// the pinned address: nothing else is dialled.
	other, otherCount := counted(t, nil)
	if resp, err := hc.Get(other.URL); err == nil {
		resp.Body.Close()
	}
	if otherCount.Load() != 0 || n.Load() != 2 {
		t.Fatalf("the other server got %d requests, the pinned one %d; want 0 and 2", otherCount.Load(), n.Load())
	}
	for _, addr := range []string{"169.254.169.254:80", "[fe80::1]:80", "0.0.0.0:80", "224.0.0.1:80", "192.0.2.10:6443", "100.100.100.200:80"} {
		_, err := p.PinnedClient("http://docs.team-a.svc.cluster.local:8080/mcp", []netip.AddrPort{pod, netip.MustParseAddrPort(addr)}, nil)
		if !errors.Is(err, ErrDenied) {
			t.Errorf("pinned to %s: %v; want denied", addr, err)
		}
	}
	if _, err := p.PinnedClient("http://docs.team-a.svc.cluster.local:8080/mcp", nil, nil); !errors.Is(err, ErrDenied) {
		t.Errorf("pinned nowhere: %v; want denied", err)
	}
	if _, err := (*Policy)(nil).PinnedClient("http://docs.team-a.svc.cluster.local:8080/mcp", []netip.AddrPort{pod}, nil); !errors.Is(err, ErrDenied) {
		t.Errorf("a nil policy: %v; want denied", err)
	}
}
