package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func fakeCell(contender string, round int, good int64, p99us int64, limit int) cell {
	return cell{
		Scenario: "io", Contender: contender, Multiple: 5, Round: round,
		Load: loadResult{Sent: 1000, Dials: 10, WindowS: 0.5, Good: good, Shed: 100, P50US: 1000, P99US: p99us},
		Server: serverStats{UserUS: 200_000, SysUS: 100_000, Requests: 100, GOMAXPROCS: 1, Samples: []sample{
			{AtMS: 100, Limit: 999}, {AtMS: 200, Limit: 999}, // before the window: not counted
			{AtMS: 600, Limit: limit}, {AtMS: 700, Limit: limit},
		}},
	}
}

// TestRowsTakeMediansOverRoundsAndCountFailures: a row's figure is the
// median over its rounds, goodput is per second over capacity, the limit
// is read inside the window only, and a failed cell is counted and left
// out of the figures.
func TestRowsTakeMediansOverRoundsAndCountFailures(t *testing.T) {
	sc := scenario{name: "io", multiples: []float64{5}, capacity: 100}
	failed := fakeCell("sluice", 3, 0, 0, 0)
	failed.Err = "overload: no \"ready \""
	rep := &report{
		Config:     map[string]string{"duration": "1s", "warmup": "500ms"},
		contenders: []string{"sluice"},
		scenarios:  []scenario{sc},
		Cells: []cell{
			fakeCell("sluice", 0, 40, 30_000, 10), // goodput 80/s = 0.8
			fakeCell("sluice", 1, 50, 90_000, 20), // 1.0
			fakeCell("sluice", 2, 45, 60_000, 12), // 0.9
			failed,
			fakeCell("none", 0, 1, 1, 1), // another contender
		},
	}
	rows := rep.rows(sc)
	if len(rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(rows))
	}
	r := rows[0]
	if r.errs != 1 || len(r.fig) != 4 {
		t.Fatalf("row has %d cells, %d failed; want 4 and 1", len(r.fig), r.errs)
	}
	g := r.col(func(f figures) float64 { return f.goodput })
	if math.Abs(g.med-0.9) > 1e-9 || math.Abs(g.lo-0.8) > 1e-9 || math.Abs(g.hi-1.0) > 1e-9 || g.n != 3 {
		t.Errorf("goodput %+v, want median 0.9 in [0.8, 1.0] over 3 rounds", g)
	}
	if p := r.col(func(f figures) float64 { return f.p99 }); p.med != 60 {
		t.Errorf("p99 median %v ms, want 60", p.med)
	}
	if l := r.col(func(f figures) float64 { return f.limit }); l.med != 12 || l.hi != 20 {
		t.Errorf("limit %+v, want median 12, max 20 (the sample before the window is not counted)", l)
	}
	if c := r.col(func(f figures) float64 { return f.srvCPU }); c.med != 3000 {
		t.Errorf("server CPU %v µs/req, want 3000", c.med)
	}
	if c := r.col(func(f figures) float64 { return f.core }); math.Abs(c.med-0.3) > 1e-9 {
		t.Errorf("server core share %v, want 0.3 (300 ms of CPU in a 1 s cell)", c.med)
	}
	checkTableHas(t, rep, "| sluice (1 failed) | 5x | 0.90 (0.80-1.00) | 1.0 | 60 (30-90) |")
	checkSVGString(t, plot(rep, sc))
}

// TestCPUPerAnswerOfAServerThatAnswersNothingIsPerRequestSent: the row of
// a server that accepts nothing gives its CPU per request sent.
func TestCPUPerAnswerOfAServerThatAnswersNothingIsPerRequestSent(t *testing.T) {
	c := cell{Load: loadResult{Sent: 1000, Timeouts: 400}, Server: serverStats{UserUS: 4000, SysUS: 8000}}
	if got := c.cpuPerAnswer(); got != 12 {
		t.Errorf("%v µs per request, want 12", got)
	}
	c.Load = loadResult{Sent: 1000, Shed: 500, Good: 100}
	if got := c.cpuPerAnswer(); got != 20 {
		t.Errorf("%v µs per answer, want 20", got)
	}
}

// TestCoreShareIsOverTheWindowTheServerMeasured: when the server says how
// long its counters' window really was (its end reading runs late on an
// overloaded core), the core share is over that window, not the cell's
// nominal length.
func TestCoreShareIsOverTheWindowTheServerMeasured(t *testing.T) {
	c := fakeCell("sluice", 0, 40, 30_000, 10) // 300 ms of CPU
	c.Server.PhaseUS = 1_500_000
	if f := figuresOf(c, 100, 500, 1000, 1); math.Abs(f.core-0.2) > 1e-9 {
		t.Errorf("core share %v, want 0.2 (300 ms of CPU over a 1.5 s window)", f.core)
	}
	c.Server.PhaseUS = 0 // a server that did not say: the cell's length
	if f := figuresOf(c, 100, 500, 1000, 1); math.Abs(f.core-0.3) > 1e-9 {
		t.Errorf("core share %v, want 0.3 (300 ms of CPU over the 1 s cell)", f.core)
	}
}

// tableOf returns the tables writeTables writes for rep.
func tableOf(rep *report) string {
	var out bytes.Buffer
	writeTables(&out, rep)
	return out.String()
}

// checkTableHas fails t for each of want that the tables of rep lack.
func checkTableHas(t *testing.T, rep *report, want ...string) {
	t.Helper()
	table := tableOf(rep)
	for _, w := range want {
		if !strings.Contains(table, w) {
			t.Errorf("the table lacks %q:\n%s", w, table)
		}
	}
}
