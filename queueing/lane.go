package queueing

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Lane is a way into a Queue with a fixed priority and partition. Permits
// taken through a Lane must be released through a Lane with the same
// priority and partition (any copy of it), so that the queue's reserve and
// partition accounting stays exact. A Lane is a small value, safe for
// concurrent use; its zero value is not usable.
type Lane struct {
	q *Queue
	l lane
}

// Lane returns the way into q for requests of priority p in the named
// partition; partition "" means outside every partition (such requests have
// no guarantee and may only borrow). It returns an error when partition
// names no partition given to New.
func (q *Queue) Lane(p Priority, partition string) (Lane, error) {
	l := lane{prio: p, part: -1}
	if partition != "" {
		l.part = q.partitionIndex(partition)
		if l.part < 0 {
			return Lane{}, fmt.Errorf("queueing: no partition %q", partition)
		}
	}
	return Lane{q: q, l: l}, nil
}

// Priority returns the lane's priority.
func (l Lane) Priority() Priority { return l.l.prio }

// Ahead returns the units waiting that a request arriving through the lane
// now would wait behind: those of higher priority, and of equal priority
// unless the queue serves the newest first. One load when nobody waits.
func (l Lane) Ahead() int64 {
	q := l.q
	if q.nwait.Load() == 0 {
		return 0
	}
	q.mu.Lock()
	defer q.unlock()
	return q.line.unitsAhead(l.l.prio, q.lifoLocked(q.now()))
}

// Acquire takes n units, waiting if need be. It returns nil once the units
// are held; ctx.Err() when ctx ends first; ErrClosed after Close;
// ErrTooLarge at once when n can never be served (above the Admitter's
// limit); or an error matching ErrShed (ErrQueueFull, ErrTimeout,
// ErrCongested, ErrDeadline, ErrDisplaced) when the queue sheds the
// request. On every
// error nothing is held: a permit granted in the same instant the context
// ended is passed on to the next waiter. Acquire(ctx, 0) returns nil at once
// unless ctx has ended; a negative n panics.
func (l Lane) Acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		if n < 0 {
			panic("queueing: Acquire with negative n")
		}
		return ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	q := l.q
	if !q.locked && q.nwait.Load() == 0 && q.tryAdm(n) {
		return nil
	}
	return q.acquireSlow(ctx, l.l, n)
}

// TryAcquire takes n units if that is possible without waiting and without
// passing a waiter that would be served before this request, and reports
// whether it did. It never blocks. TryAcquire(0) returns true; a negative n
// panics.
func (l Lane) TryAcquire(n int64) bool {
	if n <= 0 {
		if n < 0 {
			panic("queueing: TryAcquire with negative n")
		}
		return true
	}
	q := l.q
	if !q.locked && q.nwait.Load() == 0 {
		return q.tryAdm(n)
	}
	q.mu.Lock()
	defer q.unlock()
	if q.closed {
		return false
	}
	now := q.now()
	q.grantLocked(now)
	return q.mayPassLocked(l.l, now) && q.admitLocked(l.l, n)
}

// Release gives back n units held through this lane; they go to the next
// eligible waiter, if any. Releasing more than the lane holds panics (in a
// queue with reserves or partitions; otherwise the Admitter decides).
// Release(0) does nothing.
func (l Lane) Release(n int64) {
	if n <= 0 {
		if n < 0 {
			panic("queueing: Release with negative n")
		}
		return
	}
	q := l.q
	if !q.locked && q.nwait.Load() == 0 {
		q.releaseFast(n) // nobody waits: straight back to the Admitter
		return
	}
	q.mu.Lock()
	defer q.unlock()
	q.accountLocked(l.l, -n)
	// Released and re-acquired for the next waiter under the lock: no queue
	// caller can slip in between, and a limit lowered meanwhile is obeyed.
	q.releaseAdm(n)
	q.grantLocked(q.now())
}

