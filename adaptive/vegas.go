package adaptive

import (
	"math"
	"time"
)

// Vegas estimates the queue in front of the service from how far the window
// latency is above the no-load latency, queue = ceil(L*(1 - noload/rtt)), and
// keeps it between alpha = 3*log10(L) and beta = 6*log10(L) (each at least
// 1), growing by beta while the queue is under threshold = log10(L).
//
// Rules per window: a drop gives L - log10(L); inflight under L/2 holds; queue
// <= threshold gives L + beta (L*2 in slow start); queue < alpha gives
// L + log10(L); queue > beta gives L - log10(L). Growth and decrease steps are
// at least 1, so a limit at 1 can recover after load subsides. Slow start
// doubles the limit until the first drop or queue above threshold, which
// fixes the slow ramp of the original. The no-load latency is the smallest
// window latency since the last probe, re-probed about every 30*L samples
// (jittered between 0.5 and 1 times that) by taking the current window's
// latency as the new no-load latency, so that it cannot stay stale for ever.
//
// Defaults: initial 20, limits [1, 1000], smoothing 1. The zero value is not
// usable; call NewVegas. Not safe for concurrent use (see Algorithm).
type Vegas struct {
	limit     float64
	min, max  int
	smoothing float64
	probeMul  int
	noload    time.Duration
	samples   int
	probeAt   int
	slowStart bool
	rng       jitter
}

var _ Algorithm = (*Vegas)(nil)

// NewVegas returns a Vegas algorithm. It accepts WithInitialLimit,
// WithLimits, WithSmoothing, WithProbeMultiplier and WithSeed.
func NewVegas(opts ...Option) (*Vegas, error) {
	c, err := build("Vegas", config{initial: 20, min: 1, max: 1000, smoothing: 1, probeMultiplier: 30},
		optInitial|optLimits|optSmoothing|optProbeMultiplier|optSeed, opts)
	if err != nil {
		return nil, err
	}
	v := &Vegas{limit: float64(c.initial), min: c.min, max: c.max, smoothing: c.smoothing,
		probeMul: c.probeMultiplier, slowStart: true, rng: jitter{c.seed}}
	v.scheduleProbe()
	return v, nil
}

func (v *Vegas) scheduleProbe() {
	v.samples = 0
	v.probeAt = int(float64(v.probeMul) * v.limit * (0.5 + float64(0.5*v.rng.float())))
}

// Limit returns the current limit.
func (v *Vegas) Limit() int { return int(v.limit) }

func log10Floor1(x float64) float64 { return max(1, math.Log10(x)) }

// Update applies one window (see the type's rules).
func (v *Vegas) Update(w Window) int {
	if w.Count == 0 && w.Drops == 0 {
		return int(v.limit)
	}
	if w.Count > 0 {
		v.samples += w.Count
		if v.noload == 0 || w.RTT < v.noload || v.samples >= v.probeAt {
			if v.samples >= v.probeAt {
				v.scheduleProbe()
			}
			v.noload = w.RTT
		}
	}
	L := v.limit
	step := log10Floor1(L)
	alpha, beta, threshold := max(1, 3*math.Log10(L)), max(1, 6*math.Log10(L)), step
	next := L
	switch {
	case w.Drops > 0:
		next = L - step
		v.slowStart = false
	case w.MaxInflight*2 < int(L):
		return int(v.limit)
	default:
		queue := math.Ceil(L * (1 - float64(v.noload)/float64(w.RTT)))
		switch {
		case queue <= threshold:
			if v.slowStart {
				next = 2 * L
			} else {
				next = L + beta
			}
		case queue < alpha:
			v.slowStart = false
			next = L + step
		case queue > beta:
			v.slowStart = false
			next = L - step
		default:
			v.slowStart = false
		}
	}
	next = min(float64(v.max), max(float64(v.min), next))
	// Explicit conversions: no fused multiply-add, the same result everywhere.
	v.limit = min(float64(v.max), max(float64(v.min), float64((1-v.smoothing)*L)+float64(v.smoothing*next)))
	return int(v.limit)
}
