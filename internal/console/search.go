package console

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// searchPage is the playground's request and what it found.
type searchPage struct {
	Namespace, Name, Query, Method, Error string
	Methods                               []toolcatalog.Method
	TopK                                  int
	Resp                                  *toolcatalog.Response
	Hits                                  []hit
	Version                               int64
}

type (
	intent    = toolcatalog.Intent
	blendInfo = toolcatalog.Blend
)

// hit is one result of the search playground, with each arm's bar.
type hit struct {
	Rank                   int
	Name, Description, Why string
	Intent                 int // 1-based, 0 when the whole request placed it
	Score                  float64
	Semantic, BM25         *bar
}

// bar is an arm's score and rank, with its share of the arm's best for
// the meter.
type bar struct {
	Score, Share float64
	Rank         int
}

// search is the playground: a request in, the ranked tools out with each
// arm's score and rank, the blend or rule used and the intents, as
// kubectl toolcatalog search --explain prints them.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	q := r.URL.Query()
	data := searchPage{Namespace: key.Namespace, Name: key.Name, Query: q.Get("q"), Method: q.Get("method"), Methods: toolcatalog.Methods}
	data.TopK, _ = strconv.Atoi(q.Get("k"))
	_, pub, perr := s.open(ctx, key)
	switch {
	case perr != nil:
		w.WriteHeader(perr.status)
		data.Error = perr.msg
	case data.Query != "":
		data.Version = pub.Catalog.Version()
		opts := toolcatalog.Options{Method: toolcatalog.Method(data.Method), TopK: min(max(data.TopK, 0), 50), MostUsed: pub.MostUsed}
		if pub.Embedder != nil {
			opts.Embedder = pub.Embedder
		}
		resp, err := pub.Catalog.Search(ctx, data.Query, opts)
		if err != nil {
			data.Error = err.Error()
			break
		}
		data.Resp, data.Hits = resp, hitsOf(resp)
	default:
		data.Version = pub.Catalog.Version()
	}
	render(w, data.node())
}

func hitsOf(resp *toolcatalog.Response) []hit {
	var bestSem, bestLex float64
	for _, r := range resp.Results {
		if r.Semantic != nil {
			bestSem = max(bestSem, r.Semantic.Score)
		}
		if r.BM25 != nil {
			bestLex = max(bestLex, r.BM25.Score)
		}
	}
	arm := func(a *toolcatalog.Arm, best float64) *bar {
		if a == nil {
			return nil
		}
		b := &bar{Score: a.Score, Rank: a.Rank}
		if best > 0 {
			b.Share = max(a.Score, 0) / best
		}
		return b
	}
	out := make([]hit, len(resp.Results))
	for i, r := range resp.Results {
		h := hit{Rank: i + 1, Name: r.Tool.Name, Description: r.Tool.Description, Why: r.Why, Score: r.Score,
			Semantic: arm(r.Semantic, bestSem), BM25: arm(r.BM25, bestLex)}
		for j, in := range resp.Intents {
			if r.Why == toolcatalog.WhyIntent && in.Text == r.Intent {
				h.Intent = j + 1
			}
		}
		out[i] = h
	}
	return out
}
