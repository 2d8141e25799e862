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
// evidence, drops as first-class signals, and sheds a share of admissions
// while the Go scheduling delay is high (see Shedder).
//
// A Limiter applies an Algorithm to a concurrency.Semaphore. Acquire returns a
// Token whose Done reports the outcome exactly once; samples are aggregated
// with atomics and the Algorithm is stepped once per window. Every decision
// method has an ...At form that takes now as int64 monotonic nanoseconds; the
// short forms read the clock once and are shorthand for them. Constructors
// reject NaN, infinite, zero and negative parameters with an error whose text
// starts with "adaptive:"; nothing is silently clamped.
//
// # Which signal protects which endpoint
//
// An I/O-bound endpoint (a pool of slots, a slow dependency) queues inside
// the code the Limiter times: its latency rises with inflight, and Default's
// latency gradient finds the limit; since Default starts at its minimum
// limit, its baseline is the unqueued latency. In bench's out-of-process
// benchmark (cmd/overload: 8 slots x 20ms, 1s client deadline, medians of
// three rounds, 2026-12-05) Default kept goodput at 0.99-1.01 of capacity
// at 5x and 10x with a p99 of 41 and 42ms (unloaded 22-24ms), where
// failsafe-go's adaptive limiter had 64 and 65ms.
//
// A CPU-bound endpoint on few cores never holds more requests than
// cores, so no concurrency limit binds: the latency the Limiter times
// stays flat while the queue grows in the Go run queue, the sockets and
// the accept queue, in front of any middleware. Two signals see it.
// Each request's own wait, when the server knows when its bytes arrived
// (Request.Queued: shed's middleware has it behind a connguard.Guard,
// from the kernel's receive timestamps): Default sheds a request that
// waited past its queue bound (2 scheduling targets, 20ms; a quarter of a
// target, 2.5ms, while the bound sheds an overload rather than a burst) at
// once. And the whole process's scheduling delay, without arrival times:
// Default sheds a share of the arrivals while its mean is above the
// scheduling target (10ms), moving the share window by window. Both are on by
// default (WithoutSchedulingSignal turns both off; the delay is the whole
// process's, so a CPU hog elsewhere in it sheds requests too). In the
// same benchmark on one core (1ms of CPU per request, about 900 req/s),
// behind the Guard answering early (below), Default kept goodput 0.97 of
// capacity at 5x and 0.85 at 10x at a p99 of 5ms (the default matrix of
// 2026-12-05 15:29; the day's medians 0.84-0.97 and 0.54-0.88; a p99 of
// 22ms with the 20ms bound alone), where every peer served at a p99 of
// 0.69 to 1s; the middleware alone, on the share only, kept 0.52-0.69 at
// 177-532ms at 5x and collapsed at 10x (0.15-0.39 at 941-973ms). At 10x
// most of the rest is what net/http costs to read and answer each request
// that is shed (30 to 78µs of the server's CPU, as the host's speed
// varied): a quarter to two thirds of the core before any work. With
// connguard.WithEarlyAnswer the Guard answers those requests before
// net/http reads them (Limiter.ShedWaited decides and counts), at a
// fraction of that cost (4 to 38µs): in five interleaved rounds, 0.88
// (0.84-0.94) at 10x against 0.84 (0.52-0.88) without it.
package adaptive
