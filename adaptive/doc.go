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
// three rounds) Default kept goodput at 0.99 of capacity at 5x and 10x
// with a p99 of 42 and 49ms (unloaded 24ms; with the former initial limit
// of 20, 79 and 71ms; failsafe-go's adaptive limiter in the same run 72
// and 161ms). A CPU-bound endpoint on few cores never holds more requests
// than cores, so no concurrency limit binds: the latency the Limiter times
// stays flat while the queue grows in the Go run queue and the sockets, in
// front of any middleware. Only the scheduling delay sees that queue, and
// only shedding a share of the arrivals acts on it: Default's scheduling
// target, on by default (WithoutSchedulingSignal turns it off; the signal
// is the whole process's, so a CPU hog elsewhere in it sheds requests
// too). On one core over HTTP/1.1, over three runs of three rounds on a
// shared, busy machine, the median at 5x was goodput 0.49 of capacity
// with a p99 of 227ms, at 10x 0.58 with 731ms (the best run 207 and
// 171ms, the worst 873 and 996ms), where every peer and a static limit of
// one shed nothing and answered at 0.8 to 1s; at 2x, in the run with the
// fairest calibration, it kept 0.80 with a p99 of 155ms. A rejection still costs the server 76 to 140 µs of CPU on a
// kept-alive connection and 110 to 190 µs on a new one, so four or nine
// rejections per admitted request take much of a core before any handler
// runs, and whatever else takes the core tips it over.
package adaptive
