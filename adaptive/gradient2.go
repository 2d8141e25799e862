package adaptive

// Gradient2 compares a short-term latency (the window's) with a long-term
// one (an exponential moving average over about 600 windows) and scales the
// limit by their ratio.
//
// Rules per window: longRtt is the mean of the first 10 windows, then an EMA
// with factor 2/(600+1); when longRtt/shortRtt > 2, longRtt *= 0.95 (the
// baseline follows a recovery quickly). Inflight under L/2 holds. Otherwise
// g = clamp(tolerance*longRtt/shortRtt, 0.5, 1) and
// L = (1-s)*L + s*(L*g + queueSize) with smoothing s.
//
// Two published defects are fixed. A window with drops is a congestion
// signal (g = 0.5, no allowance) and a dropped request contributes no
// latency sample, so it cannot drag the estimate down. The queueSize
// allowance is added only while shortRtt <= longRtt: under mild overload
// (latency above the baseline but within the tolerance) the original grows
// without bound by s*queueSize per window; here it holds.
//
// Defaults: initial 20, limits [20, 200], smoothing 0.2, tolerance 1.5,
// queue size 4. The zero value is not usable; call NewGradient2. Not safe for
// concurrent use (see Algorithm).
type Gradient2 struct {
	limit     float64
	min, max  int
	smoothing float64
	tolerance float64
	queue     float64
	longRtt   float64
	warm      int
}

var _ Algorithm = (*Gradient2)(nil)

const (
	gradient2Warmup = 10
	gradient2Long   = 600
)

// NewGradient2 returns a Gradient2 algorithm. It accepts WithInitialLimit,
// WithLimits, WithSmoothing, WithTolerance and WithQueueSize.
func NewGradient2(opts ...Option) (*Gradient2, error) {
	c, err := build("Gradient2", config{initial: 20, min: 20, max: 200, smoothing: 0.2, tolerance: 1.5, queueSize: 4},
		optInitial|optLimits|optSmoothing|optTolerance|optQueueSize, opts)
	if err != nil {
		return nil, err
	}
	return &Gradient2{limit: float64(c.initial), min: c.min, max: c.max, smoothing: c.smoothing,
		tolerance: c.tolerance, queue: float64(c.queueSize)}, nil
}

// Limit returns the current limit.
func (g *Gradient2) Limit() int { return int(g.limit) }

// Update applies one window (see the type's rules).
func (g *Gradient2) Update(w Window) int {
	L := g.limit
	var grad, allowance float64
	switch {
	case w.Drops > 0:
		grad = 0.5
	case w.Count == 0:
		return int(L)
	default:
		short := float64(w.RTT)
		if g.warm < gradient2Warmup {
			g.warm++
			g.longRtt += (short - g.longRtt) / float64(g.warm)
		} else {
			g.longRtt += (short - g.longRtt) * 2 / (gradient2Long + 1)
		}
		if g.longRtt/short > 2 {
			g.longRtt *= 0.95
		}
		if float64(w.MaxInflight) < L/2 {
			return int(L)
		}
		grad = min(1, max(0.5, g.tolerance*g.longRtt/short))
		if short <= g.longRtt {
			allowance = g.queue
		}
	}
	// Explicit conversions round each product, so that no platform fuses
	// a multiply-add and every machine computes the same limits.
	next := float64((1-g.smoothing)*L) + float64(g.smoothing*(float64(L*grad)+allowance))
	g.limit = min(float64(g.max), max(float64(g.min), next))
	return int(g.limit)
}
