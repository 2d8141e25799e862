package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

func writeResult(out io.Writer, r loadResult) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "result %s\n", b)
	return err
}

// figures are one cell's numbers as the table shows them; NaN where the
// cell failed or has no such figure.
type figures struct {
	goodput, p50, p99, shed, timeouts, errors, dials, limit float64
	// srvCPU is the server's CPU time per request that reached it, in µs,
	// over the whole phase.
	srvCPU float64
	// offered is the share of the arrivals the generator sent (below 1:
	// it could not keep up, or hit maxOutstanding).
	offered float64
	// core is the share of its CPUs the server process used over the
	// cell: near 1 for a CPU-bound server in overload that owns its core,
	// below where something else took it.
	core float64
	// noWork and ceiling are the cell's budget (CPU-bound scenarios).
	noWork, ceiling float64
}

// figuresOf computes c's figures; capacity is its scenario's 1x, [from,
// to] the measured part of the server's phase in ms from its start, dur the
// cell's length in seconds.
func figuresOf(c cell, capacity, from, to, dur float64) figures {
	if c.Err != "" || c.Load.WindowS <= 0 {
		n := math.NaN()
		return figures{n, n, n, n, n, n, n, n, n, n, n, n, n}
	}
	f := figures{
		goodput:  float64(c.Load.Good) / c.Load.WindowS / capacity,
		p50:      math.NaN(),
		p99:      math.NaN(),
		shed:     float64(c.Load.Shed) / float64(max(1, c.completions())),
		timeouts: float64(c.Load.Timeouts) / float64(max(1, c.completions())),
		errors:   float64(c.Load.Errors) / float64(max(1, c.completions())),
		dials:    float64(c.Load.Dials) / float64(max(1, c.Load.Sent)),
		limit:    math.NaN(),
		srvCPU:   math.NaN(),
		offered:  math.NaN(),
		core:     math.NaN(),
		noWork:   math.NaN(),
		ceiling:  math.NaN(),
	}
	b := c.Budget // worked out when the cell ran, at the calibration's w
	if b == nil {
		b = budgetOf(c, capacity, 0)
	}
	if b != nil {
		f.noWork, f.ceiling = b.NoWorkUS, b.Ceiling
	}
	window := dur
	if c.Server.PhaseUS > 0 {
		window = float64(c.Server.PhaseUS) / 1e6 // what the server's counters cover
	}
	if window > 0 && c.Server.GOMAXPROCS > 0 {
		f.core = float64(c.Server.UserUS+c.Server.SysUS) / 1e6 / window / float64(c.Server.GOMAXPROCS)
	}
	if want := c.Rate * dur; want > 0 {
		f.offered = float64(c.Load.Sent) / want
	}
	if c.Server.Requests > 0 {
		f.srvCPU = float64(c.Server.UserUS+c.Server.SysUS) / float64(c.Server.Requests)
	}
	if c.Load.Good > 0 {
		f.p50, f.p99 = float64(c.Load.P50US)/1e3, float64(c.Load.P99US)/1e3
	}
	var ls []float64
	for _, s := range c.Server.Samples {
		if s.Limit >= 0 && s.AtMS >= from && s.AtMS <= to {
			ls = append(ls, float64(s.Limit))
		}
	}
	if len(ls) > 0 {
		f.limit = spreadOf(ls).med
	}
	return f
}

// window returns the measured window of sc's cells in ms of the phase.
func (rep *report) window(sc scenario) (from, to float64) {
	return ms(rep.warmup()), ms(rep.duration())
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func (rep *report) duration() time.Duration {
	d, _ := time.ParseDuration(rep.Config["duration"])
	return d
}

func (rep *report) warmup() time.Duration {
	d, _ := time.ParseDuration(rep.Config["warmup"])
	return d
}

// row is one contender at one multiple over all rounds.
type row struct {
	contender string
	multiple  float64
	fig       []figures
	errs      int
}

func (r row) col(get func(figures) float64) spread {
	xs := make([]float64, len(r.fig))
	for i, f := range r.fig {
		xs[i] = get(f)
	}
	return spreadOf(xs)
}

// rows groups sc's cells by multiple and contender, in the table's order.
func (rep *report) rows(sc scenario) []row {
	from, to := rep.window(sc)
	var out []row
	for _, m := range sc.multiples {
		for _, name := range rep.contenders {
			r := row{contender: name, multiple: m}
			for _, c := range rep.Cells {
				if c.Scenario == sc.name && c.Contender == name && c.Multiple == m {
					r.fig = append(r.fig, figuresOf(c, sc.capacity, from, to, rep.duration().Seconds()))
					if c.Err != "" {
						r.errs++
					}
				}
			}
			out = append(out, r)
		}
	}
	return out
}

func fmtSpread(s spread, prec int) string {
	if s.n == 0 {
		return "-"
	}
	if s.n == 1 || s.lo == s.hi {
		return fmt.Sprintf("%.*f", prec, s.med)
	}
	return fmt.Sprintf("%.*f (%.*f-%.*f)", prec, s.med, prec, s.lo, prec, s.hi)
}

func fmtMed(s spread, prec int) string {
	if s.n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, s.med)
}

