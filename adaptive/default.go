package adaptive

import (
	"math"
	"time"
)

// Default is sluice's own controller and the one to use unless there is a
// reason not to (hence the name: the call site reads adaptive.NewDefault()).
// It is a latency gradient against a long-horizon baseline, with the
// guardrails that the plain gradient controllers lack. Per window, in order:
//
//   - Drops first: a dropped fraction (timeouts, deadline errors) above the
//     drop tolerance multiplies the limit by 1-fraction. Drops of work
//     admitted before the latest decrease do not count again (see
//     Window.StaleDrops).
//   - Scheduling delay, the queue in front of the handler: Default asks
//     its Limiter to read the Go runtime's signals and sheds a share of
//     admissions at random (it is a Shedder) while the mean time that
//     ready goroutines waited to run (RuntimeSignals.SchedMean) is above
//     the scheduling target (10ms; WithSchedulingTarget). The share let
//     through moves by the square root of target/delay, down by at most
//     half and up by at most double per window, and never below 1/64.
//     This protects a CPU-bound server, where inflight never exceeds the
//     cores, so no concurrency limit binds, and the queue is in the run
//     queue and the sockets, before any middleware; the limit itself is
//     left to the rules below. WithoutSchedulingSignal turns it off.
//   - Queue bound, per request: a request that waited more than two
//     scheduling targets (20ms) in the server before it reached the
//     Limiter (Request.Queued: from the kernel's receive timestamp of its
//     bytes, which shed's middleware has when the server's listener is a
//     connguard.Guard's) is shed at once (it is a QueueBounder). The share
//     above reacts window by window to the whole process's delay; the
//     bound acts on each request from the first of a surge on, so that
//     the admitted ones never wait long. After a window that shed past the
//     bound at least half as many requests as it served, and ten or more
//     (an overload, not the burst of a server at its capacity or the pause
//     of a quiet one), the bound is a quarter of a target (2.5ms) until a
//     window sheds fewer: a standing queue is bounded tighter than a
//     burst, as adaptive LIFO and CoDel do (see queueBoundTargets for the
//     figures). WithoutSchedulingSignal turns the bound off too.
//   - Runtime thresholds: with WithRuntimeThresholds, scheduler latency,
//     GC CPU fraction or heap near GOMEMLIMIT above their thresholds
//     multiply the limit by 0.9.
//   - Probing without pinning: when the baseline has not been confirmed for
//     the baseline horizon, one window runs at 3/4 of the limit to drain any
//     standing queue, its latency becomes the baseline if it is lower, and
//     the limit is restored. One window and a quarter of the limit: no
//     probe-time rejection spike (Envoy's failure); and since a probe only
//     lowers the baseline, no ratchet (raising it takes drift evidence).
//   - Ceiling: with WithMaxHealthyLatency, a latency above the ceiling
//     shrinks the limit by ceiling/latency whatever the baseline says, so a
//     baseline that drifted up cannot hide an unhealthy service; growth never
//     takes the latency past the ceiling by Little's law.
//   - Inflight under half the limit holds: the window says nothing about it.
//   - Gradient: g = (baseline + (tolerance-1)*sqrt(baseline*anchor))/latency,
//     where the anchor is the lowest baseline seen (following a higher
//     baseline only over about a thousand windows): after the baseline was
//     raised for a slower service, the queueing allowance grows only with
//     the square root of the slowdown, so a slower service does not buy a
//     proportionally longer queue. With g >= 1 the limit grows when
//     inflight reached 3/4 of it: doubling in slow start (until the first
//     congestion signal), then by 1, 2, 4... per window while growth goes
//     unpunished (at most by half), so that it creeps near its equilibrium
//     and races back when far below it. With 0.5 <= g < 1 it shrinks
//     halfway to L*g (latency is a soft signal: a slower service looks like
//     a queue for a few windows); with g < 0.5 to L*g.
//   - Throughput evidence: when the average inflight (Little's law) rose by
//     a quarter over the previous window but throughput rose by under 5%,
//     the extra inflight only queued: the limit shrinks to tolerance times
//     the previous inflight instead of growing.
//   - Drift detection: when, within one shrinking episode (windows with
//     latency above tolerance), the limit and the throughput have both
//     fallen by 15% from the episode's largest and latency no longer falls
//     (or the limit sits at its minimum with latency still high), the
//     latency is not queueing (a slow dependency, a slower service) and the
//     baseline is stale. After two such windows in a row the baseline is
//     reset to the current latency and the limit goes back to 85% of the
//     episode's largest.
//
// Every shrink is by at least one and at most 30% per window. The baseline is
// a soft minimum of the window latency (the same statistic, so that they
// compare like with like): a lower window pulls it halfway down, so one
// noisy window cannot set it, and a window below baseline/tolerance (no
// noise: capacity came back) sets it. It never drifts up by itself, only
// through the drift detection.
//
// It starts at its minimum limit and grows (slow start), so that its first
// windows time the unqueued latency and the baseline is that, not the
// latency of a queue that an initial limit above the true concurrency
// would hold (an initial 20 for 8 slots kept a standing queue of 12).
//
// Defaults: initial limit = minimum limit, limits [4, 1000], tolerance
// 1.25, baseline horizon 10s, drop tolerance 0.01, scheduling target 10ms,
// no ceiling, no runtime thresholds. The zero value is not usable; call
// NewDefault. Not safe for concurrent use (see Algorithm).
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
	// schedTarget is the scheduling delay kept by shedding; zero: none.
	schedTarget time.Duration
	// admit is the share of admissions let through, in [minAdmit, 1].
	admit float64
	// standing: the latest window shed past the queue bound at least
	// standingShed of what it served, and standingMinShed or more (an
	// overload, not a burst), so the bound is the standing one.
	standing bool

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
	streak       int     // consecutive growth windows
	headroom     float64 // grow only when inflight reached this share of the limit
	anchor       float64 // the lowest baseline seen: the healthy latency
	epLimit, epX float64 // largest limit and throughput of the shrinking episode
}

