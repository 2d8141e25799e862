package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// palette colours the contenders in the order of contenderNames.
var palette = []string{"#7f7f7f", "#000000", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#bcbd22", "#e377c2", "#2ca02c", "#1f77b4", "#98df8a", "#ff9896", "#aec7e8"}

func colour(name string) string {
	for i, n := range contenderNames {
		if n == name {
			return palette[i%len(palette)]
		}
	}
	return "#d62728"
}

// svgPanel draws one chart into b: a frame, a title, a y scale from 0 to
// maxY, and a polyline per series of (x in [0,1], y) points.
type svgPanel struct {
	b          *strings.Builder
	top        int
	title, yu  string
	maxY       float64
	xLabels    []string // equally spaced under the frame
	xLabelsAtX []float64
}

const svgW, svgH, svgPad = 960, 300, 60

func (p svgPanel) frame() (x0, y0, x1, y1 float64) {
	return svgPad, float64(p.top + svgH - 40), svgW - 180, float64(p.top + 40)
}

func (p svgPanel) open() {
	x0, y0, x1, y1 := p.frame()
	fmt.Fprintf(p.b, `<text x="%.0f" y="%d" font-size="14">%s</text>`+"\n", x0, p.top+22, html.EscapeString(p.title))
	fmt.Fprintf(p.b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", x0, y1, x1-x0, y0-y1)
	for _, f := range []float64{0, 0.5, 1} {
		y := y0 - f*(y0-y1)
		fmt.Fprintf(p.b, `<text x="4" y="%.1f">%.3g %s</text>`+"\n", y+4, f*p.maxY, p.yu)
		if f > 0 {
			fmt.Fprintf(p.b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`+"\n", x0, y, x1, y)
		}
	}
	for i, l := range p.xLabels {
		x := x0 + p.xLabelsAtX[i]*(x1-x0)
		fmt.Fprintf(p.b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x, y0+16, html.EscapeString(l))
	}
}

func (p svgPanel) ref(y float64, label string) {
	x0, y0, x1, y1 := p.frame()
	yy := y0 - min(y, p.maxY)/p.maxY*(y0-y1)
	fmt.Fprintf(p.b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#555" stroke-dasharray="4"/><text x="%.0f" y="%.1f" fill="#555">%s</text>`+"\n",
		x0, yy, x1, yy, x0+4, yy-4, html.EscapeString(label))
}

func (p svgPanel) series(i int, name string, xs, ys []float64) {
	x0, y0, x1, y1 := p.frame()
	var pts [][2]float64
	for j := range xs {
		if !math.IsNaN(ys[j]) {
			pts = append(pts, [2]float64{x0 + xs[j]*(x1-x0), y0 - min(ys[j], p.maxY)/p.maxY*(y0-y1)})
		}
	}
	c := colour(name)
	switch len(pts) {
	case 0:
	case 1:
		fmt.Fprintf(p.b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", pts[0][0], pts[0][1], c)
	default:
		var ps []string
		for _, q := range pts {
			ps = append(ps, fmt.Sprintf("%.1f,%.1f", q[0], q[1]))
		}
		fmt.Fprintf(p.b, `<polyline fill="none" stroke-width="2" stroke="%s" points="%s"/>`+"\n", c, strings.Join(ps, " "))
	}
	fmt.Fprintf(p.b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", x1+10, y1+12+14*float64(i), c, html.EscapeString(name))
}

// plot draws sc's figures: goodput and p99 per contender over the load
// multiples (medians over rounds), and the limit over time of the
// contenders that have one, in the first round at the multiple nearest 5x.
func plot(rep *report, sc scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", svgW, 3*svgH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	rows := rep.rows(sc)
	n := len(sc.multiples)
	xAt := func(i int) float64 {
		if n == 1 {
			return 0.5
		}
		return float64(i) / float64(n-1)
	}
	var labels []string
	var at []float64
	for i, m := range sc.multiples {
		labels, at = append(labels, fmt.Sprintf("%gx", m)), append(at, xAt(i))
	}
	byContender := func(get func(figures) float64) (map[string][]float64, float64) {
		out, top := map[string][]float64{}, 0.0
		for _, r := range rows {
			mi := 0
			for i, m := range sc.multiples {
				if m == r.multiple {
					mi = i
				}
			}
			if out[r.contender] == nil {
				out[r.contender] = make([]float64, n)
			}
			v := r.col(get).med
			out[r.contender][mi] = v
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
		return out, top
	}
	good, gTop := byContender(func(f figures) float64 { return f.goodput })
	gp := svgPanel{b: &b, top: 0, title: sc.name + ": goodput / capacity (median over rounds) by load", yu: "", maxY: math.Max(1.1, gTop*1.05), xLabels: labels, xLabelsAtX: at}
	gp.open()
	gp.ref(1, "capacity")
	p99, pTop := byContender(func(f figures) float64 { return f.p99 })
	pp := svgPanel{b: &b, top: svgH, title: sc.name + ": p99 of the good answers (median over rounds) by load", yu: "ms", maxY: math.Max(10, pTop*1.05), xLabels: labels, xLabelsAtX: at}
	pp.open()
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = xAt(i)
	}
	for i, name := range rep.contenders {
		gp.series(i, name, xs, good[name])
		pp.series(i, name, xs, p99[name])
	}

	// The limit over time: the cell of round 0 at the multiple nearest 5x.
	m5 := sc.multiples[0]
	for _, m := range sc.multiples {
		if math.Abs(m-5) < math.Abs(m5-5) {
			m5 = m
		}
	}
	var cells []cell
	span, lTop := 0.0, 1.0
	for _, name := range rep.contenders {
		for _, c := range rep.Cells {
			if c.Scenario == sc.name && c.Contender == name && c.Multiple == m5 && c.Round == 0 && len(c.Server.Samples) > 0 && c.Server.Samples[0].Limit >= 0 {
				cells = append(cells, c)
				for _, s := range c.Server.Samples {
					span, lTop = max(span, s.AtMS), max(lTop, float64(s.Limit))
				}
			}
		}
	}
	lTop = math.Min(lTop, 1000)
	var tl []string
	var tat []float64
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		tl, tat = append(tl, fmt.Sprintf("%.0f ms", f*span)), append(tat, f)
	}
	lp := svgPanel{b: &b, top: 2 * svgH, title: fmt.Sprintf("%s: the limit over time at %gx, round 1 (contenders that have one)", sc.name, m5), yu: "", maxY: lTop * 1.05, xLabels: tl, xLabelsAtX: tat}
	lp.open()
	from, _ := rep.window(sc)
	if span > 0 {
		x0, y0, x1, y1 := lp.frame()
		x := x0 + from/span*(x1-x0)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#555" stroke-dasharray="2"/>`+"\n", x, y0, x, y1)
	}
	for _, c := range cells {
		var tx, ty []float64
		for _, s := range c.Server.Samples {
			tx, ty = append(tx, s.AtMS/math.Max(1, span)), append(ty, float64(s.Limit))
		}
		idx := 0
		for i, name := range rep.contenders {
			if name == c.Contender {
				idx = i
			}
		}
		lp.series(idx, c.Contender, tx, ty)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
