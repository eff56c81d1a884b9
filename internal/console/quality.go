package console

import (
	"context"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"
	g "maragu.dev/gomponents"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// gradings reads the self-gradings the operator kept with the catalog's
// retained versions, oldest first.
func (s *Server) gradings(ctx context.Context, tc *v1alpha1.ToolCatalog) ([]contract.Quality, error) {
	var qs []contract.Quality
	err := s.Redis(ctx, tc, func(c redis.UniversalClient, k contract.Keys) (err error) {
		qs, err = contract.ReadQuality(ctx, c, k)
		return err
	})
	return qs, err
}

// qualityChart draws self-recall@5 across the catalog's retained versions
// as an SVG image.
func (s *Server) qualityChart(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	tc := &v1alpha1.ToolCatalog{}
	if err := s.Kube.Get(ctx, key, tc); err != nil {
		http.Error(w, apiMessage(err), statusOf(err))
		return
	}
	qs, err := s.gradings(ctx, tc)
	switch {
	case err != nil:
		http.Error(w, "reading the gradings: "+err.Error(), http.StatusBadGateway)
		return
	case len(qs) == 0:
		http.Error(w, "no retained version has been graded", http.StatusNotFound)
		return
	}
	if err := writeChart(w, 768, 336, drawQuality(qs)); err != nil {
		http.Error(w, "drawing the chart: "+err.Error(), http.StatusInternalServerError)
	}
}

// drawQuality draws self-recall@5 (0 to 1) by version, oldest first.
func drawQuality(qs []contract.Quality) g.Node {
	// Versions are whole numbers: pad the axis by half a version, and
	// tick whole versions only.
	p := plane{left: 60, top: 36, width: 768 - 80, height: 336 - 36 - 56,
		xmin: float64(qs[0].Version) - 0.5, xmax: float64(qs[len(qs)-1].Version) + 0.5, ymin: 0, ymax: 1}
	nodes := g.Group{frame(p, "Self-recall@5 of the retained versions", "version", "self-recall@5", wholeTicks(p.xmin, p.xmax), niceTicks(0, 1))}
	for i, q := range qs {
		x, y := p.x(float64(q.Version)), p.y(q.SelfRecallAt5)
		if i > 0 {
			nodes = append(nodes, line(p.x(float64(qs[i-1].Version)), p.y(qs[i-1].SelfRecallAt5), x, y, "#1b1f24", 1))
		}
		nodes = append(nodes, circle(x, y, 4, "#1b1f24"))
	}
	return nodes
}