func (q *Queue) acquireSlow(ctx context.Context, l lane, n int64) error {
	q.mu.Lock()
	// Raised before the last admission attempt below: see Queue.nwait.
	q.nwait.Add(1)
	if q.closed {
		q.nwait.Add(-1)
		q.unlock()
		return ErrClosed
	}
	if q.tooLargeLocked(n) {
		q.nwait.Add(-1)
		q.stats.TooLarge++
		q.unlock()
		return ErrTooLarge
	}
	now := q.now()
	q.grantLocked(now)
	if q.mayPassLocked(l, now) && q.admitLocked(l, n) {
		q.nwait.Add(-1)
		q.unlock()
		return nil
	}
	if err := q.joinLocked(ctx, l, n, now); err != nil {
		q.nwait.Add(-1)
		q.countShedLocked(err)
		q.unlock()
		return err
	}
	w := &waiter{n: n, lane: l, enq: now, ready: make(chan struct{}, 1)}
	if q.line.len == 0 {
		if q.codel != nil {
			q.codel.Empty(now)
		}
		q.rate.start(now)
	}
	q.line.push(w)
	if q.fair != nil {
		q.fair.link(w)
	}
	expiry, _ := q.expiryLocked(w)
	q.unlock()
	return q.wait(ctx, w, expiry, now)
}

// tooLargeLocked reports whether a request of n units can never be
// served: above the Admitter's limit, or too many to count with the units
// already queued.
func (q *Queue) tooLargeLocked(n int64) bool {
	return (q.lim != nil && n > q.lim.Limit()) || n > math.MaxInt64-q.line.units
}

// joinLocked decides whether a request that cannot be admitted now may
// wait: the deadline check, then the graded length cut-off, which may
// displace the waiter that would be served last.
func (q *Queue) joinLocked(ctx context.Context, l lane, n int64, now int64) error {
	if q.cfg.deadlineAware {
		if dl, ok := ctx.Deadline(); ok {
			ahead := q.line.unitsAhead(l.prio, q.lifoLocked(now))
			if est, ok := q.rate.wait(ahead); ok && time.Until(dl) < est {
				return ErrDeadline
			}
		}
	}
	if q.line.len < Share(l.prio, q.cfg.maxLen) {
		return nil
	}
	// Full for this priority: whoever would be served last is shed. That
	// is the newcomer, unless a waiter of lower priority exists, or under
	// LIFO the oldest waiter of equal priority (served after the newcomer).
	lifo := q.lifoLocked(now)
	if v := q.line.last(lifo); v != nil && (v.lane.prio < l.prio || (v.lane.prio == l.prio && lifo)) {
		q.dropLocked(v, now, ErrDisplaced)
		return nil
	}
	if q.fair != nil {
		if v := q.fair.victim(l); v != nil {
			q.dropLocked(v, now, ErrDisplaced)
			return nil
		}
	}
	return ErrQueueFull
}

// wait blocks until w is granted or shed, ctx ends or w's expiry passes.
func (q *Queue) wait(ctx context.Context, w *waiter, expiry, now int64) error {
	var timeout <-chan time.Time
	var timer *time.Timer
	if expiry != math.MaxInt64 {
		timer = time.NewTimer(time.Duration(expiry - now))
		defer timer.Stop()
		timeout = timer.C
	}
	for {
		select {
		case <-w.ready:
			return w.err
		case <-ctx.Done():
			q.mu.Lock()
			if w.state == queued {
				now := q.now()
				q.leaveLocked(w, now)
				q.stats.Cancelled++
				q.grantLocked(now) // w may have blocked smaller waiters
				q.unlock()
				return ctx.Err()
			}
			q.unlock()
			<-w.ready // granted or shed in the same instant
			if w.state == granted {
				// Granted as the context ended: pass the permit on.
				Lane{q: q, l: w.lane}.Release(w.n)
				return ctx.Err()
			}
			return w.err
		case <-timeout:
			q.mu.Lock()
			if w.state != queued {
				q.unlock()
				<-w.ready
				return w.err
			}
			now := q.now()
			expiry, err := q.expiryLocked(w)
			if now >= expiry {
				q.leaveLocked(w, now)
				q.countShedLocked(err)
				q.grantLocked(now)
				q.unlock()
				return err
			}
			q.unlock()
			timer.Reset(time.Duration(expiry - now))
		}
	}
}
