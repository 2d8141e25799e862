package sim

import (
	"slices"
	"time"
)

// Result holds the measurements of one run. Summary figures cover
// [Warmup, Duration]; the Series covers the whole run.
type Result struct {
	Scenario, Controller string
	// Goodput is the rate of attempts completed within their deadline as a
	// fraction of the true capacity (averaged over the measured period);
	// GoodputRPS is the same in requests per second.
	Goodput, GoodputRPS float64
	// Offered is the rate of first attempts as a fraction of capacity.
	Offered float64
	// P50 and P99 are latency percentiles of admitted work (arrival of the
	// attempt to completion), late work included.
	P50, P99 time.Duration
	// P99Wait is the p99 of the same work's wait: from the arrival of the
	// attempt to its admission by the controller (time spent in a queueing
	// controller; 0 for one that decides at once).
	P99Wait time.Duration
	// CriticalGoodput and SheddableGoodput are the fractions of the
	// requests of priority 0 (critical) and of the others (sheddable)
	// served within a deadline by some attempt, over the requests whose
	// first attempt arrived after the warm-up and early enough to be
	// decided before the end of the run (Duration minus every attempt's
	// deadline and backoff); 0 for a class without such requests.
	CriticalGoodput, SheddableGoodput float64
	// Shed is the fraction of attempts rejected.
	Shed float64
	// Settle is how long after the scenario's Change (or its start) the p99
	// came back within twice the unloaded p99 at the capacity then in force,
	// with goodput at least half of what was possible, for good; -1 if never,
	// 0 when the scenario has no reference.
	Settle time.Duration
	// RecoverLimit is how long after Restore the limit got back to 90% of
	// its average over the 2s before Change; RecoverGoodput how long until
	// goodput over a sliding second stayed at 90% of what was possible.
	// -1 if never; 0 when the scenario has no Restore or the controller no
	// limit.
	RecoverLimit, RecoverGoodput time.Duration
	// Series is the time series, one Point per bucket.
	Series []Point
	// Undecided counts requests the controller never decided (a bug in it,
	// unless they were offered just before the end).
	Undecided int
}

// Point is one bucket of the time series; rates are per second.
type Point struct {
	T                                time.Duration
	Offered, Attempts, Goodput, Shed float64
	Late                             float64
	P99                              time.Duration
	Limit                            int
	Capacity                         float64
}

func percentile(sorted []int64, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, max(0, int(p*float64(len(sorted))+0.5)-1))
	return time.Duration(sorted[i])
}

func (r *runner) result() Result {
	s := r.s
	res := Result{Scenario: s.Name, Undecided: r.pending}
	sec := s.Bucket.Seconds()
	var good, originals, attempts, shed int
	var capSum float64
	var measured int
	for i := range r.buckets {
		b := &r.buckets[i]
		t := time.Duration(i) * s.Bucket
		slices.Sort(b.lat)
		p := Point{T: t, Offered: float64(b.originals) / sec, Attempts: float64(b.attempts) / sec,
			Goodput: float64(b.good) / sec, Shed: float64(b.shed) / sec, Late: float64(b.late) / sec,
			P99: percentile(b.lat, 0.99), Limit: b.limit, Capacity: s.Server.Capacity(t + s.Bucket/2)}
		res.Series = append(res.Series, p)
		if t >= s.Warmup {
			good += b.good
			originals += b.originals
			attempts += b.attempts
			shed += b.shed
			capSum += p.Capacity
			measured++
		}
	}
	period := float64(measured) * sec
	capacity := capSum / float64(measured)
	res.GoodputRPS = float64(good) / period
	res.Goodput = res.GoodputRPS / capacity
	res.Offered = float64(originals) / period / capacity
	if attempts > 0 {
		res.Shed = float64(shed) / float64(attempts)
	}
	slices.Sort(r.lat)
	res.P50, res.P99 = percentile(r.lat, 0.5), percentile(r.lat, 0.99)
	slices.Sort(r.wait)
	res.P99Wait = percentile(r.wait, 0.99)
	res.CriticalGoodput, res.SheddableGoodput = fraction(r.classGood[0], r.classOrig[0]), fraction(r.classGood[1], r.classOrig[1])
	res.Settle = r.settle(res.Series)
	res.RecoverLimit, res.RecoverGoodput = r.recovery(res.Series)
	return res
}

// possible is the goodput a perfect controller could reach in a bucket.
func possible(p Point) float64 { return min(p.Offered, p.Capacity) }

func (r *runner) settle(series []Point) time.Duration {
	s := r.s
	if s.RefP99 <= 0 {
		return 0
	}
	from, to := s.Change, s.Duration
	if s.Restore > s.Change {
		to = s.Restore
	}
	last := -1 // the last bad bucket in [from, to)
	for i, p := range series {
		if p.T < from || p.T+s.Bucket > to {
			continue
		}
		ref := time.Duration(float64(s.RefP99)*factorAt(s.Server.Slowdown, p.T)) + delayAt(s.Server.Dependency, p.T)
		if p.P99 == 0 || p.P99 > 2*ref || p.Goodput < 0.5*possible(p) {
			last = i
		}
	}
	if last < 0 {
		return 0
	}
	end := series[last].T + s.Bucket
	if end+s.Bucket > to {
		return -1 // bad until the end of the range
	}
	return end - from
}

func (r *runner) recovery(series []Point) (limit, goodput time.Duration) {
	s := r.s
	if s.Restore <= 0 {
		return 0, 0
	}
	var before float64
	var n int
	for _, p := range series {
		if p.T >= s.Change-2*time.Second && p.T < s.Change {
			before += float64(p.Limit)
			n++
		}
	}
	limit = -1
	if n == 0 || before == 0 {
		limit = 0
	} else {
		before /= float64(n)
		for _, p := range series {
			if p.T >= s.Restore && float64(p.Limit) >= 0.9*before {
				limit = p.T - s.Restore
				break
			}
		}
	}
	// Goodput over a sliding second, for good.
	k := max(1, int(time.Second/s.Bucket))
	goodput = -1
	for i := range series {
		if series[i].T < s.Restore {
			continue
		}
		ok := true
		for j := i; j+k <= len(series); j++ {
			var g, pos float64
			for _, p := range series[j : j+k] {
				g += p.Goodput
				pos += possible(p)
			}
			if g < 0.9*pos {
				ok = false
				break
			}
		}
		if ok && i+k <= len(series) {
			goodput = series[i].T - s.Restore
			break
		}
	}
	return limit, goodput
}

func fraction(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}
