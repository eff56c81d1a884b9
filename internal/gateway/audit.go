package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/pkg/clip"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// audit writes one line for a tool call: who called which tool of which
// catalog, where the call went, a hash of its arguments (never the
// arguments: they may hold personal data), its outcome and how long it
// took; the time is the line's. The upstream is named by its ToolSource
// or its host, without path or query, which may carry credentials.
func (g *Gateway) audit(p Principal, catalog, tool string, src *contract.Source, args json.RawMessage, outcome string, start time.Time) {
	if g.opts.Audit.GetSink() == nil {
		return
	}
	upstream := ""
	switch {
	case src == nil:
	case src.ToolSource != "":
		upstream = "toolsource/" + src.ToolSource
	case src.MCPURL != "":
		if u, err := url.Parse(src.MCPURL); err == nil {
			upstream = u.Host
		}
	}
	sum := sha256.Sum256(args)
	g.opts.Audit.Info("Tool call", "principal", p.User, "groups", p.Groups, "catalog", catalog, "tool", clip.Cut(tool, 128),
		"upstream", upstream, "argumentsSHA256", hex.EncodeToString(sum[:]), "outcome", outcome, "latencyMs", time.Since(start).Milliseconds())
}