// machine names this machine: CPU model and count, OS, Go version.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs, %s/%s, %s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func describe(sc scenario, cfg map[string]string, rounds int64) string {
	switch sc.name {
	case "io":
		return fmt.Sprintf("I/O-bound: %d slots x %v, honouring the context", sc.slots, sc.wait)
	case "cpu":
		return fmt.Sprintf("CPU-bound: %d sha256 rounds per request", rounds)
	case "mixed":
		return fmt.Sprintf("mixed: %d sha256 rounds then a %v downstream wait", rounds, sc.wait)
	case "recovery", "recovery-cpu":
		work := fmt.Sprintf("I/O %d slots x %v", sc.slots, sc.wait)
		if sc.name == "recovery-cpu" {
			work = fmt.Sprintf("CPU %d sha256 rounds", rounds)
		}
		return fmt.Sprintf("recovery: %s; %v at the surge's multiple of the capacity, %v at 1x, then the work doubles at the same 1x for %v; times from buckets of %v over windows of %d",
			work, recoveryPhase, recoveryPhase, recoveryPhase, recoveryBucket, recoverySpan)
	case "storm", "storm-io":
		work := fmt.Sprintf("CPU %d sha256 rounds", rounds)
		if sc.name == "storm-io" {
			work = fmt.Sprintf("I/O %d slots x %v", sc.slots, sc.wait)
		}
		return fmt.Sprintf("storm: %s; the generator stalls for %v after %v, then sends every arrival due meanwhile at once; %v more; times from buckets of %v over windows of %d",
			work, stormStall, stormBefore, stormAfter, recoveryBucket, recoverySpan)
	case "drop":
		return fmt.Sprintf("capacity drop: I/O %d slots x %v, the service time doubles after the warm-up (%s); figures of the phase after the drop, load a multiple of the capacity before it (%.0f req/s)",
			sc.slots, sc.wait, cfg["warmup"], sc.before)
	}
	return sc.name
}

