package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"
)

// The recovery scenarios run one cell of three phases of recoveryPhase
// each: a surge at the multiple of the capacity, then 1x (how long until
// goodput is back), then the work per request doubles at the same 1x
// (how long until p99 is back). Figures come from per-recoveryBucket
// buckets of the load generator, over windows of recoverySpan buckets.
const (
	recoveryPhase  = 1500 * time.Millisecond
	recoveryBucket = 100 * time.Millisecond
	recoverySpan   = 3
	// recoveryGoodput is the share of the arrivals due that a window must
	// answer 2xx within the deadline for goodput to be back.
	recoveryGoodput = 0.95
	// recoveryP99 is how many times the unloaded p99 (after the drop) a
	// window's p99 must stay under for latency to be back.
	recoveryP99 = 2
)

// recoveredAfter returns how many buckets after lo the first window of
// span buckets of bs[lo:hi] that passes ok after the first that fails
// starts: when the trouble was over. It is zero when no window fails (it
// never went bad), and a window that passes before the first failure (the
// queue had not built yet) does not count. It reports false when no window
// passes after the first failure, or the range holds no window. A relapse
// after the recovery is left to the phase's figures.
func recoveredAfter(bs []bucket, lo, hi, span int, ok func([]bucket) bool) (int, bool) {
	hi = min(hi, len(bs))
	lo = max(0, lo)
	if hi-lo < span {
		return 0, false
	}
	failed := false
	for j := lo; j+span <= hi; j++ {
		switch pass := ok(bs[j : j+span]); {
		case !pass:
			failed = true
		case failed:
			return j - lo, true
		}
	}
	return 0, !failed
}

// goodputBack reports whether the window answered at least share of the
// arrivals due in it with a 2xx within the deadline.
func goodputBack(share float64) func([]bucket) bool {
	return func(w []bucket) bool {
		var due, good int64
		for _, b := range w {
			due, good = due+b.Due, good+b.Good
		}
		return due > 0 && float64(good) >= share*float64(due)
	}
}

// p99Below reports whether the window's good answers have a p99 under
// limit µs; a window with none fails.
func p99Below(limitUS float64) func([]bucket) bool {
	return func(w []bucket) bool {
		var lats []int64
		for _, b := range w {
			lats = append(lats, b.LatsUS...)
		}
		return len(lats) > 0 && float64(quantile(lats, 0.99)) < limitUS
	}
}

// recoveryFigures are one recovery cell's figures; the times are NaN when
// the cell did not recover within its phase.
type recoveryFigures struct {
	goodBackMS, p99BackMS float64
	// goodput1x is the share of the arrivals due in the 1x phase answered
	// in it; p99Drop the p99 of the good answers after the drop, in ms.
	goodput1x, p99Drop float64
	// lagMS is how late the load generator sent an arrival at worst: near
	// the deadline, the generator fell behind and its lateness, not the
	// server, timed the requests out.
	lagMS float64
}

// recoveryOf computes c's recovery figures against the unloaded p99 (µs)
// of its endpoint after the drop.
func recoveryOf(c cell, unloadedP99US float64) recoveryFigures {
	nan := math.NaN()
	f := recoveryFigures{nan, nan, nan, nan, nan}
	bs := c.Load.Buckets
	if c.Err != "" || len(bs) == 0 {
		return f
	}
	f.lagMS = float64(c.Load.MaxLagUS) / 1e3
	per := int(recoveryPhase / recoveryBucket)
	if n, ok := recoveredAfter(bs, per, 2*per, recoverySpan, goodputBack(recoveryGoodput)); ok {
		f.goodBackMS = ms(time.Duration(n) * recoveryBucket)
	}
	if n, ok := recoveredAfter(bs, 2*per, 3*per, recoverySpan, p99Below(recoveryP99*unloadedP99US)); ok {
		f.p99BackMS = ms(time.Duration(n) * recoveryBucket)
	}
	var due, good int64
	for _, b := range bs[per:min(len(bs), 2*per)] {
		due, good = due+b.Due, good+b.Good
	}
	if due > 0 {
		f.goodput1x = float64(good) / float64(due)
	}
	var lats []int64
	for _, b := range bs[min(len(bs), 2*per):] {
		lats = append(lats, b.LatsUS...)
	}
	if len(lats) > 0 {
		f.p99Drop = float64(quantile(lats, 0.99)) / 1e3
	}
	return f
}

