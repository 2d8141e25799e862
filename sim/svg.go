package sim

import (
	"bufio"
	"fmt"
	"path/filepath"
	"time"
)

// palette colours controllers in plots, in ControllerNames order and then
// round again.
var palette = []string{"#888888", "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d"}

type panel struct {
	title string
	value func(Point) float64
	clip  float64 // the axis stops here (0: no clip), so one collapsed controller does not flatten the rest
}

var panels = []panel{
	{"offered attempts (req/s)", func(p Point) float64 { return p.Attempts }, 0},
	{"goodput (req/s)", func(p Point) float64 { return p.Goodput }, 0},
	{"p99 of admitted work (ms, axis clipped at 1000)", func(p Point) float64 { return float64(p.P99) / float64(time.Millisecond) }, 1000},
	{"concurrency limit", func(p Point) float64 { return float64(p.Limit) }, 0},
}

// WriteSVG draws the reports of one scenario (offered load, goodput, p99
// and limit over time, one line per controller) as a self-contained SVG.
func WriteSVG(w *bufio.Writer, scenario string, reports []Report) error {
	const width, ph, left, top, gap = 900.0, 160.0, 70.0, 40.0, 40.0
	height := top + float64(len(panels))*(ph+gap) + 20
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width+160, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" font-size="14">%s</text>`+"\n", left, scenario)
	var tmax float64
	for _, r := range reports {
		if n := len(r.Series); n > 0 {
			tmax = max(tmax, r.Series[n-1].T.Seconds())
		}
	}
	if tmax == 0 {
		tmax = 1
	}
	for i, pn := range panels {
		y0 := top + float64(i)*(ph+gap)
		var vmax float64
		for _, r := range reports {
			for _, p := range r.Series {
				vmax = max(vmax, pn.value(p))
			}
		}
		if vmax == 0 {
			vmax = 1
		}
		if pn.clip > 0 {
			vmax = min(vmax, pn.clip)
		}
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f">%s</text>`+"\n", left, y0-6, pn.title)
		fmt.Fprintf(w, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#ccc"/>`+"\n", left, y0, width-left, ph)
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f" text-anchor="end">%.4g</text><text x="%.0f" y="%.0f" text-anchor="end">0</text>`+"\n",
			left-4, y0+10, vmax, left-4, y0+ph)
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f" text-anchor="end">%.0fs</text>`+"\n", width, y0+ph+12, tmax)
		for k, r := range reports {
			fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.2" points="`, palette[k%len(palette)])
			for _, p := range r.Series {
				x := left + p.T.Seconds()/tmax*(width-left)
				y := y0 + ph - min(pn.value(p), vmax)/vmax*ph
				fmt.Fprintf(w, "%.1f,%.1f ", x, y)
			}
			fmt.Fprintln(w, `"/>`)
		}
	}
	for k, r := range reports {
		y := top + float64(k)*16
		fmt.Fprintf(w, `<rect x="%.0f" y="%.0f" width="12" height="3" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			width+10, y, palette[k%len(palette)], width+28, y+5, r.Controller)
	}
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}

// WriteSVGFiles writes one SVG per scenario into dir, named <scenario>.svg.
func WriteSVGFiles(dir string, reports []Report) error {
	if err := makeDir(dir); err != nil {
		return err
	}
	for i := 0; i < len(reports); {
		j := i
		for j < len(reports) && reports[j].Scenario == reports[i].Scenario {
			j++
		}
		group := reports[i:j]
		if err := writeFile(filepath.Join(dir, reports[i].Scenario+".svg"), func(w *bufio.Writer) error {
			return WriteSVG(w, group[0].Scenario, group)
		}); err != nil {
			return err
		}
		i = j
	}
	return nil
}
