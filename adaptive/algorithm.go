package adaptive

// Algorithm computes a concurrency limit from windows of samples.
//
// Implementations are pure: no clock reads, no goroutines, no I/O; the
// result depends only on the windows seen so far. They are not safe for
// concurrent use: a Limiter calls Update from one goroutine at a time (at a
// window boundary), and the simulator from its single event loop.
type Algorithm interface {
	// Limit returns the current limit, always within the algorithm's bounds.
	Limit() int
	// Update folds one window into the state and returns the new limit.
	Update(w Window) int
}
