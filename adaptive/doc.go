// Package adaptive finds a concurrency limit from what the service
// experiences, and enforces it.
//
// An Algorithm turns the aggregate of one sampling Window (latency
// percentile, minimum latency, throughput, inflight, drops) into a new limit.
// Algorithms are pure: they read no clock, start no goroutine and keep only
// their own small state, so the same code runs in real time, in the virtual
// time of the sim package and in tests. Four are provided: AIMD, Vegas (with
// slow start), Gradient2 (with its two published defects fixed) and Default,
// sluice's own controller, which guards a latency gradient with an absolute
// latency ceiling, baseline drift detection, throughput-versus-inflight
// evidence, drops as first-class signals and optional Go runtime signals.
//
// A Limiter applies an Algorithm to a concurrency.Semaphore. Acquire returns a
// Token whose Done reports the outcome exactly once; samples are aggregated
// with atomics and the Algorithm is stepped once per window. Every decision
// method has an ...At form that takes now as int64 monotonic nanoseconds; the
// short forms read the clock once and are shorthand for them. Constructors
// reject NaN, infinite, zero and negative parameters with an error whose text
// starts with "adaptive:"; nothing is silently clamped.
package adaptive
