package adaptive

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

// Option configures an Algorithm constructor. Each constructor accepts only
// the options that mean something to it and returns an error for the others,
// so that a setting is never silently ignored.
type Option interface {
	apply(*config) error
}

type optionBit uint32

const (
	optInitial optionBit = 1 << iota
	optLimits
	optBackoff
	optTimeout
	optTolerance
	optSmoothing
	optQueueSize
	optMaxHealthy
	optBaselineHorizon
	optProbeMultiplier
	optSeed
	optRuntime
	optDropTolerance
	optSchedTarget
)

var optionNames = map[optionBit]string{
	optInitial:         "WithInitialLimit",
	optLimits:          "WithLimits",
	optBackoff:         "WithBackoff",
	optTimeout:         "WithTimeout",
	optTolerance:       "WithTolerance",
	optSmoothing:       "WithSmoothing",
	optQueueSize:       "WithQueueSize",
	optMaxHealthy:      "WithMaxHealthyLatency",
	optBaselineHorizon: "WithBaselineHorizon",
	optProbeMultiplier: "WithProbeMultiplier",
	optSeed:            "WithSeed",
	optRuntime:         "WithRuntimeThresholds",
	optDropTolerance:   "WithDropTolerance",
	optSchedTarget:     "WithSchedulingTarget",
}

