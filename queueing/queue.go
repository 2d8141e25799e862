package queueing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/internal/clock"
)

// closedBias is added to nwait by Close so that the lock-free fast paths
// always fall through to the slow path, which sees closed.
const closedBias = 1 << 40

// Queue is bounded waiting over an Admitter. Acquire admits at once when
// the Admitter has room and nobody waits; otherwise the caller joins a
// queue of bounded length and waits, at most until its context ends, its
// max wait passes or a shedding rule (CoDel, priority cut-off, deadline)
// turns it away. A permit released through the queue goes to the next
// eligible waiter under the queue lock, so TryAcquire and Acquire callers
// of the same queue never barge past a waiter, and only the waiter served
// is woken. Callers that use the Admitter directly, outside the queue, can
// still take capacity the instant it is released.
//
// The order among waiters is by priority, then (WithFairShare) the tenant
// that holds least per unit of weight, then FIFO, LIFO or adaptive LIFO
// (WithOrder). With WithReserve or WithPartition a waiter that its
// share does not allow yet is passed over by those behind it (the one
// explicit exception to strict order); otherwise a waiter that does not fit
// blocks those behind it, so large requests are not starved. A request
// larger than the Admitter's whole limit (when it reports one) would block
// them for nothing: it is refused at once with ErrTooLarge. When the
// queue (or the share of it open to a priority, see Share) is full, the
// request that would be served last is shed: the newcomer with
// ErrQueueFull, or, when the last in line has lower priority or the order
// is LIFO at the moment, that waiter with ErrDisplaced. The queue
// re-examines its waiters at every event it sees: an arrival, a release
// through it, a cancellation, a timeout, and, through the capacity hook, a
// release on the Admitter or a limit increase. A limit decrease is not
// signalled; with a reserve or partitions it can change which waiter is
// allowed, and the queue acts on that at its next event.
//
// When the queue is not configured with reserves, partitions or fair share and nobody
// waits, Acquire, TryAcquire and Release take no lock, read no clock and
// allocate nothing: each costs one atomic load on top of the Admitter's own
// call (Acquire also asks its context whether it has ended), and over
// concurrency's semaphores, whose capacity hook is gated by the queue's
// waiter count, the hook costs their Release one more load. An Admitter with
// only the plain OnCapacity hook pays a call per release instead. A waiting
// Acquire allocates its waiter.
//
// A Queue is safe for concurrent use. The zero value is not usable; call
// New. Close sheds the waiters and detaches the queue from the Admitter.
type Queue struct {
	// nwait counts goroutines in the slow path of Acquire plus queued
	// waiters (plus closedBias after Close). Zero lets the fast paths skip
	// the lock. It is raised before a waiter's last admission attempt, and
	// read after every release (by the Admitter's gated hook, the plain
	// hook, or releaseFast): a release that reads zero happened before that
	// attempt, which then sees the units (no lost wake-up).
	nwait atomic.Int64
	// dirty is set by the capacity hook when it could not take the lock;
	// whoever holds the lock grants again after unlocking.
	dirty atomic.Bool

	adm    Admitter
	sem    *concurrency.Semaphore // adm, when it is one: a direct call on the fast path
	lim    limitReader
	locked bool // reserves or partitions: every call takes the lock
	timed  bool // some rule depends on time: read the clock on slow paths
	cfg    config
	hooked bool         // adm calls the queue's capacity hook
	unhook func() error // removes the capacity hook
	def    Lane

	mu      sync.Mutex
	line    line
	codel   *CoDel // standing-queue detector; also sheds when cfg.codel
	rate    drainRate
	blocked *waiter // the waiter that stopped the last grant pass, if any
	low     int64   // units held below cfg.reserveFrom
	parts   []partition
	unpart  int64 // units held outside any partition (with partitions)
	fair    *fairShare
	closed  bool
	stats   Stats
}

// The Semaphore is the Admitter a Queue is built for.
var (
	_ Admitter      = (*concurrency.Semaphore)(nil)
	_ gatedNotifier = (*concurrency.Semaphore)(nil)
	_ gatedNotifier = (*concurrency.ShardedSemaphore)(nil)
	_ limitReader   = (*concurrency.Semaphore)(nil)
)

