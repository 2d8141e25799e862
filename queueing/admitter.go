package queueing

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

// limitReader is what reserves and partitions need besides Admitter: the
// limit in force, read at every decision so that an adaptive limit is
// followed.
type limitReader interface {
	Limit() int64
}
