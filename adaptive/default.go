package adaptive

import (
	"math"
	"time"
)

// Default is sluice's own controller and the one to use unless there is a
// reason not to (hence the name: the call site reads adaptive.NewDefault()).
// It is a latency gradient against a long-horizon baseline, with the
// guardrails that the plain gradient controllers lack:
//
//   - Ceiling: with WithMaxHealthyLatency, a window latency above the ceiling
//     shrinks the limit by ceiling/latency (at most by half) whatever the
//     baseline says, so a baseline that has drifted up cannot hide an
//     unhealthy service.
//   - Drops first: a window whose dropped fraction (timeouts, deadline
//     errors) exceeds the drop tolerance multiplies the limit by
//     max(0.5, 1-dropped fraction).
//   - Gradient: g = baseline*tolerance/latency. With g >= 1 (no queueing) and
//     the limit in use, the limit grows: doubling in slow start (until the
//     first congestion signal), then by sqrt(L). With g < 1 the limit moves
//     to the inflight that carried this window's throughput at a tolerable
//     latency, by Little's law AvgInflight*g, bounded to [L/2, L).
//   - Throughput evidence: when the average inflight rose by a quarter over
//     the previous window but throughput rose by under 5%, the extra
//     inflight only queued: the limit shrinks to tolerance times the
//     previous inflight (at most by 10% per window) instead of growing.
//   - Drift detection: when a shrink of the limit was followed by a window
//     whose latency did not fall and whose throughput fell with the limit,
//     the latency is not queueing (a slow dependency, slower service) and the
//     baseline is stale. After two such windows in a row the baseline is
//     reset to the current latency, and the limit stops collapsing.
//   - Probing without pinning: after the baseline horizon without a new
//     minimum, one window runs at 3/4 of the limit to drain any standing
//     queue and its latency becomes the baseline; the limit is restored
//     after it. Only one window, and only a quarter of the limit, so there
//     is no probe-time rejection spike (the Envoy failure) and no ratchet.
//   - Runtime signals: with WithRuntimeThresholds and a Limiter that reads
//     them, scheduler latency, GC CPU fraction or heap near GOMEMLIMIT above
//     their thresholds multiply the limit by 0.9 and stop growth.
//
// The baseline is the smallest window latency since the last probe (same
// statistic as the window latency, so that they compare like with like).
//
// Defaults: initial 20, limits [4, 1000], tolerance 1.25, baseline horizon
// 10s, drop tolerance 0.01, no ceiling, no runtime thresholds. The zero value
// is not usable; call NewDefault. Not safe for concurrent use (see Algorithm).
type Default struct {
	limit      float64
	min, max   int
	tolerance  float64
	horizon    int64
	maxHealthy float64
	dropTol    float64
	schedMax   time.Duration
	gcMax      float64
	heapMax    float64

	base      float64
	baseAt    int64
	slowStart bool
	probing   bool
	saved     float64

	// The previous window, for the throughput and drift evidence.
	prevLimit    float64
	prevRTT      float64
	prevX        float64
	prevInflight float64
	drift        int
}

var _ Algorithm = (*Default)(nil)

// NewDefault returns sluice's default algorithm. It accepts
// WithInitialLimit, WithLimits, WithTolerance, WithMaxHealthyLatency,
// WithBaselineHorizon, WithDropTolerance and WithRuntimeThresholds.
func NewDefault(opts ...Option) (*Default, error) {
	c, err := build("Default", config{initial: 20, min: 4, max: 1000, tolerance: 1.25,
		baselineHorizon: 10 * time.Second, dropTolerance: 0.01},
		optInitial|optLimits|optTolerance|optMaxHealthy|optBaselineHorizon|optDropTolerance|optRuntime, opts)
	if err != nil {
		return nil, err
	}
	return &Default{limit: float64(c.initial), min: c.min, max: c.max, tolerance: c.tolerance,
		horizon: int64(c.baselineHorizon), maxHealthy: float64(c.maxHealthy), dropTol: c.dropTolerance,
		schedMax: c.schedMax, gcMax: c.gcMax, heapMax: c.heapMax, slowStart: true}, nil
}

