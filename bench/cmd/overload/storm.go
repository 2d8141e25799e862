package main

import (
	"fmt"
	"io"
	"math"
	"time"
)

// The storm scenarios overload the CPU endpoint (storm) or the I/O
// endpoint (storm-io) at their multiple, and after stormBefore the load
// generator stalls for stormStall, then sends
// every arrival that fell due meanwhile at once, as held-up clients do:
// more requests at once than kept-alive connections, so that most of them
// dial, and a server that answers them late has its clients time out and
// dial again. The figures (from buckets of recoveryBucket) say how long
// after the stall goodput is back where it stood before it.
const (
	stormBefore = 1500 * time.Millisecond
	stormStall  = 300 * time.Millisecond
	stormAfter  = 2200 * time.Millisecond
	// stormBack is the share of its goodput before the stall that a
	// window of recoverySpan buckets must reach for goodput to be back.
	stormBack = 0.9
	// stormSettle is the start of the cell left out of the goodput before
	// the stall (the cold start).
	stormSettle = 500 * time.Millisecond
)

// stormFigures are one storm cell's figures; backMS is NaN when goodput
// was not back by the end of the cell.
type stormFigures struct {
	// before is the goodput from stormSettle to the stall, last that of
	// the cell's last second, both per second over the capacity.
	before, last float64
	// backMS is the time from the stall's end to the first window back
	// at stormBack of before (0: it never fell below).
	backMS float64
	// dials are the connections the generator dialled from the stall on,
	// lagMS how late beyond the stall it sent an arrival at worst, and
	// genCore its CPU time over the cell's length: near 1, the
	// generator's own core bounded what it could send and read.
	dials          int64
	lagMS, genCore float64
}

// stormOf computes c's storm figures at the scenario's capacity (req/s).
func stormOf(c cell, capacity float64) stormFigures {
	nan := math.NaN()
	f := stormFigures{before: nan, last: nan, backMS: nan, lagMS: nan, genCore: nan}
	bs := c.Load.Buckets
	if c.Err != "" || len(bs) == 0 || capacity <= 0 {
		return f
	}
	per := func(d time.Duration) int { return int(d / recoveryBucket) }
	rate := func(w []bucket) float64 {
		var good int64
		for _, b := range w {
			good += b.Good
		}
		return float64(good) / (float64(len(w)) * recoveryBucket.Seconds()) / capacity
	}
	settle, stall, end := per(stormSettle), per(stormBefore), per(stormBefore+stormStall)
	if len(bs) < end+per(time.Second) {
		return f
	}
	f.before = rate(bs[settle:stall])
	f.last = rate(bs[len(bs)-per(time.Second):])
	back := func(w []bucket) bool { return rate(w) >= stormBack*f.before }
	if n, ok := recoveredAfter(bs, stall, len(bs), recoverySpan, back); ok {
		f.backMS = ms(time.Duration(max(0, n-(end-stall))) * recoveryBucket)
	}
	for _, b := range bs[stall:] {
		f.dials += b.Dials
	}
	f.lagMS = float64(c.Load.MaxLagUS) / 1e3
	if c.Load.CPUUS > 0 {
		f.genCore = float64(c.Load.CPUUS) / float64(len(bs)*int(recoveryBucket/time.Microsecond))
	}
	return f
}

// stormSpec is the cell of a storm scenario at multiple m.
func stormSpec(sc scenario, spec cellSpec, m float64) cellSpec {
	spec.duration, spec.from = stormBefore+stormStall+stormAfter, 0
	spec.rate, spec.bucket = m*sc.capacity, recoveryBucket
	spec.stall, spec.stallAt = stormStall, stormBefore
	return spec
}

// writeStormTable prints the table of a storm scenario.
func writeStormTable(out io.Writer, rep *report, sc scenario) {
	fmt.Fprintf(out, "\n#### %s: %s; capacity %.0f req/s\n\n", sc.name, describe(sc, rep.Config, rep.Rounds), sc.capacity)
	fmt.Fprintf(out, "| contender | load | goodput before the stall | back (>= %.1f of it) after the stall ends, ms | goodput in the last second | dials from the stall on | generator's worst lag beyond the stall, ms | generator core |\n", stormBack)
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, m := range sc.multiples {
		for _, name := range rep.contenders {
			var before, back, last, dials, lag, core []float64
			never := 0
			measured, failed := rep.roundsOf(sc, name, m)
			for _, c := range measured {
				f := stormOf(c, sc.capacity)
				before, back, last = append(before, f.before), append(back, f.backMS), append(last, f.last)
				dials, lag, core = append(dials, float64(f.dials)), append(lag, f.lagMS), append(core, f.genCore)
				if math.IsNaN(f.backMS) {
					never++
				}
			}
			fmt.Fprintf(out, "| %s | %gx | %s | %s | %s | %s | %s | %s |\n", rowLabel(name, failed), m,
				fmtSpread(spreadOf(before), 2), withNever(fmtSpread(spreadOf(back), 0), never, len(measured)),
				fmtSpread(spreadOf(last), 2), fmtSpread(spreadOf(dials), 0), fmtSpread(spreadOf(lag), 0), fmtSpread(spreadOf(core), 2))
		}
	}
}