var (
	_ Shedder      = (*Default)(nil)
	_ QueueBounder = (*Default)(nil)
)

// Default's queue bound, in scheduling targets: twice the mean delay the
// shedding keeps (20ms with the default target) while the queue in front
// of the handler comes and goes, so that the bursts of a server at its
// capacity pass; a quarter of it (2.5ms) after a window that shed past
// the bound at least half as many requests as it served (standingShed),
// an overload rather than a burst, and at least ten (standingMinShed, the
// samples a window needs by default), so that a quiet server whose rare
// request met a pause (a collection, a slow neighbour) keeps the loose
// bound. In bench/cmd/overload (one core, 1ms of CPU per request, three
// interleaved rounds per comparison), fixed bounds of 10, 20 and 50ms
// kept goodput 0.92, 0.97 and 1.01 of capacity at 1x (10ms shed 9% of the
// bursts of a server at its capacity) and 0.79, 0.78 and 0.73 at 10x with
// a p99 of 12, 22 and 52ms. Against 20ms alone, a standing bound of 5ms
// kept the goodput (0.93 / 0.66 against 0.91 / 0.66 at 5x / 10x) at a p99
// of 7ms instead of 22; 2.5ms against 5ms, another run: 0.96 / 0.78 at 4ms
// against 0.84 / 0.76 at 7ms, 0.99 against 0.98 at 1x, and after the work
// per request doubled at full load the p99 was back under twice the
// unloaded one within 200-300ms in every round, where 5ms missed it in
// four rounds of nine (its p99 was the bound plus the doubled work, about
// twice the unloaded p99) and 20ms in every round.
const (
	queueBoundTargets    = 2.0
	standingBoundTargets = 0.25
	standingShed         = 0.5
	standingMinShed      = 10
)

// QueueBound returns the longest wait in front of the handler that
// Default admits now (see QueueBounder): twice the scheduling target
// (20ms by default), or a quarter of it (2.5ms) after a window of
// overload (one that shed past the bound at least half as many requests
// as it served, and ten or more); zero with WithoutSchedulingSignal.
func (d *Default) QueueBound() time.Duration {
	if d.standing {
		return time.Duration(standingBoundTargets * float64(d.schedTarget))
	}
	return time.Duration(queueBoundTargets * float64(d.schedTarget))
}