// Limit returns the current limit.
func (d *Default) Limit() int { return int(d.limit) }

// Baseline returns the current latency baseline; zero before the first
// sample.
func (d *Default) Baseline() time.Duration { return time.Duration(d.base) }

func (d *Default) bound(x float64) float64 {
	return min(float64(d.max), max(float64(d.min), x))
}

// shrink sets the limit to x but by at least one unit and at most by half.
func (d *Default) shrink(x float64) {
	d.limit = d.bound(max(d.limit/2, min(x, d.limit-1)))
	d.slowStart = false
}

func (d *Default) runtimeCongested(r RuntimeSignals) bool {
	return (d.schedMax > 0 && r.SchedLatency > d.schedMax) ||
		(d.gcMax > 0 && r.GCFraction > d.gcMax) ||
		(d.heapMax > 0 && r.HeapFraction > d.heapMax)
}

// Update applies one window (see the type's rules).
func (d *Default) Update(w Window) int {
	total := w.Count + w.Drops
	if total == 0 {
		return int(d.limit)
	}
	used := d.limit // the limit in force during this window
	defer func() {
		d.prevLimit = used
		if w.Count > 0 {
			d.prevRTT, d.prevX, d.prevInflight = float64(w.RTT), w.Throughput(), w.AvgInflight()
		}
	}()
	if frac := float64(w.Drops) / float64(total); frac > d.dropTol {
		d.shrink(d.limit * max(0.5, 1-frac))
		return int(d.limit)
	}
	if w.Count == 0 {
		return int(d.limit)
	}
	if d.runtimeCongested(w.Runtime) {
		d.shrink(d.limit * 0.9)
		return int(d.limit)
	}
	rtt := float64(w.RTT)
	now := w.End
	if d.probing {
		d.probing = false
		d.base, d.baseAt = rtt, now
		d.limit = d.saved
		d.drift = 0
		return int(d.limit)
	}
	if d.base == 0 || rtt < d.base {
		d.base, d.baseAt = rtt, now
	} else if now-d.baseAt > d.horizon {
		d.probing = true
		d.saved = d.limit
		d.limit = d.bound(math.Ceil(d.limit * 0.75))
		return int(d.limit)
	}
	if d.maxHealthy > 0 && rtt > d.maxHealthy {
		d.shrink(d.limit * max(0.5, d.maxHealthy/rtt))
		return int(d.limit)
	}
	x, inflight := w.Throughput(), w.AvgInflight()
	g := d.base * d.tolerance / rtt
	if g >= 1 {
		d.drift = 0
		if float64(w.MaxInflight) < used/2 {
			return int(d.limit) // not limited by the limit: no evidence to grow
		}
		if d.prevInflight > 0 && inflight > 1.25*d.prevInflight && x < 1.05*d.prevX {
			d.shrink(max(d.limit*0.9, d.prevInflight*d.tolerance))
			return int(d.limit)
		}
		next := d.limit + max(1, math.Sqrt(d.limit))
		if d.slowStart {
			next = 2 * d.limit
		}
		if d.maxHealthy > 0 {
			// Growth must not take a latency already near the ceiling past it.
			next = min(next, max(d.limit, d.limit*d.maxHealthy/rtt))
		}
		d.limit = d.bound(next)
		return int(d.limit)
	}
	// Latency is above tolerance. Is it queueing? A previous shrink that
	// neither lowered latency nor kept throughput says no.
	if d.prevLimit > 0 && used < 0.95*d.prevLimit && rtt >= 0.95*d.prevRTT && x < 0.97*d.prevX {
		d.drift++
		if d.drift >= 2 {
			d.drift = 0
			d.base, d.baseAt = rtt, now
			return int(d.limit)
		}
	} else {
		d.drift = 0
	}
	d.shrink(inflight * g)
	return int(d.limit)
}
