package console

import (
	"context"
	"maps"
	"math"
	"net/http"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"
	"k8s.io/apimachinery/pkg/types"
	g "maragu.dev/gomponents"

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
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
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
	if err := writeChart(w, 864, 576, drawMap(pub.Catalog, pairs)); err != nil {
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

// drawMap draws the tools at their coordinates, a colour per toolset,
// confusable pairs joined by a red line, names while they can be read,
// and the legend beside the plot, where it hides no tool.
func drawMap(cat *toolcatalog.Catalog, pairs [][2]string) g.Node {
	names, at := project(cat)
	index := map[string]int{}
	p := plane{left: 60, top: 36, width: 864 - 60 - 190, height: 576 - 36 - 56, xmin: -1, xmax: 1, ymin: -1, ymax: 1}
	for i, n := range names {
		index[n] = i
		if i == 0 {
			p.xmin, p.xmax, p.ymin, p.ymax = at[i][0], at[i][0], at[i][1], at[i][1]
		}
		p.xmin, p.xmax = min(p.xmin, at[i][0]), max(p.xmax, at[i][0])
		p.ymin, p.ymax = min(p.ymin, at[i][1]), max(p.ymax, at[i][1])
	}
	// A margin of a tenth, so no tool sits on the frame.
	padX, padY := max((p.xmax-p.xmin)/10, 1e-3), max((p.ymax-p.ymin)/10, 1e-3)
	p.xmin, p.xmax, p.ymin, p.ymax = p.xmin-padX, p.xmax+padX, p.ymin-padY, p.ymax+padY
	nodes := g.Group{frame(p, "Tools by their vectors' two principal components", "component 1", "component 2", niceTicks(p.xmin, p.xmax), niceTicks(p.ymin, p.ymax))}
	const red = "#cf222e"
	for _, pr := range pairs {
		a, okA := index[pr[0]]
		b, okB := index[pr[1]]
		if okA && okB {
			nodes = append(nodes, line(p.x(at[a][0]), p.y(at[a][1]), p.x(at[b][0]), p.y(at[b][1]), red, 2))
		}
	}
	// A colour per toolset, in the toolsets' order.
	colour := map[string]string{}
	for _, n := range names {
		t, _ := cat.Tool(n)
		colour[t.Toolset] = ""
	}
	for i, set := range slices.Sorted(maps.Keys(colour)) {
		colour[set] = palette[i%len(palette)]
	}
	for i, n := range names {
		t, _ := cat.Tool(n)
		nodes = append(nodes, circle(p.x(at[i][0]), p.y(at[i][1]), 4, colour[t.Toolset]))
		if len(names) <= maxMapLabels {
			nodes = append(nodes, label(p.x(at[i][0])+7, p.y(at[i][1])+4, "start", "11", n))
		}
	}
	legendX, legendY := p.left+p.width+24, p.top+8.0
	for _, set := range slices.Sorted(maps.Keys(colour)) {
		name := set
		if name == "" {
			name = "no toolset"
		}
		nodes = append(nodes, circle(legendX, legendY, 4, colour[set]), label(legendX+10, legendY+4, "start", "12", name))
		legendY += 20
	}
	if len(pairs) > 0 {
		nodes = append(nodes, line(legendX-6, legendY, legendX+6, legendY, red, 2), label(legendX+10, legendY+4, "start", "12", "confusable pair"))
	}
	return nodes
}
