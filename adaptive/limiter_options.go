package adaptive

import (
	"fmt"
	"github.com/sluicehq/sluice/queueing"
	"time"
)

// LimiterOption configures NewLimiter.
type LimiterOption interface {
	apply(*limiterConfig) error
}

type limiterConfig struct {
	minWindow, maxWindow   time.Duration
	minSamples, maxSamples int
	percentile             float64
	runtime                bool
	queue                  []queueing.Option
}

type limiterOptionFunc func(*limiterConfig) error

func (f limiterOptionFunc) apply(c *limiterConfig) error { return f(c) }

// WithWindow bounds a sampling window in time: it closes once it is at least
// lo old and holds the minimum number of samples, or once it is hi old and
// holds any sample. 0 < lo <= hi. Default 100ms and 1s.
func WithWindow(lo, hi time.Duration) LimiterOption {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if lo <= 0 || hi < lo {
			return fmt.Errorf("adaptive: window must satisfy 0 < min <= max, got [%v, %v]", lo, hi)
		}
		c.minWindow, c.maxWindow = lo, hi
		return nil
	})
}

// WithWindowSamples bounds a sampling window in samples: it needs lo
// samples to close before its maximum age and closes at once with hi.
// 1 <= lo <= hi. Default 10 and 1000.
func WithWindowSamples(lo, hi int) LimiterOption {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if lo <= 0 || hi < lo {
			return fmt.Errorf("adaptive: window samples must satisfy 1 <= min <= max, got [%d, %d]", lo, hi)
		}
		c.minSamples, c.maxSamples = lo, hi
		return nil
	})
}

// WithPercentile chooses the latency statistic of a window (Window.RTT) as
// the p-quantile of its Success samples, 0 < p <= 1. Default 0.5.
func WithPercentile(p float64) LimiterOption {
	return limiterOptionFunc(func(c *limiterConfig) error {
		if !finite(p) || p <= 0 || p > 1 {
			return fmt.Errorf("adaptive: percentile must be in (0, 1], got %v", p)
		}
		c.percentile = p
		return nil
	})
}

// WithRuntimeSignals makes the Limiter read Go runtime signals
// (runtime/metrics: scheduler latency, GC CPU fraction, memory against
// GOMEMLIMIT) at each window boundary and hand them to the Algorithm in
// Window.Runtime. The read costs microseconds, once per window.
//
// Default asks for them itself (for its scheduling target) unless it has
// WithoutSchedulingSignal; the option is for the other algorithms and for
// Default's WithRuntimeThresholds.
//
// Use it, with Default's WithRuntimeThresholds, for CPU-bound servers: when
// requests queue for the CPU in front of the limited code (in the HTTP
// server, in other goroutines), the latency of the limited work never
// reaches the limit, and only the scheduler latency shows the overload.
// bench's OverloadHTTP measures it: on a CPU-bound handler at 5x capacity
// the latency-only limit kept 0.14 of capacity, with runtime signals 0.82 to
// 0.90. Leave it off in simulations: the signals are the real process's.
func WithRuntimeSignals() LimiterOption {
	return limiterOptionFunc(func(c *limiterConfig) error {
		c.runtime = true
		return nil
	})
}

// WithQueue sets the discipline of the queue that Acquire's callers wait
// in (the queueing package's options: order, length, max wait, CoDel,
// deadline awareness, reserves); the default is FIFO, at most
// queueing.DefaultMaxLength waiting. NewLimiter returns the queue's errors
// for invalid options.
func WithQueue(opts ...queueing.Option) LimiterOption {
	return limiterOptionFunc(func(c *limiterConfig) error {
		c.queue = append(c.queue[:len(c.queue):len(c.queue)], opts...)
		return nil
	})
}
