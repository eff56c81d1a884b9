// Package egress decides which network destinations the operator and the
// gateway may reach on behalf of the objects namespace users write: the
// MCP servers of ToolSources and of hand-written ToolDefinitions, and the
// embedding and chat providers of ToolCatalogs. Every
// such URL is user input, so a connection is checked twice: the URL
// against the policy before anything is sent, and the address actually
// dialled (after DNS) when the connection is made, so a name that resolves
// to a forbidden address is refused as well. Redirects are never followed.
//
// A policy is a list of allowed URL prefixes and address ranges. Some
// ranges are denied unless a listed range lies inside them: loopback,
// link-local (which holds the cloud metadata address 169.254.169.254),
// private networks (RFC 1918, IPv6 unique local, carrier-grade NAT), where
// a cluster's pods, Services and nodes are, unspecified, multicast, other
// clouds' metadata addresses and the Kubernetes API server. Listing
// 0.0.0.0/0 does not open them; listing 10.0.0.0/8 or 127.0.0.1/32 opens
// that range. A policy of no entries also refuses cluster names
// (NAME.NAMESPACE.svc, *.cluster.local, names of one label) by name.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ErrDenied is wrapped by every refusal of the policy.
var ErrDenied = errors.New("denied by the egress policy")

// Everywhere is what a policy allows when nothing is listed: every
// address outside the denied ranges.
var Everywhere = []string{"0.0.0.0/0", "::/0"}

// deniedRanges are refused unless a listed range lies inside them.
var deniedRanges = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),        // loopback
	netip.MustParsePrefix("::1/128"),            // loopback
	netip.MustParsePrefix("169.254.0.0/16"),     // link-local; 169.254.169.254 is the metadata service of most clouds
	netip.MustParsePrefix("fe80::/10"),          // link-local
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network"; 0.0.0.0 reaches the local host
	netip.MustParsePrefix("::/128"),             // unspecified
	netip.MustParsePrefix("224.0.0.0/4"),        // multicast
	netip.MustParsePrefix("ff00::/8"),           // multicast
	netip.MustParsePrefix("255.255.255.255/32"), // broadcast
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS metadata over IPv6
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
	netip.MustParsePrefix("10.0.0.0/8"),         // private (RFC 1918): pods, Services, nodes
	netip.MustParsePrefix("172.16.0.0/12"),      // private (RFC 1918)
	netip.MustParsePrefix("192.168.0.0/16"),     // private (RFC 1918)
	netip.MustParsePrefix("100.64.0.0/10"),      // carrier-grade NAT (RFC 6598), used for pods by some clusters
	netip.MustParsePrefix("fc00::/7"),           // IPv6 unique local (RFC 4193)
}

// Policy says which destinations may be reached. The zero value and a
// nil *Policy deny everything.
type Policy struct {
	prefixes []*url.URL
	ranges   []netip.Prefix
	denied   []netip.Prefix
	open     bool
	// everywhere is a policy of no entries, which refuses cluster names
	// by name too.
	everywhere bool
}