// Stats is a snapshot of a Queue's counters.
type Stats struct {
	// Waiting is the number of queued waiters.
	Waiting int
	// Granted counts waiters that got a permit after waiting.
	Granted uint64
	// Shed counts requests the queue turned away or dropped (ErrShed);
	// the five counters after it split it by reason.
	Shed uint64
	// QueueFull, TimedOut, Congested, DeadlineRejected and Displaced count
	// ErrQueueFull, ErrTimeout, ErrCongested, ErrDeadline and ErrDisplaced.
	QueueFull, TimedOut, Congested, DeadlineRejected, Displaced uint64
	// Cancelled counts waiters whose context ended while queued.
	Cancelled uint64
	// TooLarge counts requests refused with ErrTooLarge (not shed).
	TooLarge uint64
	// Tenants is the number of tenants a fair-share queue tracks: those
	// that hold units or wait.
	Tenants int
}

// New returns a Queue over adm. When adm has an
// OnCapacityWhile(*atomic.Int64, func()) error method (concurrency's
// Semaphore and ShardedSemaphore have), or else an OnCapacity(func()) error
// method, the queue registers its hook there to wake waiters when capacity
// frees up outside the queue; New returns that method's error, such as
// concurrency.ErrHookInUse. It also returns an error for an invalid option,
// and when WithReserve, WithPartition or WithFairShare is given but adm has
// no Limit() int64 method.
func New(adm Admitter, opts ...Option) (*Queue, error) {
	if adm == nil {
		return nil, fmt.Errorf("queueing: nil Admitter")
	}
	cfg := config{maxLen: DefaultMaxLength}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("queueing: nil Option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	q := &Queue{adm: adm, cfg: cfg}
	q.sem, _ = adm.(*concurrency.Semaphore)
	q.def = Lane{q: q, l: lane{prio: Critical, part: -1}}
	q.lim, _ = adm.(limitReader) // also bounds a request's size (ErrTooLarge)
	if cfg.fair && len(cfg.partitions) > 0 {
		return nil, errors.New("queueing: fair share and partitions do not combine; give each tenant a weight instead")
	}
	if cfg.reserve > 0 || len(cfg.partitions) > 0 || cfg.fair {
		if q.lim == nil {
			return nil, fmt.Errorf("queueing: reserves, partitions and fair share need an Admitter with Limit() int64, %T has none", adm)
		}
		q.locked = true
		if cfg.fair {
			q.fair = newFairShare()
		}
		for _, p := range cfg.partitions {
			q.parts = append(q.parts, partition{name: p.name, fraction: p.fraction})
		}
	}
	if cfg.codel || cfg.order == AdaptiveLIFO {
		target, interval := DefaultTarget, DefaultInterval
		if cfg.codel {
			target, interval = cfg.target, cfg.interval
		}
		q.codel, _ = NewCoDel(target, interval) // validated by WithCoDel
	}
	q.timed = q.codel != nil || cfg.maxWait > 0 || cfg.deadlineAware
	var err error
	switch a := adm.(type) {
	case gatedNotifier:
		// The Admitter checks nwait after each release: a release with
		// nobody waiting pays one load, no call.
		err = a.OnCapacityWhile(&q.nwait, q.kick)
		q.unhook = func() error { return a.OnCapacityWhile(nil, nil) }
	case capacityNotifier:
		err = a.OnCapacity(func() {
			if q.nwait.Load() != 0 {
				q.kick()
			}
		})
		q.unhook = func() error { return a.OnCapacity(nil) }
	}
	if err != nil {
		return nil, fmt.Errorf("queueing: registering the capacity hook: %w", err)
	}
	q.hooked = q.unhook != nil
	return q, nil
}

// Acquire waits for n units at priority Critical outside any partition; it
// is shorthand for the default Lane's Acquire. See Lane.Acquire.
func (q *Queue) Acquire(ctx context.Context, n int64) error {
	// The fast path, with the Semaphore's TryAcquire inlined; everything
	// else in Lane. Nested ifs, not one && chain: the compiler then knows
	// n > 0 inside and drops the inlined TryAcquire's panic branch
	// (Acquire plus Release measured about 8% faster).
	if n > 0 {
		if !q.locked && q.nwait.Load() == 0 {
			if ctx.Err() == nil {
				if s := q.sem; s != nil {
					if s.TryAcquire(n) {
						return nil
					}
				} else if q.adm.TryAcquire(n) {
					return nil
				}
			}
		}
	}
	return q.def.Acquire(ctx, n)
}

// TryAcquire admits n units at priority Critical if that is possible
// without waiting; see Lane.TryAcquire.
func (q *Queue) TryAcquire(n int64) bool {
	if n > 0 {
		if !q.locked && q.nwait.Load() == 0 {
			if s := q.sem; s != nil {
				return s.TryAcquire(n)
			}
			return q.adm.TryAcquire(n)
		}
	}
	return q.def.TryAcquire(n)
}

// Release gives back n units taken with Acquire or TryAcquire; see
// Lane.Release.
func (q *Queue) Release(n int64) {
	if n > 0 && !q.locked && q.nwait.Load() == 0 {
		if q.sem != nil {
			q.sem.Release(n) // its gated hook serves a waiter that came since
			return
		}
		q.releaseFast(n)
		return
	}
	q.def.Release(n)
}

// tryAdm calls the Semaphore directly when adm is one, sparing the fast
// path an interface call.
func (q *Queue) tryAdm(n int64) bool {
	if q.sem != nil {
		return q.sem.TryAcquire(n)
	}
	return q.adm.TryAcquire(n)
}

// releaseAdm is tryAdm's counterpart.
func (q *Queue) releaseAdm(n int64) {
	if q.sem != nil {
		q.sem.Release(n)
		return
	}
	q.adm.Release(n)
}

// releaseFast gives n units straight back to the Admitter, for a caller
// that found nobody waiting. A waiter that arrived since then raised nwait
// before its last admission attempt; if that attempt missed these units,
// the load of nwait after the release sees it and serves it: the
// Admitter's hook makes that load, or, without a hook, releaseFast does.
func (q *Queue) releaseFast(n int64) {
	q.releaseAdm(n)
	if !q.hooked && q.nwait.Load() != 0 {
		q.kick()
	}
}

// Len returns the number of queued waiters.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.line.len
}

