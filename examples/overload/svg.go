package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// modeColors keeps each mode's colour distinct in every plot.
var modeColors = map[string]string{"unprotected": "#d62728", "protected": "#2ca02c"}

// writeSVG plots goodput and p99 per second of every run, hand-written SVG
// with no plotting dependency: a time axis in seconds, and no p99 point
// for a second in which nothing was served (a gap, not a 0 ms dip).
func writeSVG(path string, results []modeResult, capacity float64) error {
	const w, h, pad = 900, 300, 50
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, 2*h+40)
	n := 0
	for _, r := range results {
		n = max(n, len(r.seconds))
	}
	panel := func(top int, title string, value func(second) (float64, bool), maxY float64, unit string, ref float64) {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14">%s</text>`+"\n", pad, top+20, title)
		x0, y0, x1, y1 := pad, top+h-pad/2, w-pad, top+pad
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, y1, x1-x0, y0-y1)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%.0f %s</text><text x="%d" y="%d">0</text>`+"\n", 4, y1+4, maxY, unit, 4, y0)
		xs := func(i int) float64 { return float64(x0) + float64(i)*float64(x1-x0)/float64(max(1, n-1)) }
		ys := func(v float64) float64 { return float64(y0) - min(v, maxY)/maxY*float64(y0-y1) }
		step := max(1, n/10)
		for i := 0; i < n; i += step { // the time axis: second i+1 of the run
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999"/><text x="%.1f" y="%d" text-anchor="middle">%ds</text>`+"\n",
				xs(i), y0, xs(i), y0+4, xs(i), y0+16, i+1)
		}
		if ref > 0 {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#555" stroke-dasharray="4"/>`+"\n", x0, ys(ref), x1, ys(ref))
		}
		for li, r := range results {
			color := modeColors[r.mode]
			var pts []string
			flush := func() {
				if len(pts) > 0 {
					fmt.Fprintf(&b, `<polyline fill="none" stroke-width="2" stroke="%s" points="%s"/>`+"\n", color, strings.Join(pts, " "))
				}
				pts = pts[:0]
			}
			for i, s := range r.seconds {
				v, ok := value(s)
				if !ok {
					flush() // nothing to plot this second: break the line
					continue
				}
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(i), ys(v)))
			}
			flush()
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", x1-120, y1+16+16*li, color, r.mode)
		}
	}
	panel(0, fmt.Sprintf("goodput per second (dashed: capacity %.0f req/s); load rises 1x to peak", capacity),
		func(s second) (float64, bool) { return float64(s.served), true }, capacity*1.5, "req/s", capacity)
	maxP99 := 0.0
	for _, r := range results {
		for _, s := range r.seconds {
			maxP99 = max(maxP99, float64(s.percentile(0.99))/float64(time.Millisecond))
		}
	}
	panel(h+30, "p99 latency of served requests per second (gaps: nothing served)", func(s second) (float64, bool) {
		return float64(s.percentile(0.99)) / float64(time.Millisecond), s.served > 0
	}, max(1, maxP99), "ms", 0)
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
