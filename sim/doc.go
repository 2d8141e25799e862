// Package sim is a deterministic discrete-event simulator of a server under
// load, in virtual time, for measuring admission controllers on identical
// traffic.
//
// A Scenario describes the server (workers, service-time distribution,
// capacity changes over time, latency added by a slow dependency that does
// not hold a worker) and its clients (open-loop Poisson or bursty arrivals,
// per-request deadlines, priorities, retries with or without a budget). Run
// drives any Controller through it and returns a Result: goodput (work
// completed within the client's deadline, per second and as a fraction of
// true capacity), latency percentiles of admitted work, shed rate, the limit
// over time and the time to settle after a change.
//
// Randomness comes from seeded PCG streams (math/rand/v2), one per purpose,
// so the same seed gives the same numbers on any machine, and the traffic
// does not depend on the controller's decisions (except for retries, which
// are the controller's consequence).
//
// The adaptive package's Limiter runs here unchanged: AdaptiveController
// drives it through TryAcquireAt and Token.DoneAt with virtual time, so the
// code measured is the code shipped.
//
// What virtual time cannot model: CPU contention. A simulated request holds
// a worker, not a CPU, and no goroutine waits to be scheduled, so the Go
// runtime's signals (the scheduling delay that adaptive.Default sheds by on
// a CPU-bound server) are the simulator process's own, not the simulated
// server's. The standard "sluice" controller therefore runs Default with
// adaptive.WithoutSchedulingSignal (which also turns its per-request queue
// bound off: a simulated request reaches the Limiter when it arrives, so
// adaptive.Request.Queued, its wait in front of the handler, would always
// be zero), and with the initial limit of 20 that every algorithm gets
// here. How Default protects a CPU-bound endpoint is measured out of
// process, by bench's cmd/overload.
//
// The queueing disciplines (NewQueue, StandardQueue: fifo, lifo, codel,
// adaptive_lifo_codel, priority) make requests wait in front of a fixed
// limit. Their admission, reserve, CoDel and length cut-off are the
// queueing package's own code run in virtual time; only the line of
// waiters is modelled here, since queueing keeps its own inside the
// blocking Queue. Reports of waiting controllers add the p99 wait of served
// work, and scenarios with critical and sheddable traffic the goodput of
// each class.
package sim