// New builds a policy from allow entries, each a URL prefix
// (https://mcp.example.com/, http://10.0.0.7:8080/mcp) or an address range
// (10.0.0.0/8, 192.0.2.7). With no entries, Everywhere is allowed. deny
// adds addresses or host:port values (the API server's) to the denied
// ranges; a name is resolved once, now.
func New(allow []string, deny ...string) (*Policy, error) {
	p := &Policy{denied: append([]netip.Prefix(nil), deniedRanges...)}
	if len(allow) == 0 {
		allow, p.everywhere = Everywhere, true
	}
	for _, raw := range allow {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		if strings.Contains(raw, "://") {
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("egress entry %q: a URL prefix must be an http or https URL with a host", raw)
			}
			p.prefixes = append(p.prefixes, u)
			continue
		}
		r, err := parseRange(raw)
		if err != nil {
			return nil, fmt.Errorf("egress entry %q: neither a URL prefix nor an address range", raw)
		}
		p.ranges = append(p.ranges, r)
	}
	for _, d := range deny {
		addrs, err := addressesOf(d)
		if err != nil {
			return nil, fmt.Errorf("denying %q: %w", d, err)
		}
		for _, a := range addrs {
			p.denied = append(p.denied, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return p, nil
}

// FlagHelp describes the --egress-allow flag of the binaries.
const FlagHelp = "Comma-separated URL prefixes (http://mcp.team-a.svc:8080/) and address ranges (10.0.0.0/8) that MCP servers and the catalogs' embedding and chat providers may be at (env EGRESS_ALLOW). Default: every public address; private networks (RFC 1918, ULA, CGNAT), cluster names, loopback, link-local, cloud metadata, multicast and the API server are reached only when listed."

// Unrestricted allows every destination: for a person's own command line,
// never for what serves other users.
func Unrestricted() *Policy { return &Policy{open: true} }

// Default is New with no entries and no API server: every address outside
// the denied ranges.
func Default() *Policy {
	p, _ := New(nil)
	return p
}

func parseRange(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		r, err := netip.ParsePrefix(s)
		return r.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

// addressesOf returns the addresses of a host, host:port or URL.
func addressesOf(s string) ([]netip.Addr, error) {
	host := s
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		host = u.Host
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(ips))
	for _, a := range ips {
		out = append(out, a.Unmap())
	}
	return out, nil
}

// listed reports whether target is under one of the listed URL prefixes:
// the same scheme and host (port included), and a path below the
// prefix's path at a segment boundary.
func (p *Policy) listed(target *url.URL) bool {
	for _, pre := range p.prefixes {
		if !strings.EqualFold(pre.Scheme, target.Scheme) || !strings.EqualFold(pre.Host, target.Host) {
			continue
		}
		path := strings.TrimSuffix(pre.Path, "/")
		if slices.Contains(strings.Split(target.Path, "/"), "..") || slices.Contains(strings.Split(target.Path, "/"), ".") {
			continue // dot segments could climb out of the prefix
		}
		if path == "" || target.Path == path || strings.HasPrefix(target.Path, path+"/") {
			return true
		}
	}
	return false
}

// CheckURL refuses a URL the policy cannot allow: not http or https,
// carrying credentials, or a literal address it denies. A URL with a
// host name is checked again when its address is dialled.
func (p *Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %q is not a URL", ErrDenied, raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: only http and https URLs may be reached", ErrDenied)
	}
	if u.User != nil {
		return fmt.Errorf("%w: URLs with user information are refused (put credentials in a Secret)", ErrDenied)
	}
	if p == nil {
		return fmt.Errorf("%w: no destination is allowed", ErrDenied)
	}
	if p.open || p.listed(u) {
		return nil
	}
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		return p.CheckAddr(a)
	}
	if p.everywhere && clusterName(u.Hostname()) {
		return fmt.Errorf("%w: %s is a cluster name, reached only when listed (--egress-allow %s://%s/)", ErrDenied, u.Hostname(), u.Scheme, u.Host)
	}
	if len(p.ranges) == 0 {
		return fmt.Errorf("%w: %s is not under an allowed URL prefix", ErrDenied, u.Host)
	}
	return nil
}

// clusterName reports whether host names something inside a cluster: a
// Service (NAME.NAMESPACE.svc, …svc.cluster.local), anything under
// cluster.local, or a name of one label, which the resolver completes
// with the pod's search domains.
func clusterName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return !strings.Contains(host, ".") || strings.HasSuffix(host, ".svc") || strings.HasSuffix(host, ".cluster.local")
}