// NewDefault returns sluice's default algorithm. It accepts
// WithInitialLimit, WithLimits, WithTolerance, WithMaxHealthyLatency,
// WithBaselineHorizon, WithDropTolerance, WithRuntimeThresholds,
// WithSchedulingTarget and WithoutSchedulingSignal.
func NewDefault(opts ...Option) (*Default, error) {
	c, err := build("Default", config{initial: 4, min: 4, max: 1000, tolerance: 1.25,
		baselineHorizon: 10 * time.Second, dropTolerance: 0.01, schedTarget: 10 * time.Millisecond},
		optInitial|optLimits|optTolerance|optMaxHealthy|optBaselineHorizon|optDropTolerance|optRuntime|optSchedTarget, opts)
	if err != nil {
		return nil, err
	}
	return &Default{limit: float64(c.initial), min: c.min, max: c.max, tolerance: c.tolerance,
		horizon: int64(c.baselineHorizon), maxHealthy: float64(c.maxHealthy), dropTol: c.dropTolerance,
		schedMax: c.schedMax, gcMax: c.gcMax, heapMax: c.heapMax, schedTarget: c.schedTarget,
		admit: 1, slowStart: true, headroom: 0.75}, nil
}

// minAdmit is the smallest share of admissions Default lets through: some
// work must still finish, or no window would close to lift the shedding.
const minAdmit = 1.0 / 64

// ShedFraction returns the share of admissions to shed at random (see
// Shedder), in [0, 1-1/64]: zero unless the scheduling delay is above the
// scheduling target.
func (d *Default) ShedFraction() float64 { return 1 - d.admit }

// usesRuntime tells the Limiter to read the Go runtime's signals.
func (d *Default) usesRuntime() bool { return d.schedTarget > 0 }

// updateShed steps the share of admissions let through from the window's
// scheduling delay (see the type's rules).
func (d *Default) updateShed(w Window) {
	if d.schedTarget <= 0 {
		return
	}
	// Damped proportional control: the share let through moves by the
	// square root of target/delay, down by at most half and up by at most
	// double (plus 1/64, to leave the floor) per window, so that it
	// settles instead of swinging between a queue and an idle CPU: the
	// delay of one window is that of work admitted windows ago.
	lat := max(w.Runtime.SchedMean, time.Microsecond)
	step := math.Sqrt(float64(d.schedTarget) / float64(lat))
	if step >= 1 {
		d.admit = min(1, d.admit*min(2, step)+minAdmit)
	} else {
		d.admit = max(minAdmit, d.admit*max(0.5, step))
	}
}

// Limit returns the current limit.
func (d *Default) Limit() int { return int(d.limit) }

// Baseline returns the current latency baseline; zero before the first
// sample.
func (d *Default) Baseline() time.Duration { return time.Duration(d.base) }

func (d *Default) bound(x float64) float64 {
	return min(float64(d.max), max(float64(d.min), x))
}

// shrink sets the limit to x, but by at least one and at most 30%.
func (d *Default) shrink(x float64) {
	if d.probing {
		// Congestion during a probe: abandon it, from the probe's limit
		// (the saved one was for a healthier service).
		d.probing = false
	}
	d.limit = d.bound(max(d.limit*0.7, min(x, d.limit-1)))
	d.slowStart = false
	d.streak = 0
}

// endEpisode forgets the shrinking episode and its drift evidence.
func (d *Default) endEpisode() { d.epLimit, d.epX, d.drift = 0, 0, 0 }

func (d *Default) runtimeCongested(r RuntimeSignals) bool {
	return (d.schedMax > 0 && r.SchedLatency > d.schedMax) ||
		(d.gcMax > 0 && r.GCFraction > d.gcMax) ||
		(d.heapMax > 0 && r.HeapFraction > d.heapMax)
}

