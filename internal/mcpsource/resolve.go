package mcpsource

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube"
	"github.com/toolcatalog/tool-catalog-operator/internal/secrets"
)

// Resolve builds the connection settings of a ToolSource: its URL, its
// headers and bearer token, and its CA, read from the Secrets it names in
// its namespace; a Secret that cannot be used is a
// *secrets.UnusableError.
func Resolve(ctx context.Context, reader kube.Getter, ts *v1alpha1.ToolSource) (Config, error) {
	m := ts.Spec.MCP
	cfg := Config{URL: m.URL, Header: http.Header{}}
	secret := func(sel *v1alpha1.SecretKeySelector, field string) (string, error) {
		v, err := secrets.Value(ctx, reader, ts.Namespace, sel, field)
		return strings.TrimSpace(string(v)), err
	}
	for i, h := range m.Headers {
		v := h.Value
		if h.ValueFrom != nil {
			var err error
			if v, err = secret(h.ValueFrom, fmt.Sprintf("spec.mcp.headers[%d]", i)); err != nil {
				return cfg, err
			}
		}
		cfg.Header.Set(h.Name, v)
	}
	if m.BearerTokenSecretRef != nil {
		token, err := secret(m.BearerTokenSecretRef, "spec.mcp.bearerTokenSecretRef")
		if err != nil {
			return cfg, err
		}
		cfg.Header.Set("Authorization", "Bearer "+token)
	}
	if m.CASecretRef != nil {
		ca, err := secret(m.CASecretRef, "spec.mcp.caSecretRef")
		if err != nil {
			return cfg, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(ca)) {
			return cfg, fmt.Errorf("spec.mcp.caSecretRef: no PEM certificate in Secret %s key %s", m.CASecretRef.Name, m.CASecretRef.Key)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Fingerprint identifies the settings a session is opened with: the URL,
// the pinned addresses, the headers and whether a CA is set.
func (cfg Config) Fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", cfg.URL)
	for _, ap := range cfg.Pinned {
		fmt.Fprintf(h, "%s,", ap)
	}
	fmt.Fprintf(h, "\x00")
	names := make([]string, 0, len(cfg.Header))
	for k := range cfg.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(h, "%s\x00%s\x00", k, strings.Join(cfg.Header[k], "\x00"))
	}
	fmt.Fprintf(h, "%v", cfg.RootCAs != nil)
	return hex.EncodeToString(h.Sum(nil))
}

// Redact returns an error's text without the header values (a token) and
// without the query values of the URL (an api_key=...).
func (cfg Config) Redact(err error) string {
	msg := err.Error()
	if u, perr := url.Parse(cfg.URL); perr == nil {
		for _, vs := range u.Query() {
			for _, v := range vs {
				if v != "" {
					msg = strings.ReplaceAll(msg, v, "[redacted]")
					msg = strings.ReplaceAll(msg, url.QueryEscape(v), "[redacted]")
				}
			}
		}
	}
	for _, vs := range cfg.Header {
		for _, v := range vs {
			if v != "" {
				msg = strings.ReplaceAll(msg, v, "[redacted]")
			}
		}
	}
	return msg
}

// Imports refuses a call of tool name (upstream on the server) with a
// ToolSource's settings unless the source imports that tool now: the name
// is the source's prefix and the upstream name, its selection takes the
// upstream tool, and the source's record (status.imported.tools, which
// only the operator writes) lists it. What Redis says of a tool is not
// trusted for this: the source is. A record from before tool names were
// kept refuses the new tools still waiting for approval, until the
// source's next sync records its names.
func Imports(ts *v1alpha1.ToolSource, name, upstream string) error {
	switch {
	case name != ts.Spec.ToolNamePrefix+upstream:
		return fmt.Errorf("ToolSource %s names its tools %s<tool>, not %s", ts.Name, ts.Spec.ToolNamePrefix, name)
	case !selected(upstream, ts.Spec.Include, ts.Spec.Exclude):
		return fmt.Errorf("ToolSource %s does not import %s (spec.include and spec.exclude)", ts.Name, upstream)
	}
	if rec := ts.Status.Imported; rec != nil && len(rec.Tools) == len(rec.UIDs) {
		if !slices.Contains(rec.Tools, name) {
			return fmt.Errorf("ToolSource %s has not imported %s", ts.Name, name)
		}
		return nil
	}
	for _, c := range ts.Status.PendingChanges {
		if c.Tool == name && c.Change == v1alpha1.ChangeAdded {
			return fmt.Errorf("ToolSource %s holds %s for approval", ts.Name, name)
		}
	}
	return nil
}
