package gateway

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Protected resource metadata (RFC 9728), which MCP clients read to find
// the authorization servers whose tokens a catalog accepts: the document
// of the resource https://gateway/mcp/NS/CATALOG is served at
// https://gateway/.well-known/oauth-protected-resource/mcp/NS/CATALOG, and
// a 401 names it in WWW-Authenticate. Served only when OpenID Connect
// issuers are configured, and named from the configured public URL only
// (Run requires it with issuers): without issuers a client has nowhere to
// get a token from.

const resourceMetadataPrefix = "/.well-known/oauth-protected-resource"

// baseURL is the scheme and host clients reach the gateway at: the
// configured public URL, never the request's Host header (a client, or a
// cache between it and others, would be pointed wherever that said); ""
// when none is configured.
func (g *Gateway) baseURL() string {
	return strings.TrimSuffix(g.opts.PublicURL, "/")
}

// catalogPath is the request's /mcp/NS/CATALOG, "" when the names cannot
// be a namespace and a catalog (they are quoted into a header).
func catalogPath(r *http.Request) string {
	ns, name := r.PathValue("namespace"), r.PathValue("catalog")
	if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return ""
	}
	return "/mcp/" + ns + "/" + name
}

// resourceMetadataURL is where the metadata of the request's catalog is,
// "" when the path names no catalog.
func (g *Gateway) resourceMetadataURL(r *http.Request) string {
	path := catalogPath(r)
	if path == "" || g.baseURL() == "" {
		return ""
	}
	return g.baseURL() + resourceMetadataPrefix + path
}

func (g *Gateway) issuersConfigured() bool {
	return g.opts.Auth != nil && len(g.opts.Auth.issuers()) > 0
}

// serveResourceMetadata answers GET .../oauth-protected-resource/mcp/NS/CATALOG.
// It says the same for every catalog path, existing or not, so it tells
// nothing about which catalogs exist.
func (g *Gateway) serveResourceMetadata(w http.ResponseWriter, r *http.Request) {
	path := catalogPath(r)
	if !g.issuersConfigured() || path == "" || g.baseURL() == "" {
		http.NotFound(w, r)
		return
	}
	doc := &oauthex.ProtectedResourceMetadata{
		Resource:               g.baseURL() + path,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Tool catalog " + r.PathValue("namespace") + "/" + r.PathValue("catalog"),
	}
	for _, i := range g.opts.Auth.issuers() {
		doc.AuthorizationServers = append(doc.AuthorizationServers, i.URL)
	}
	w.Header().Set("Cache-Control", "max-age=300")
	auth.ProtectedResourceMetadataHandler(doc).ServeHTTP(w, r)
}