// Update applies one window (see the type's rules).
func (d *Default) Update(w Window) int {
	d.standing = w.ShedByWait >= standingMinShed && float64(w.ShedByWait) >= standingShed*float64(w.Count)
	total := w.Count + w.Drops
	if total == 0 {
		return int(d.limit)
	}
	d.updateShed(w)
	used := d.limit // the limit in force during this window
	growing := d.streak
	d.streak = 0
	defer func() {
		d.prevLimit = used
		if w.Count > 0 {
			d.prevRTT, d.prevX, d.prevInflight = float64(w.RTT), w.Throughput(), w.AvgInflight()
		}
	}()
	if frac := float64(w.Drops) / float64(total); frac > d.dropTol {
		d.shrink(d.limit * (1 - frac))
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
		// The probe can only lower the baseline: a probe window that did
		// not drain (or met a slowdown) must not ratchet it up. Raising it
		// takes the drift evidence below.
		d.probing = false
		d.base, d.baseAt = min(d.base, rtt), now
		d.limit = d.saved
		d.endEpisode()
		return int(d.limit)
	}
	if d.base == 0 {
		d.base, d.baseAt = rtt, now
	} else if rtt < d.base {
		// A soft minimum: a single low window (noise) pulls the baseline
		// down by half the gap, not all the way; a drop beyond the
		// tolerance is no noise (capacity came back) and is taken whole.
		if rtt*d.tolerance < d.base {
			d.base = rtt
		} else {
			d.base += (rtt - d.base) / 2
		}
		d.baseAt = now
	} else if now-d.baseAt > d.horizon {
		d.probing = true
		d.saved = d.limit
		d.limit = d.bound(math.Ceil(d.limit * 0.75))
		return int(d.limit)
	}
	if d.maxHealthy > 0 && rtt > d.maxHealthy {
		d.shrink(d.limit * d.maxHealthy / rtt)
		return int(d.limit)
	}
	if float64(w.MaxInflight) < used/2 {
		// The limit did not bind: this window says nothing about it.
		d.endEpisode()
		return int(d.limit)
	}
	x, inflight := w.Throughput(), w.AvgInflight()
	// The queueing allowance scales with the geometric mean of the baseline
	// and the healthy latency (the anchor: the lowest baseline, following a
	// higher one only over minutes): a slower service gets a somewhat
	// longer queue, not a proportionally longer one.
	if d.anchor == 0 || d.base < d.anchor {
		d.anchor = d.base
	} else {
		d.anchor += (d.base - d.anchor) / 1024
	}
	// The conversion stops a fused multiply-add: same limits everywhere.
	g := (d.base + float64((d.tolerance-1)*math.Sqrt(d.base*d.anchor))) / rtt
	if g >= 1 {
		d.endEpisode()
		if float64(w.MaxInflight) < d.headroom*used {
			// Room left: growing would only widen the door for a queue.
			return int(d.limit)
		}
		d.streak = growing
		if d.prevInflight > 0 && inflight > 1.25*d.prevInflight && x < 1.05*d.prevX {
			d.shrink(max(d.limit*0.9, d.prevInflight*d.tolerance))
			return int(d.limit)
		}
		// Growth accelerates while it goes unpunished: +1, +2, +4... per
		// window (at most +50%), back to +1 after any other step, so the
		// limit creeps near its equilibrium and races when far below it.
		next := d.limit + min(math.Ldexp(1, d.streak), max(1, d.limit/2))
		d.streak = min(d.streak+1, 30)
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
	// Latency is above tolerance. Is it queueing? Not if, within this
	// shrinking episode (the windows since latency went above tolerance),
	// the shrinks cost throughput without lowering latency.
	d.epLimit, d.epX = max(d.epLimit, used), max(d.epX, x)
	shrankInVain := used <= 0.85*d.epLimit && x <= 0.85*d.epX && rtt >= 0.95*d.prevRTT
	atFloor := int(used) <= d.min && d.prevLimit > 0 && int(d.prevLimit) <= d.min
	if shrankInVain || atFloor {
		d.drift++
		if d.drift >= 2 {
			// Undo the shrinks that cost throughput without lowering
			// latency, and trust the latency as it is now.
			d.base, d.baseAt = rtt, now
			d.limit = d.bound(max(d.limit, 0.85*d.epLimit))
			d.endEpisode()
			return int(d.limit)
		}
	} else {
		d.drift = 0
	}
	if g >= 0.5 {
		// Mildly above tolerance: halfway to L*g. Latency is a soft signal
		// (a slower service looks the same as a queue for a few windows),
		// so moderate gradients shrink gently; a blown-up latency
		// (g < 0.5) shrinks at once.
		g = (1 + g) / 2
	}
	d.shrink(d.limit * g)
	return int(d.limit)
}