// CheckAddr refuses an address outside the allowed ranges, or inside a
// denied range that no listed range opens.
func (p *Policy) CheckAddr(a netip.Addr) error {
	if p == nil {
		return fmt.Errorf("%w: no destination is allowed", ErrDenied)
	}
	if p.open {
		return nil
	}
	a = a.Unmap()
	allowed := false
	for _, r := range p.ranges {
		if r.Contains(a) {
			allowed = true
			break
		}
	}
	if !allowed {
		return fmt.Errorf("%w: address %s is in no allowed range", ErrDenied, a)
	}
	for _, d := range p.denied {
		if !d.Contains(a) {
			continue
		}
		opened := false
		for _, r := range p.ranges {
			if r.Bits() >= d.Bits() && d.Contains(r.Addr()) && r.Contains(a) {
				opened = true
				break
			}
		}
		if !opened {
			return fmt.Errorf("%w: address %s is in %s, which is reached only when listed", ErrDenied, a, d)
		}
	}
	return nil
}

// ErrRedirect is returned instead of following a redirect.
var ErrRedirect = errors.New("the server answered with a redirect, which is not followed: set the URL to the final endpoint")

// Client returns an HTTP client for target that dials only addresses the
// policy allows (all of them when target is under a listed URL prefix),
// never follows redirects and uses no proxy from the environment, so the
// address it checks is the one it reaches. transport (cloned, for its TLS
// settings) may be nil.
func (p *Policy) Client(target string, transport *http.Transport) (*http.Client, error) {
	if err := p.CheckURL(target); err != nil {
		return nil, err
	}
	u, _ := url.Parse(target)
	listed := p.open || p.listed(u)
	dialer := newDialer()
	if !listed {
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot tell the address of %q", ErrDenied, address)
			}
			return p.CheckAddr(ap.Addr())
		}
	}
	return clientDialling(transport, dialer.DialContext), nil
}

// newDialer is the dialer of every client the policy makes.
func newDialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
}

// clientDialling is an HTTP client over a clone of transport (Go's
// default when nil) that dials with dial, uses no proxy from the
// environment and follows no redirect.
func clientDialling(transport *http.Transport, dial func(ctx context.Context, network, address string) (net.Conn, error)) *http.Client {
	if transport == nil {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	} else {
		transport = transport.Clone()
	}
	transport.Proxy = nil
	transport.DialContext = dial
	return &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return ErrRedirect },
	}
}

// neverPinned are the denied ranges no reference opens: a reference leads
// to a Pod's address, never to these.
var neverPinned = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("255.255.255.255/32"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
}

// PinnedClient returns an HTTP client for target that connects only to
// the addresses to, whatever target's host resolves to: the addresses of
// the Pods a reference was followed to and checked. The URL's host is
// still the one the server sees (Host header, TLS server name). Link-local
// (metadata), unspecified, multicast and the API server's addresses are
// refused even here; the other denied ranges are where Pods live. Like
// Client, it never follows redirects and uses no proxy.
func (p *Policy) PinnedClient(target string, to []netip.AddrPort, transport *http.Transport) (*http.Client, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: no destination is allowed", ErrDenied)
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
		return nil, fmt.Errorf("%w: %q is not an http or https URL without user information", ErrDenied, target)
	}
	if len(to) == 0 {
		return nil, fmt.Errorf("%w: no address to reach %s at", ErrDenied, u.Host)
	}
	never := append(slices.Clip(neverPinned), p.denied[len(deniedRanges):]...)
	pinned := make([]netip.AddrPort, 0, len(to))
	for _, ap := range to {
		a := ap.Addr().Unmap()
		for _, d := range never {
			if d.Contains(a) {
				return nil, fmt.Errorf("%w: address %s is in %s, which no reference leads to", ErrDenied, a, d)
			}
		}
		pinned = append(pinned, netip.AddrPortFrom(a, ap.Port()))
	}
	dialer := newDialer()
	dialer.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !slices.Contains(pinned, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())) {
			return fmt.Errorf("%w: %s is not an address the reference leads to", ErrDenied, address)
		}
		return nil
	}
	return clientDialling(transport, func(ctx context.Context, network, _ string) (net.Conn, error) {
		var errs []error
		for _, ap := range pinned {
			c, err := dialer.DialContext(ctx, network, ap.String())
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}), nil
}
