package catalog

import (
	"hash/fnv"
	"sort"
	"strings"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// LearnOptions bound what a catalog learns from recorded requests.
type LearnOptions struct {
	// PerTool is the most requests folded into one tool's query set.
	PerTool int
	// MinCount is how often a request must have led to the tool.
	MinCount int64
	// MinPrincipals is how many distinct principals must have made it;
	// no bound when 0.
	MinPrincipals int
}

// Learn picks, per tool, the requests to fold into its query set: the
// most recorded distinct requests that led to it at least MinCount times,
// made by at least MinPrincipals principals, and never more often to another tool, at most PerTool, leaving out its
// curated example queries and requests that differ only in case and
// spacing. Requests recorded equally often are taken in the order of
// draw. examples maps a tool to its example queries. A tool without
// such requests is absent.
func Learn(recorded []contract.Recorded, examples map[string][]string, o LearnOptions) map[string][]string {
	// best[request] is the highest count any tool got for the request.
	type key struct{ tool, request string }
	counts := map[key]int64{}
	// principals takes the largest of the spellings merged: summing would
	// count one principal who varies the case several times.
	principals := map[key]int{}
	best := map[string]int64{}
	for _, r := range recorded {
		req := normalizeLearned(r.Request)
		k := key{r.Tool, req}
		counts[k] += r.Count
		principals[k] = max(principals[k], r.Principals)
		best[req] = max(best[req], counts[k])
	}
	type candidate struct {
		request string
		count   int64
		draw    uint64
	}
	byTool := map[string][]candidate{}
	for k, n := range counts {
		if n < o.MinCount || n < best[k.request] || principals[k] < o.MinPrincipals {
			continue
		}
		byTool[k.tool] = append(byTool[k.tool], candidate{k.request, n, draw(k.request)})
	}
	out := map[string][]string{}
	for tool, cs := range byTool {
		sort.Slice(cs, func(i, j int) bool {
			if cs[i].count != cs[j].count {
				return cs[i].count > cs[j].count
			}
			if cs[i].draw != cs[j].draw {
				return cs[i].draw < cs[j].draw
			}
			return cs[i].request < cs[j].request
		})
		skip := map[string]bool{}
		for _, e := range examples[tool] {
			skip[strings.ToLower(normalizeLearned(e))] = true
		}
		var picked []string
		for _, c := range cs {
			if len(picked) == o.PerTool {
				break
			}
			if k := strings.ToLower(c.request); !skip[k] {
				skip[k] = true
				picked = append(picked, c.request)
			}
		}
		if len(picked) > 0 {
			out[tool] = picked
		}
	}
	return out
}

func normalizeLearned(s string) string { return contract.NormalizeRequest(s) }

// draw orders requests recorded equally often: a hash of the text (FNV-1a,
// the same in every process, so a pass picks what the last one did). The
// requests picked from a tie are then a sample of them; alphabetical
// order picked by how a request opens (punctuation first, then "A...").
func draw(request string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(request))
	return h.Sum64()
}
