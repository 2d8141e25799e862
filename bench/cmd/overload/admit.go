package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/bench/peers"
	"github.com/sluicehq/sluice/shed"
)

// admitScenario is the scenario of the admission-cost cells: what each
// rate-limit middleware costs the server per request it admits, end to end
// on loopback. Every cell serves the empty 200 endpoint on keep-alive
// connections at the fixed -admit-rate, each contender in its own server
// process; the figure is the server's CPU time (rusage) per answer, beside
// that of net/http with no middleware (the floor) in the same round.
const admitScenario = "admit"

// The admission contenders besides the floor ("none"): sluice's middleware
// with one per-IP token bucket rule, with its five header fields, with the
// three X-RateLimit-* fields the peers write, and with no headers; and the
// peers of bench's BenchmarkMiddleware on the same rule.
const (
	sluiceIPName       = "sluice-ip"
	sluiceIPLegacyName = "sluice-ip-legacy"
	sluiceIPBareName   = "sluice-ip-noheaders"
	httprateName       = "httprate"
	goLimiterName      = "go-limiter"
	throttledName      = "throttled"
)

// admitContenders are the admission-cost cells in the order of their
// table: the floor, sluice, the peers.
var admitContenders = []string{"none", sluiceIPName, sluiceIPLegacyName, sluiceIPBareName, httprateName, goLimiterName, throttledName}

// perIPKeys is the table capacity of the sluice admission contenders, as
// in BenchmarkMiddleware; the rule is peers.SluiceIPRule.
const perIPKeys = 2 * 4096

// admitProtection builds the admission contender called name (other than
// the floor); ok is false for a name that is none of them.
func admitProtection(name string) (p *protection, ok bool, err error) {
	var opts []shed.Option
	switch name {
	case sluiceIPName:
	case sluiceIPLegacyName:
		opts = append(opts, shed.WithHeaderFields(shed.LegacyFields))
	case sluiceIPBareName:
		opts = append(opts, shed.WithHeaders(func(http.Header, shed.Decision) {}))
	case httprateName:
		return peerProtection(peers.HTTPRate(), nil)
	case goLimiterName:
		return peerProtection(peers.GoLimiter())
	case throttledName:
		return peerProtection(peers.Throttled())
	default:
		return nil, false, nil
	}
	c, err := shed.New([]shed.Rule{peers.SluiceIPRule(perIPKeys)}, opts...)
	if err != nil {
		return nil, true, err
	}
	return &protection{wrap: c.Middleware, close: c.Close, ctl: c}, true, nil
}

// peerProtection is the admission contender of a peer's middleware.
func peerProtection(m peers.Middleware, err error) (*protection, bool, error) {
	if err != nil {
		return nil, true, err
	}
	return &protection{wrap: m.Wrap, close: m.Close}, true, nil
}

// measureAdmit runs the admission-cost cells of round, each contender once
// at cfg.admitRate, in an order rotated by round. The first third of each
// cell is left out of its figures, the server's CPU time included: the
// connections the start of a Poisson stream dials cost the server more than
// a middleware does, and how many it dials varies from cell to cell.
func (r *runner) measureAdmit(ctx context.Context, round int) []cell {
	specs := make([]cellSpec, len(admitContenders))
	from := r.cfg.duration / 3
	for i, name := range admitContenders {
		specs[i] = cellSpec{sc: scenario{name: admitScenario, static: 1}, contender: name, rate: r.cfg.admitRate, from: from, serverFrom: from}
	}
	return r.measureSet(ctx, admitScenario, 0, specs, func(s cellSpec) string { return s.contender }, round)
}

// admitLabel is the table's name of the admission contender called name.
func admitLabel(name string) string {
	return map[string]string{
		"none":             "net/http, no middleware (the floor)",
		sluiceIPName:       "sluice, per-IP token bucket, all 5 header fields (default)",
		sluiceIPLegacyName: "sluice, the 3 X-RateLimit-* fields (WithHeaderFields(LegacyFields))",
		sluiceIPBareName:   "sluice, no headers (WithHeaders of a no-op)",
		httprateName:       "httprate (go-chi), LimitBy on the connection's IP",
		goLimiterName:      "go-limiter httplimit (sethvargo), memorystore",
		throttledName:      "throttled, GCRA on memstore, VaryBy RemoteAddr",
	}[name]
}

// writeAdmitTable prints the admission-cost table of rep's admit cells:
// per contender the answers a second, the answers other than 2xx (zero
// when the limit was never reached), the server's CPU time per answer,
// its overhead over the floor of the same round (median and min-max over
// the rounds with both), and that median overhead over sluice's (default
// headers).
func writeAdmitTable(out io.Writer, rep *report) {
	floor := map[int]float64{}
	for _, c := range rep.Cells {
		if c.Scenario == admitScenario && c.Contender == "none" {
			if v := c.cpuPerAnswer(); !math.IsNaN(v) {
				floor[c.Round] = v
			}
		}
	}
	type figs struct {
		rate, cpu, over []float64
		bad             int64
	}
	byName := map[string]*figs{}
	for _, name := range admitContenders {
		byName[name] = &figs{}
	}
	for _, c := range rep.Cells {
		f := byName[c.Contender]
		if c.Scenario != admitScenario || f == nil || c.Err != "" || c.Load.WindowS <= 0 {
			continue
		}
		cpu := c.cpuPerAnswer()
		f.rate = append(f.rate, float64(c.Load.Good+c.Load.Shed+c.Load.Errors)/c.Load.WindowS)
		f.cpu = append(f.cpu, cpu)
		f.bad += c.Load.Shed + c.Load.Errors + c.Load.Timeouts
		if fl, ok := floor[c.Round]; ok && c.Contender != "none" {
			f.over = append(f.over, cpu-fl)
		}
	}
	ref := spreadOf(byName[sluiceIPName].over).med
	fmt.Fprintf(out, "\n#### cost of an admission: an empty 200 at %s req/s (Poisson arrivals, keep-alive), one per-IP token bucket no request reaches; server CPU time (rusage) per request, the first third of each cell (its dials) left out\n\n", rep.Config["admit-rate"])
	fmt.Fprintln(out, "| server | answers/s | not 2xx | server CPU µs per request | overhead over the floor, µs | overhead / sluice's |")
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- |")
	for _, name := range admitContenders {
		f := byName[name]
		bad, ratio := "-", "-"
		if len(f.cpu) > 0 {
			bad = strconv.FormatInt(f.bad, 10)
		}
		if o := spreadOf(f.over); o.n > 0 && ref > 0 {
			ratio = fmt.Sprintf("%.2f", o.med/ref)
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s |\n", admitLabel(name), fmtMed(spreadOf(f.rate), 0), bad,
			fmtSpread(spreadOf(f.cpu), 1), fmtSpread(spreadOf(f.over), 1), ratio)
	}
}
