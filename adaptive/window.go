package adaptive

import "time"

// Window is the aggregate of the samples of one sampling window: what an
// Algorithm sees. It is a plain value.
type Window struct {
	// Start and End bound the window, in monotonic nanoseconds.
	Start, End int64
	// Count is the number of Success samples.
	Count int
	// Drops is the number of Dropped outcomes: timeouts, deadline errors and
	// work abandoned because of overload.
	Drops int
	// StaleDrops counts drops of work admitted before the limit last
	// decreased: that decrease already answered them (one reduction per
	// round trip, as in TCP), so algorithms do not count them again.
	StaleDrops int
	// Shed is the number of admissions the Limiter shed during the
	// window: at random (Shedder) or because they waited past the queue
	// bound (QueueBounder).
	Shed int
	// ShedByWait is the part of Shed that had waited past the queue bound.
	ShedByWait int
	// RTT is the chosen latency statistic (a percentile, see WithPercentile)
	// of the Success samples; zero when Count is zero.
	RTT time.Duration
	// MinRTT is the smallest Success latency of the window.
	MinRTT time.Duration
	// MeanRTT is the mean Success latency of the window.
	MeanRTT time.Duration
	// MaxInflight is the largest inflight count seen at an admission during
	// the window.
	MaxInflight int
	// Runtime holds Go runtime signals when the Limiter reads them (see
	// WithRuntimeSignals); zero otherwise.
	Runtime RuntimeSignals
}

// Duration returns End-Start as a time.Duration.
func (w Window) Duration() time.Duration { return time.Duration(w.End - w.Start) }

// Throughput returns the Success samples per second over the window; zero
// for an empty or instantaneous window.
func (w Window) Throughput() float64 {
	d := w.End - w.Start
	if d <= 0 {
		return 0
	}
	return float64(w.Count) * 1e9 / float64(d)
}

// AvgInflight returns the time-averaged number of Success requests in
// flight over the window, by Little's law (throughput times mean latency).
func (w Window) AvgInflight() float64 {
	return w.Throughput() * w.MeanRTT.Seconds()
}

// RuntimeSignals are Go runtime measurements taken at a window boundary.
// The zero value means "not measured".
type RuntimeSignals struct {
	// SchedLatency is the 99th percentile of the time goroutines waited to
	// run since the previous window (runtime/metrics /sched/latencies:seconds).
	SchedLatency time.Duration
	// SchedMean is the mean of the same waits (each at the middle of its
	// histogram bucket): with one P, how long the work that became ready
	// waited behind the rest, the queue in front of the code that the
	// Limiter's samples time. Less noisy than a tail over the few hundred
	// waits of a window.
	SchedMean time.Duration
	// GCFraction is the fraction of CPU time spent in the garbage collector
	// since the previous window, in [0, 1].
	GCFraction float64
	// HeapFraction is the memory the Go runtime holds, as GOMEMLIMIT counts
	// it (mapped minus released), over that soft limit; zero when no limit
	// is set.
	HeapFraction float64
}