// writeTables prints the run's header and one markdown table per scenario.
func writeTables(out io.Writer, rep *report) {
	fmt.Fprintf(out, "Run of %s UTC on %s: `go run ./cmd/overload %s`.\n", rep.Started.Format("2006-01-02 15:04"), machine(), rep.Config["args"])
	fmt.Fprintf(out, "sha256 rounds per request: %d (%s of CPU in the server process). ", rep.Rounds, rep.Config["cpu-work"])
	client := ""
	if c := rep.Config["client"]; c != "" && rep.Config["http"] == "1" {
		client = " (" + c + " client)"
	}
	fmt.Fprintf(out, "Server GOMAXPROCS %s pinned to CPUs %q, load generator on CPUs %q, HTTP %s%s; %s rounds of cells of %s (first %s left out), client deadline %s, Poisson arrivals, keep-alive.\n",
		rep.Config["procs"], rep.Config["pin-server"], rep.Config["pin-load"], rep.Config["http"], client, rep.Config["rounds"], rep.Config["duration"], rep.Config["warmup"], rep.Config["deadline"])
	for _, w := range rep.Warnings {
		fmt.Fprintf(out, "Warning: %s.\n", w)
	}
	fmt.Fprintln(out, "Medians over rounds, (min-max) where they differ. goodput: 2xx within the deadline per second / capacity; p50, p99: of those; shed: 503s / answers; timeouts: deadline passed / answers; errors: transport errors and other statuses / answers; dials: new connections / requests sent; limit: the contender's median limit in the window; srv µs/req: the server's CPU time (rusage) over the cell per request that reached its handler chain or was answered by the Guard (sluice-early); sent: arrivals the generator sent / arrivals due (below 0.95: the generator could not keep up); srv core: the server's CPU time over the cell / the window its counters covered (the cell's length, longer when an overloaded server read them late) and GOMAXPROCS (well below 1 for a CPU-bound server in overload: something else had its CPU). cpu and mixed only: µs/no (r): the server's CPU time per request that reached it but did not run the work, once each that did is taken at w, the server's CPU time per request in the capacity measurement (blank when under 5% did not); ceiling: the most goodput a server could reach at this arrival rate λ with its CPUs fully used if each admitted request cost w and every other r, x = (GOMAXPROCS - λr) / (w - r) per second, over capacity, at most 1.")
	for _, sc := range rep.scenarios {
		if sc.recovery {
			writeRecoveryTable(out, rep, sc)
			continue
		}
		if sc.storm {
			writeStormTable(out, rep, sc)
			continue
		}
		if sc.admit {
			writeAdmitTable(out, rep)
			continue
		}
		fmt.Fprintf(out, "\n#### %s: %s; capacity %.0f req/s\n\n", sc.name, describe(sc, rep.Config, rep.Rounds), sc.capacity)
		head, rule := "", ""
		if cpuBound(sc.name) {
			head, rule = " µs/no | ceiling |", " --- | --- |"
		}
		fmt.Fprintln(out, "| contender | load | goodput | p50 ms | p99 ms | shed | timeouts | errors | dials | limit | srv µs/req | sent | srv core |"+head)
		fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"+rule)
		for _, r := range rep.rows(sc) {
			name := rowLabel(r.contender, r.errs)
			tail := ""
			if cpuBound(sc.name) {
				tail = fmt.Sprintf(" %s | %s |", fmtMed(r.col(func(f figures) float64 { return f.noWork }), 0),
					fmtMed(r.col(func(f figures) float64 { return f.ceiling }), 2))
			}
			fmt.Fprintf(out, "| %s | %gx | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |%s\n", name, r.multiple,
				fmtSpread(r.col(func(f figures) float64 { return f.goodput }), 2),
				fmtMed(r.col(func(f figures) float64 { return f.p50 }), 1),
				fmtSpread(r.col(func(f figures) float64 { return f.p99 }), 0),
				fmtMed(r.col(func(f figures) float64 { return f.shed }), 2),
				fmtMed(r.col(func(f figures) float64 { return f.timeouts }), 2),
				fmtMed(r.col(func(f figures) float64 { return f.errors }), 2),
				fmtMed(r.col(func(f figures) float64 { return f.dials }), 2),
				fmtMed(r.col(func(f figures) float64 { return f.limit }), 0),
				fmtMed(r.col(func(f figures) float64 { return f.srvCPU }), 0),
				fmtMed(r.col(func(f figures) float64 { return f.offered }), 2),
				fmtMed(r.col(func(f figures) float64 { return f.core }), 2), tail)
		}
	}
	var rej []cell
	for _, c := range rep.Cells {
		if c.Scenario == rejectScenario {
			rej = append(rej, c)
		}
	}
	if len(rej) == 0 {
		return
	}
	fmt.Fprintf(out, "\n#### cost of a rejection: %sx the CPU endpoint's capacity (%.0f req/s), server CPU time (rusage) per answer\n\n", rep.Config["reject-load"], rep.Capacity["cpu"])
	fmt.Fprintln(out, "| server | answers/s | shed | server CPU µs per answer | dials / request | connections accepted |")
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- |")
	for _, name := range rejectLabels {
		var per, rate, shed, dials, conns []float64
		for _, c := range rej {
			if c.Contender != name || c.Err != "" || c.Load.WindowS <= 0 {
				continue
			}
			n := c.Load.Good + c.Load.Shed + c.Load.Errors
			per = append(per, c.cpuPerAnswer())
			rate = append(rate, float64(n)/c.Load.WindowS)
			shed = append(shed, float64(c.Load.Shed)/float64(max(1, c.completions())))
			dials = append(dials, float64(c.Load.Dials)/float64(max(1, c.Load.Sent)))
			conns = append(conns, float64(c.Server.Conns))
		}
		label := map[string]string{
			rejectName:                "sluice middleware, adaptive rule at its limit: every request 503, keep-alive",
			earlyRejectName:           "connguard answering early (WithEarlyAnswer, a queue bound of 2 ns): every request 503 before net/http reads it, keep-alive",
			"sluice-admit":            "sluice middleware (Default, admitting), empty 200 handler, keep-alive",
			"noop":                    "no protection, empty 200 handler (the net/http floor), keep-alive",
			refuseName + "+dial":      "connguard refusing at accept: every connection 503 or closed, a new connection per request",
			pauseRefuseName + "+dial": "connguard pausing, accepting nothing (per request sent; each times out), a new connection per request",
			rejectName + "+dial":      "sluice middleware, every request 503, a new connection per request",
			"noop+dial":               "empty 200 handler, a new connection per request",
		}[name]
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s |\n", label, fmtMed(spreadOf(rate), 0), fmtMed(spreadOf(shed), 3),
			fmtSpread(spreadOf(per), 1), fmtMed(spreadOf(dials), 3), fmtMed(spreadOf(conns), 0))
	}
}

// writeFiles writes cells.json and one SVG per scenario into dir.
func writeFiles(dir string, rep *report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cells.json"), b, 0o644); err != nil {
		return err
	}
	for _, sc := range rep.scenarios {
		if sc.recovery || sc.storm || sc.admit {
			continue // its figures are times or costs, in its table
		}
		if err := os.WriteFile(filepath.Join(dir, sc.name+".svg"), []byte(plot(rep, sc)), 0o644); err != nil {
			return err
		}
	}
	return nil
}
