package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
)

// The markers between which -readme rewrites a file.
const (
	beginMarker = "<!-- compare:begin -->"
	endMarker   = "<!-- compare:end -->"
)

// group is the cases that compare with each other: one top-level
// benchmark, one variant, one GOMAXPROCS.
type group struct {
	top, variant string
	cpu          int
	rows         []int // indices into the cases, in discovery order
}

// impl is the implementation of c, with its binary's label if it has one.
func impl(c benchCase) string {
	name := ""
	if len(c.path) >= 2 {
		name = c.path[1]
	}
	if c.bin.label != "" {
		name += "@" + c.bin.label
	}
	return name
}

func variant(c benchCase) string {
	if len(c.path) < 3 {
		return ""
	}
	return strings.Join(c.path[2:], "/")
}

func groups(cases []benchCase) []*group {
	var gs []*group
	for i, c := range cases {
		top, v := strings.TrimPrefix(c.path[0], "Benchmark"), variant(c)
		j := slices.IndexFunc(gs, func(g *group) bool { return g.top == top && g.variant == v && g.cpu == c.cpu })
		if j < 0 {
			gs = append(gs, &group{top: top, variant: v, cpu: c.cpu})
			j = len(gs) - 1
		}
		gs[j].rows = append(gs[j].rows, i)
	}
	return gs
}

// baseline returns the row of g that the ratios are taken against: the
// implementation "sluice", else the first starting with "sluice"; -1 if
// none.
func (g *group) baseline(cases []benchCase) int {
	first := -1
	for _, i := range g.rows {
		switch name, _, _ := strings.Cut(impl(cases[i]), "@"); {
		case name == "sluice" && cases[i].bin == cases[g.rows[0]].bin:
			return i
		case first < 0 && strings.HasPrefix(name, "sluice") && cases[i].bin == cases[g.rows[0]].bin:
			first = i
		}
	}
	return first
}

// bare returns the row of g's bare handler on binary bin; -1 if none.
func (g *group) bare(cases []benchCase, bin binary) int {
	for _, i := range g.rows {
		if len(cases[i].path) >= 2 && cases[i].path[1] == "bare" && cases[i].bin == bin {
			return i
		}
	}
	return -1
}

// median returns the median of xs (the mean of the middle two for an even
// count) and the min and max; NaN for none.
func median(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		n := math.NaN()
		return n, n, n
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med = s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return med, s[0], s[len(s)-1]
}

func metric(rs []result, unit string) []float64 {
	var xs []float64
	for _, r := range rs {
		if v, ok := r.metrics[unit]; ok && !r.failed {
			xs = append(xs, v)
		}
	}
	return xs
}

// overheads returns, per round, the time of rs minus the time of bare in
// the same round.
func overheads(rs, bare []result) []float64 {
	var xs []float64
	for _, r := range rs {
		for _, b := range bare {
			if b.round == r.round && !r.failed && !b.failed {
				xs = append(xs, r.metrics["ns/op"]-b.metrics["ns/op"])
			}
		}
	}
	return xs
}

// report renders one markdown table per group.
func report(cases []benchCase, results [][]result, cfg config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d rounds, one process per case; medians (min-max over rounds); x = time / baseline's time (above 1: the baseline, marked *, is faster).\n", cfg.rounds)
	for _, g := range groups(cases) {
		base, bare := g.baseline(cases), g.bare(cases, cases[g.rows[0]].bin)
		title := g.top
		if g.variant != "" {
			title += " " + g.variant
		}
		fmt.Fprintf(&b, "\n#### %s, GOMAXPROCS %d\n\n", title, g.cpu)
		extra := map[string]bool{}
		for _, i := range g.rows {
			for _, r := range results[i] {
				for u := range r.metrics {
					if u != "ns/op" && u != "B/op" && u != "allocs/op" {
						extra[u] = true
					}
				}
			}
		}
		units := make([]string, 0, len(extra))
		for u := range extra {
			units = append(units, u)
		}
		slices.Sort(units)
		b.WriteString("| impl | ns/op | allocs/op | x |")
		for _, u := range units {
			fmt.Fprintf(&b, " %s |", u)
		}
		if bare >= 0 {
			b.WriteString(" over bare | x over bare |")
		}
		b.WriteString("\n|---|---|---|---|")
		b.WriteString(strings.Repeat("---|", len(units)))
		if bare >= 0 {
			b.WriteString("---|---|")
		}
		b.WriteString("\n")
		var baseMed, baseOver float64 = math.NaN(), math.NaN()
		if base >= 0 {
			baseMed, _, _ = median(metric(results[base], "ns/op"))
			if bare >= 0 {
				baseOver, _, _ = median(overheads(results[base], results[bare]))
			}
		}
		for _, i := range g.rows {
			name := impl(cases[i])
			if i == base {
				name += " *"
			}
			if n := failures(results[i]); n > 0 {
				name += fmt.Sprintf(" (%d of %d runs failed)", n, len(results[i]))
			}
			med, lo, hi := median(metric(results[i], "ns/op"))
			allocs, _, _ := median(metric(results[i], "allocs/op"))
			fmt.Fprintf(&b, "| %s | %s (%s-%s) | %s | %s |", name, num(med), num(lo), num(hi), num(allocs), ratio(med, baseMed))
			for _, u := range units {
				m, l, h := median(metric(results[i], u))
				if math.IsNaN(m) { // the row does not report u
					b.WriteString(" - |")
					continue
				}
				fmt.Fprintf(&b, " %s (%s-%s)", num(m), num(l), num(h))
				if strings.HasSuffix(u, "ns/op") && base >= 0 {
					// A time of another clock (CPU time): its own ratio.
					bm, _, _ := median(metric(results[base], u))
					fmt.Fprintf(&b, ", x %s", ratio(m, bm))
				}
				b.WriteString(" |")
			}
			if bare >= 0 {
				if own := g.bare(cases, cases[i].bin); own < 0 || i == own {
					b.WriteString(" | |")
				} else {
					o, l, h := median(overheads(results[i], results[own]))
					fmt.Fprintf(&b, " %s (%s-%s) | %s |", num(o), num(l), num(h), ratio(o, baseOver))
				}
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func failures(rs []result) int {
	n := 0
	for _, r := range rs {
		if r.failed {
			n++
		}
	}
	return n
}

// num formats a figure with three significant digits.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v == math.Trunc(v) && math.Abs(v) < 1e9:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func ratio(v, base float64) string {
	if math.IsNaN(v) || math.IsNaN(base) || base <= 0 || v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v/base)
}

// rewriteReadme replaces what lies between the compare markers of the
// file at path with table.
func rewriteReadme(path, table string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	updated, err := replaceBetween(old, table)
	if err != nil {
		return fmt.Errorf("compare: %s: %w", path, err)
	}
	return os.WriteFile(path, updated, 0o644)
}

func replaceBetween(doc []byte, table string) ([]byte, error) {
	i := bytes.Index(doc, []byte(beginMarker))
	j := bytes.Index(doc, []byte(endMarker))
	if i < 0 || j < i {
		return nil, errors.New("no " + beginMarker + " ... " + endMarker + " pair")
	}
	var b bytes.Buffer
	b.Write(doc[:i+len(beginMarker)])
	b.WriteString("\n")
	b.WriteString(table)
	b.Write(doc[j:])
	return b.Bytes(), nil
}