type config struct {
	set             optionBit
	initial         int
	min, max        int
	backoff         float64
	timeout         time.Duration
	tolerance       float64
	smoothing       float64
	queueSize       int
	maxHealthy      time.Duration
	baselineHorizon time.Duration
	probeMultiplier int
	seed            uint64
	schedMax        time.Duration
	gcMax           float64
	heapMax         float64
	dropTolerance   float64
	schedTarget     time.Duration // zero: no shedding by scheduling delay
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

func mark(bit optionBit, f func(*config) error) Option {
	return optionFunc(func(c *config) error {
		c.set |= bit
		return f(c)
	})
}

// build applies opts over defaults and checks that only allowed options were
// given and that the limits are consistent.
func build(name string, defaults config, allowed optionBit, opts []Option) (config, error) {
	c := defaults
	c.set = 0
	for _, o := range opts {
		if o == nil {
			return c, fmt.Errorf("adaptive: %s: nil option", name)
		}
		if err := o.apply(&c); err != nil {
			return c, err
		}
	}
	if bad := c.set &^ allowed; bad != 0 {
		for bit := optionBit(1); bit <= optSchedTarget; bit <<= 1 {
			if bad&bit != 0 {
				return c, fmt.Errorf("adaptive: %s does not use %s", name, optionNames[bit])
			}
		}
	}
	if c.set&optInitial == 0 {
		c.initial = min(max(defaults.initial, c.min), c.max)
	}
	if c.initial < c.min || c.initial > c.max {
		return c, fmt.Errorf("adaptive: %s: initial limit %d outside [%d, %d]", name, c.initial, c.min, c.max)
	}
	return c, nil
}

// positive is an option that sets the field of config that at returns to
// v, which must be positive.
func positive[T int | time.Duration](bit optionBit, what string, v T, at func(*config) *T) Option {
	return mark(bit, func(c *config) error {
		if v <= 0 {
			return fmt.Errorf("adaptive: %s must be positive, got %v", what, v)
		}
		*at(c) = v
		return nil
	})
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// WithInitialLimit sets the limit before the first window. It must be
// positive and within the bounds of WithLimits.
func WithInitialLimit(n int) Option {
	return positive(optInitial, "initial limit", n, func(c *config) *int { return &c.initial })
}

// WithLimits bounds the limit to [lo, hi]; 1 <= lo <= hi <=
// concurrency.MaxSemaphoreLimit (the Limiter's semaphore holds no more).
func WithLimits(lo, hi int) Option {
	return mark(optLimits, func(c *config) error {
		if lo <= 0 || hi < lo {
			return fmt.Errorf("adaptive: limits must satisfy 1 <= min <= max, got [%d, %d]", lo, hi)
		}
		if int64(hi) > concurrency.MaxSemaphoreLimit {
			return fmt.Errorf("adaptive: max limit %d is above the supported %d", hi, int64(concurrency.MaxSemaphoreLimit))
		}
		c.min, c.max = lo, hi
		return nil
	})
}

// WithBackoff sets the multiplicative decrease applied on a congestion
// signal (AIMD: on a drop or a timeout), in (0, 1).
func WithBackoff(ratio float64) Option {
	return mark(optBackoff, func(c *config) error {
		if !finite(ratio) || ratio <= 0 || ratio >= 1 {
			return fmt.Errorf("adaptive: backoff must be in (0, 1), got %v", ratio)
		}
		c.backoff = ratio
		return nil
	})
}

// WithTimeout makes a window latency above d count as a drop (AIMD).
func WithTimeout(d time.Duration) Option {
	return positive(optTimeout, "timeout", d, func(c *config) *time.Duration { return &c.timeout })
}

// WithTolerance sets how far latency may rise above its baseline, as a
// ratio >= 1, before the limit shrinks (Gradient2: 1.5; Default: 1.25).
func WithTolerance(ratio float64) Option {
	return mark(optTolerance, func(c *config) error {
		if !finite(ratio) || ratio < 1 {
			return fmt.Errorf("adaptive: tolerance must be a finite ratio >= 1, got %v", ratio)
		}
		c.tolerance = ratio
		return nil
	})
}

// WithSmoothing sets the weight of a new limit against the old one, in (0, 1]
// (Gradient2: 0.2; Vegas: 1).
func WithSmoothing(s float64) Option {
	return mark(optSmoothing, func(c *config) error {
		if !finite(s) || s <= 0 || s > 1 {
			return fmt.Errorf("adaptive: smoothing must be in (0, 1], got %v", s)
		}
		c.smoothing = s
		return nil
	})
}

// WithQueueSize sets Gradient2's growth allowance per window (default 4).
func WithQueueSize(n int) Option {
	return positive(optQueueSize, "queue size", n, func(c *config) *int { return &c.queueSize })
}

// WithMaxHealthyLatency sets an absolute latency ceiling (Default): while the
// window latency is above d the limit shrinks, whatever the baseline says.
func WithMaxHealthyLatency(d time.Duration) Option {
	return positive(optMaxHealthy, "max healthy latency", d, func(c *config) *time.Duration { return &c.maxHealthy })
}

// WithBaselineHorizon sets how long a latency baseline is trusted before
// Default probes for a fresh one (default 10s).
func WithBaselineHorizon(d time.Duration) Option {
	return positive(optBaselineHorizon, "baseline horizon", d, func(c *config) *time.Duration { return &c.baselineHorizon })
}

// WithProbeMultiplier sets Vegas's no-load latency re-probe period, in
// samples per unit of limit (default 30: re-probe about every 30*L samples).
func WithProbeMultiplier(n int) Option {
	return positive(optProbeMultiplier, "probe multiplier", n, func(c *config) *int { return &c.probeMultiplier })
}

// WithSeed seeds the deterministic jitter of probe schedules.
func WithSeed(seed uint64) Option {
	return mark(optSeed, func(c *config) error {
		c.seed = seed
		return nil
	})
}

// WithRuntimeThresholds makes Default treat Go runtime signals (see
// RuntimeSignals) as congestion when the scheduler latency exceeds sched,
// the GC CPU fraction exceeds gc, or the heap exceeds heap of GOMEMLIMIT.
// gc and heap are in (0, 1]. The Limiter reads the signals for Default
// unless it has WithoutSchedulingSignal (then only with WithRuntimeSignals).
func WithRuntimeThresholds(sched time.Duration, gc, heap float64) Option {
	return mark(optRuntime, func(c *config) error {
		if sched <= 0 {
			return fmt.Errorf("adaptive: scheduler latency threshold must be positive, got %v", sched)
		}
		if !finite(gc) || gc <= 0 || gc > 1 || !finite(heap) || heap <= 0 || heap > 1 {
			return fmt.Errorf("adaptive: GC and heap thresholds must be in (0, 1], got %v and %v", gc, heap)
		}
		c.schedMax, c.gcMax, c.heapMax = sched, gc, heap
		return nil
	})
}

// WithDropTolerance sets the fraction of dropped requests in a window that
// Default tolerates before it backs off, in [0, 1) (default 0.01).
func WithDropTolerance(f float64) Option {
	return mark(optDropTolerance, func(c *config) error {
		if !finite(f) || f < 0 || f >= 1 {
			return fmt.Errorf("adaptive: drop tolerance must be in [0, 1), got %v", f)
		}
		c.dropTolerance = f
		return nil
	})
}

// WithSchedulingTarget sets the scheduling delay that Default keeps the Go
// scheduler under by shedding a share of admissions at random (see
// Default); it must be positive. Default's default is 20ms.
func WithSchedulingTarget(d time.Duration) Option {
	return positive(optSchedTarget, "scheduling target", d, func(c *config) *time.Duration { return &c.schedTarget })
}

// WithoutSchedulingSignal turns off Default's shedding by scheduling delay
// and its reading of the Go runtime, for simulations (the runtime is the
// real process's, not the simulated one's) and for code that must decide
// only from its own samples. WithRuntimeThresholds still applies where the
// Limiter has WithRuntimeSignals.
func WithoutSchedulingSignal() Option {
	return mark(optSchedTarget, func(c *config) error {
		c.schedTarget = 0
		return nil
	})
}