// Stats returns a snapshot of the queue's counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	s.Waiting = q.line.len
	if q.fair != nil {
		s.Tenants = len(q.fair.tenants)
	}
	return s
}

// Close sheds every queued waiter with ErrClosed, makes later Acquire calls
// return ErrClosed and TryAcquire calls fail, and removes the queue's
// capacity hook from the Admitter. Release keeps working, so permits held
// across Close can still be given back. Close is idempotent.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.nwait.Add(closedBias)
	now := q.now()
	q.line.each(false, func(w *waiter) bool {
		q.dropLocked(w, now, ErrClosed)
		return true
	})
	q.mu.Unlock()
	if q.hooked {
		return q.unhook()
	}
	return nil
}

// countShedLocked books one request shed with err.
func (q *Queue) countShedLocked(err error) {
	q.stats.Shed++
	switch err {
	case ErrQueueFull:
		q.stats.QueueFull++
	case ErrTimeout:
		q.stats.TimedOut++
	case ErrCongested:
		q.stats.Congested++
	case ErrDeadline:
		q.stats.DeadlineRejected++
	case ErrDisplaced:
		q.stats.Displaced++
	}
}

// kick is the capacity hook, called when someone waits: it runs on the
// goroutine that released capacity, must not block, and so only try-locks. When the lock is busy it
// leaves dirty set, and the holder grants again after unlocking.
func (q *Queue) kick() {
	q.dirty.Store(true)
	q.drain()
}

// now reads the clock when a rule needs the time, and returns 0 otherwise:
// a clock read can cost more than the whole grant.
func (q *Queue) now() int64 {
	if q.timed {
		return clock.Now()
	}
	return 0
}

// unlock releases the lock and serves any capacity signalled meanwhile.
func (q *Queue) unlock() {
	q.mu.Unlock()
	if q.dirty.Load() {
		q.drain()
	}
}

// drain grants while capacity signals are pending and the lock is free. A
// signal raised while someone else holds the lock is seen by that holder's
// unlock, because the signal is stored before the failed TryLock and the
// holder loads it after its Unlock.
func (q *Queue) drain() {
	for q.dirty.Load() {
		if !q.mu.TryLock() {
			return
		}
		q.grantLocked(q.now())
		q.mu.Unlock()
	}
}
