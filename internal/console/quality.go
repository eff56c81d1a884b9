package console

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	key := client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
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
	p, err := drawQuality(qs)
	if err == nil {
		err = writeSVG(w, p, 8*vg.Inch, 3.5*vg.Inch)
	}
	if err != nil {
		http.Error(w, "drawing the chart: "+err.Error(), http.StatusInternalServerError)
	}
}

func drawQuality(qs []contract.Quality) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Self-recall@5 of the retained versions"
	p.X.Label.Text, p.Y.Label.Text = "version", "self-recall@5"
	p.Y.Min, p.Y.Max = 0, 1
	xys := make(plotter.XYs, len(qs))
	for i, q := range qs {
		xys[i] = plotter.XY{X: float64(q.Version), Y: q.SelfRecallAt5}
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, err
	}
	points.Shape = draw.CircleGlyph{}
	points.Radius = vg.Points(3)
	p.Add(line, points, plotter.NewGrid())
	// Versions are whole numbers: pad the axis by half a version, and
	// tick whole versions only.
	p.X.Min, p.X.Max = float64(qs[0].Version)-0.5, float64(qs[len(qs)-1].Version)+0.5
	p.X.Tick.Marker = versionTicks{}
	return p, nil
}

// versionTicks marks whole versions, at most about ten of them.
type versionTicks struct{}

func (versionTicks) Ticks(lo, hi float64) []plot.Tick {
	first, last := math.Ceil(lo), math.Floor(hi)
	step := math.Max(1, math.Ceil((last-first+1)/10))
	var out []plot.Tick
	for v := first; v <= last; v += step {
		out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
	}
	return out
}

// writeSVG writes p as an SVG image of the given size.
func writeSVG(w http.ResponseWriter, p *plot.Plot, width, height vg.Length) error {
	return writeCanvas(w, width, height, p.Draw)
}

// writeCanvas writes what paint draws as an SVG image of the given size.
func writeCanvas(w http.ResponseWriter, width, height vg.Length, paint func(draw.Canvas)) error {
	c := vgsvg.New(width, height)
	paint(draw.New(c))
	w.Header().Set("Content-Type", "image/svg+xml")
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("writing the image: %w", err)
	}
	return nil
}
