package queueing

import "sync/atomic"

// Admitter is the admission primitive a Queue waits on. TryAcquire admits n
// units if they fit right now and never blocks; Release gives back n units
// acquired earlier. *concurrency.Semaphore satisfies it, as do the sharded
// semaphore and the adaptive limiter. Implementations must be safe for
// concurrent use.
type Admitter interface {
	TryAcquire(n int64) bool
	Release(n int64)
}

// capacityNotifier is the optional hook of an Admitter: f is called after
// every release and every limit increase, so that the queue can wake its
// next waiter when capacity frees up outside it (a limit increase, a release
// made directly on the Admitter). Without it, only releases made through the
// Queue wake waiters.
type capacityNotifier interface {
	OnCapacity(f func()) error
}

// gatedNotifier is the hook in the form the Queue prefers: the Admitter
// reads the queue's waiter count itself after a release and calls f only
// when it is not zero, so that a release with nobody waiting costs one load
// instead of a call (concurrency.Semaphore.OnCapacityWhile).
type gatedNotifier interface {
	OnCapacityWhile(waiting *atomic.Int64, f func()) error
}

// limitReader is what reserves and partitions need besides Admitter: the
// limit in force, read at every decision so that an adaptive limit is
// followed.
type limitReader interface {
	Limit() int64
}
