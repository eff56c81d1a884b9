package console

import (
	"context"
	"image/color"
	"maps"
	"math"
	"net/http"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// maxMapTools bounds the tools a map projects, in name order: the map of a
// larger catalog shows its first ones and says so.
const maxMapTools = 2000

// maxMapLabels is the most tools a map names.
const maxMapLabels = 60

// toolMap draws the catalog's tools on the plane of their vectors' two
// principal components, a colour per toolset, confusable pairs joined by a
// line, as an SVG image.
func (s *Server) toolMap(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	key := client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	tc, pub, perr := s.open(ctx, key)
	if perr != nil {
		status := perr.status
		if status == http.StatusOK {
			status = http.StatusNotFound // nothing to draw yet
		}
		http.Error(w, perr.msg, status)
		return
	}
	var pairs [][2]string
	if q := tc.Status.Quality; q != nil {
		for _, p := range q.ConfusablePairs {
			if len(p.Tools) == 2 {
				pairs = append(pairs, [2]string{p.Tools[0], p.Tools[1]})
			}
		}
	}
	p, legend, err := drawMap(pub.Catalog, pairs)
	if err == nil {
		// The legend beside the plot, where it hides no tool.
		width, legendWidth := 9*vg.Inch, 1.75*vg.Inch
		err = writeCanvas(w, width, 6*vg.Inch, func(dc draw.Canvas) {
			p.Draw(draw.Crop(dc, 0, -legendWidth, 0, 0))
			legend.Draw(draw.Crop(dc, width-legendWidth, 0, 0, 0))
		})
	}
	if err != nil {
		http.Error(w, "drawing the map: "+err.Error(), http.StatusInternalServerError)
	}
}

// project returns the tools with vectors (at most maxMapTools, in name
// order) and their coordinates on the first two principal components.
func project(cat *toolcatalog.Catalog) ([]string, [][2]float64) {
	var names []string
	for _, t := range cat.Tools() {
		if v := cat.Vectors[t.Name]; len(v) > 0 && len(names) < maxMapTools {
			names = append(names, t.Name)
		}
	}
	if len(names) < 2 {
		return names, make([][2]float64, len(names))
	}
	dims := len(cat.Vectors[names[0]])
	x := mat.NewDense(len(names), dims, nil)
	for i, n := range names {
		for j, f := range cat.Vectors[n] {
			x.Set(i, j, float64(f))
		}
	}
	// Centre the rows, then take the top two right singular vectors.
	for j := range dims {
		var mean float64
		for i := range names {
			mean += x.At(i, j)
		}
		mean /= float64(len(names))
		for i := range names {
			x.Set(i, j, x.At(i, j)-mean)
		}
	}
	var svd mat.SVD
	out := make([][2]float64, len(names))
	if !svd.Factorize(x, mat.SVDThin) {
		return names, out
	}
	var v mat.Dense
	svd.VTo(&v)
	for i := range names {
		row := x.RawRowView(i)
		for k := 0; k < 2 && k < v.RawMatrix().Cols; k++ {
			out[i][k] = mat.Dot(mat.NewVecDense(dims, row), v.ColView(k))
		}
	}
	// A component the tools do not spread along (two tools have one)
	// is rounding noise: draw it flat.
	for k := range 2 {
		var spread float64
		for i := range out {
			spread = max(spread, math.Abs(out[i][k]))
		}
		if spread < 1e-9 {
			for i := range out {
				out[i][k] = 0
			}
		}
	}
	return names, out
}

// drawMap returns the map and its legend, drawn apart.
func drawMap(cat *toolcatalog.Catalog, pairs [][2]string) (*plot.Plot, plot.Legend, error) {
	names, at := project(cat)
	index := map[string]int{}
	for i, n := range names {
		index[n] = i
	}
	p := plot.New()
	p.Title.Text = "Tools by their vectors' two principal components"
	p.X.Label.Text, p.Y.Label.Text = "component 1", "component 2"
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	toolsets := map[string]plotter.XYs{}
	for i, n := range names {
		t, _ := cat.Tool(n)
		toolsets[t.Toolset] = append(toolsets[t.Toolset], plotter.XY{X: at[i][0], Y: at[i][1]})
	}
	for i, set := range slices.Sorted(maps.Keys(toolsets)) {
		sc, err := plotter.NewScatter(toolsets[set])
		if err != nil {
			return nil, legend, err
		}
		sc.GlyphStyle.Color = plotutil.Color(i)
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		sc.GlyphStyle.Radius = vg.Points(3)
		p.Add(sc)
		if set == "" {
			set = "no toolset"
		}
		legend.Add(set, sc)
	}
	for _, pr := range pairs {
		a, okA := index[pr[0]]
		b, okB := index[pr[1]]
		if !okA || !okB {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: at[a][0], Y: at[a][1]}, {X: at[b][0], Y: at[b][1]}})
		if err != nil {
			return nil, legend, err
		}
		l.Color = color.RGBA{R: 207, G: 34, B: 46, A: 255}
		l.Width = vg.Points(1.5)
		p.Add(l)
	}
	if len(pairs) > 0 {
		legend.Add("confusable pair")
	}
	// Names, while they can be read.
	if len(names) <= maxMapLabels {
		xyl := plotter.XYLabels{Labels: names}
		for i := range names {
			xyl.XYs = append(xyl.XYs, plotter.XY{X: at[i][0], Y: at[i][1]})
		}
		labels, err := plotter.NewLabels(xyl)
		if err != nil {
			return nil, legend, err
		}
		labels.Offset = vg.Point{X: vg.Points(5), Y: vg.Points(-3)}
		p.Add(labels)
	}
	return p, legend, nil
}
