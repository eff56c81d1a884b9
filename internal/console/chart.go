package console

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"

	g "maragu.dev/gomponents"
)

// The console's two charts are drawn here as SVG, a few dozen elements
// each: a plotting library with its fonts and PDF and raster back ends
// would be most of the plugin's size for them. Text is escaped as on the
// pages.

// plane maps data coordinates onto a rectangle of the image, y upwards.
type plane struct {
	left, top, width, height float64
	xmin, xmax, ymin, ymax   float64
}

func (p plane) x(v float64) float64 {
	if p.xmax == p.xmin {
		return p.left + p.width/2
	}
	return p.left + (v-p.xmin)/(p.xmax-p.xmin)*p.width
}

func (p plane) y(v float64) float64 {
	if p.ymax == p.ymin {
		return p.top + p.height/2
	}
	return p.top + p.height - (v-p.ymin)/(p.ymax-p.ymin)*p.height
}

// tick is a marked value on an axis.
type tick struct {
	value float64
	label string
}

// niceTicks marks about five round values (1, 2 or 5 times a power of
// ten apart) between lo and hi.
func niceTicks(lo, hi float64) []tick {
	if hi <= lo {
		return []tick{{lo, num(lo)}}
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw*0.75 {
			step = m * mag
			break
		}
	}
	var out []tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, tick{v, num(v)})
	}
	return out
}

// wholeTicks marks whole numbers between lo and hi, at most about ten.
func wholeTicks(lo, hi float64) []tick {
	first, last := math.Ceil(lo), math.Floor(hi)
	step := math.Max(1, math.Ceil((last-first+1)/10))
	var out []tick
	for v := first; v <= last; v += step {
		out = append(out, tick{v, strconv.FormatFloat(v, 'f', 0, 64)})
	}
	return out
}

func num(v float64) string {
	if math.Abs(v) < 1e-12 {
		v = 0
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func f(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func svgEl(name string, attrs map[string]string, children ...g.Node) g.Node {
	nodes := make([]g.Node, 0, len(attrs)+len(children))
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		nodes = append(nodes, g.Attr(k, attrs[k]))
	}
	return g.El(name, append(nodes, children...)...)
}

func line(x1, y1, x2, y2 float64, stroke string, width float64) g.Node {
	return svgEl("line", map[string]string{"x1": f(x1), "y1": f(y1), "x2": f(x2), "y2": f(y2), "stroke": stroke, "stroke-width": f(width)})
}

func circle(x, y, r float64, fill string) g.Node {
	return svgEl("circle", map[string]string{"cx": f(x), "cy": f(y), "r": f(r), "fill": fill})
}

func label(x, y float64, anchor, size, s string, extra ...string) g.Node {
	attrs := map[string]string{"x": f(x), "y": f(y), "text-anchor": anchor, "font-size": size}
	for i := 0; i+1 < len(extra); i += 2 {
		attrs[extra[i]] = extra[i+1]
	}
	return svgEl("text", attrs, g.Text(s))
}

// frame draws a chart's title, axes, grid and tick labels around p.
func frame(p plane, title, xLabel, yLabel string, xTicks, yTicks []tick) g.Node {
	nodes := g.Group{
		label(p.left+p.width/2, p.top-12, "middle", "15", title),
		label(p.left+p.width/2, p.top+p.height+40, "middle", "13", xLabel),
		label(18, p.top+p.height/2, "middle", "13", yLabel, "transform", fmt.Sprintf("rotate(-90 18 %s)", f(p.top+p.height/2))),
		svgEl("rect", map[string]string{"x": f(p.left), "y": f(p.top), "width": f(p.width), "height": f(p.height), "fill": "none", "stroke": "#57606a"}),
	}
	for _, t := range xTicks {
		x := p.x(t.value)
		nodes = append(nodes, line(x, p.top, x, p.top+p.height, "#d0d7de", 0.5), label(x, p.top+p.height+16, "middle", "11", t.label))
	}
	for _, t := range yTicks {
		y := p.y(t.value)
		nodes = append(nodes, line(p.left, y, p.left+p.width, y, "#d0d7de", 0.5), label(p.left-6, y+4, "end", "11", t.label))
	}
	return nodes
}

// writeChart writes an SVG image of the given size holding body.
func writeChart(w http.ResponseWriter, width, height float64, body ...g.Node) error {
	w.Header().Set("Content-Type", "image/svg+xml")
	img := svgEl("svg", map[string]string{"xmlns": "http://www.w3.org/2000/svg", "width": f(width), "height": f(height),
		"viewBox": "0 0 " + f(width) + " " + f(height), "font-family": "sans-serif", "fill": "#1b1f24"},
		svgEl("rect", map[string]string{"width": "100%", "height": "100%", "fill": "#ffffff"}), g.Group(body))
	if err := img.Render(w); err != nil {
		return fmt.Errorf("writing the image: %w", err)
	}
	return nil
}

// palette colours the toolsets of a map, in turn.
var palette = []string{"#f15a60", "#7ac36a", "#5a9bd4", "#faa75b", "#9e67ab", "#ce7058", "#d77fb4"}