// recoverySpec is the cell of a recovery scenario at multiple m.
func (r *runner) recoverySpec(sc scenario, spec cellSpec, m float64) cellSpec {
	spec.duration, spec.from = 3*recoveryPhase, 0
	spec.rate, spec.thenRate, spec.thenAt = m*sc.capacity, sc.capacity, recoveryPhase
	spec.dropAt, spec.bucket = 2*recoveryPhase, recoveryBucket
	return spec
}

// unloadedP99 measures the p99 of one closed-loop client on sc's endpoint
// with no protection, the lowest of capacityTries: the unloaded latency.
func (r *runner) unloadedP99(ctx context.Context, sc scenario) (float64, error) {
	best := math.Inf(1)
	for range capacityTries {
		lr, _, err := r.runCell(ctx, cellSpec{sc: sc, contender: "none", closed: 1, duration: r.cfg.calibrate, from: r.cfg.calibrate / 4, seed: r.cfg.seed})
		if err != nil {
			return 0, err
		}
		if lr.Good > 0 {
			best = min(best, float64(lr.P99US))
		}
	}
	if math.IsInf(best, 1) {
		return 0, fmt.Errorf("overload: %s answered nothing unloaded", sc.name)
	}
	return best, nil
}

// writeRecoveryTable prints the table of a recovery scenario.
func writeRecoveryTable(out io.Writer, rep *report, sc scenario) {
	unloaded := rep.Unloaded[sc.name]
	fmt.Fprintf(out, "\n#### %s: %s; capacity %.0f req/s before the drop, %.0f after; unloaded p99 after the drop %.1f ms\n\n",
		sc.name, describe(sc, rep.Config, rep.Rounds), sc.capacity, sc.after, unloaded/1e3)
	fmt.Fprintf(out, "| contender | surge | goodput back (>= %.2f of arrivals) after the surge ends, ms | p99 back (< %gx unloaded) after the drop, ms | answered in the 1x phase | p99 after the drop, ms | generator's worst lag, ms |\n", recoveryGoodput, float64(recoveryP99))
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, m := range sc.multiples {
		for _, name := range rep.contenders {
			var good, p99, g1, pd, lag []float64
			goodNever, p99Never := 0, 0
			measured, failed := rep.roundsOf(sc, name, m)
			for _, c := range measured {
				f := recoveryOf(c, unloaded)
				good, p99, g1, pd = append(good, f.goodBackMS), append(p99, f.p99BackMS), append(g1, f.goodput1x), append(pd, f.p99Drop)
				lag = append(lag, f.lagMS)
				if math.IsNaN(f.goodBackMS) {
					goodNever++
				}
				if math.IsNaN(f.p99BackMS) {
					p99Never++
				}
			}
			fmt.Fprintf(out, "| %s | %gx | %s | %s | %s | %s | %s |\n", rowLabel(name, failed), m,
				withNever(fmtSpread(spreadOf(good), 0), goodNever, len(measured)),
				withNever(fmtSpread(spreadOf(p99), 0), p99Never, len(measured)),
				fmtMed(spreadOf(g1), 2), fmtMed(spreadOf(pd), 0), fmtSpread(spreadOf(lag), 0))
		}
	}
}

// roundsOf returns the cells of contender name at multiple m in sc that
// measured something, and how many others failed.
func (rep *report) roundsOf(sc scenario, name string, m float64) (measured []cell, failed int) {
	for _, c := range rep.Cells {
		switch {
		case c.Scenario != sc.name || c.Contender != name || c.Multiple != m:
		case c.Err != "":
			failed++
		default:
			measured = append(measured, c)
		}
	}
	return measured, failed
}

// rowLabel is a table row's contender, with how many of its cells failed
// when some did.
func rowLabel(name string, failed int) string {
	if failed > 0 {
		return fmt.Sprintf("%s (%d failed)", name, failed)
	}
	return name
}

// withNever appends to a time how many of n rounds never recovered.
func withNever(s string, never, n int) string {
	switch {
	case never == 0:
		return s
	case never == n:
		return fmt.Sprintf("never (%d of %d)", never, n)
	}
	return fmt.Sprintf("%s; never in %d of %d", s, never, n)
}
