package queueing

import "math"

// grantLocked serves waiters in order while the Admitter has room: expired
// waiters are shed first, a waiter its reserve or partition does not allow
// yet is passed over, and the first allowed waiter that does not fit stops
// the pass (and is remembered in blocked).
func (q *Queue) grantLocked(now int64) {
	// Cleared before looking: a capacity signal raised after this point
	// stays set and is served by the unlock that follows.
	q.dirty.Store(false)
	q.sweepLocked(now)
	q.blocked = nil
	if q.line.len == 0 {
		return
	}
	if q.fair != nil {
		q.grantFairLocked(now)
		return
	}
	q.line.each(q.lifoLocked(now), func(w *waiter) bool {
		if !q.rulesOKLocked(w.lane, w.n) {
			return true
		}
		if !q.tryAdm(w.n) {
			q.blocked = w
			return false
		}
		q.serveLocked(w, now)
		return true
	})
}

// grantFairLocked is grantLocked's pass in a fair-share queue: the
// waiters in fair order (fairShare.next), until the next one does not fit
// (remembered in blocked) or its reserve does not allow it, which then
// holds for every waiter after it too (of its priority or lower).
func (q *Queue) grantFairLocked(now int64) {
	lifo := q.lifoLocked(now)
	for q.line.len > 0 {
		w := q.fair.next(lifo)
		if !q.rulesOKLocked(w.lane, w.n) {
			return
		}
		if !q.tryAdm(w.n) {
			q.blocked = w
			return
		}
		q.serveLocked(w, now)
	}
}

// serveLocked hands w the units the Admitter just gave it.
func (q *Queue) serveLocked(w *waiter, now int64) {
	q.accountLocked(w.lane, w.n)
	q.rate.granted(now, w.n, q.line.len > 1) // before leaving, which may mark it idle
	q.leaveLocked(w, now)
	q.stats.Granted++
	w.state = granted
	w.ready <- struct{}{}
}

// mayPassLocked reports whether a new request of lane l may be admitted
// without waiting, given the waiter that stopped the last grant pass: it
// may unless that waiter would be served before it.
func (q *Queue) mayPassLocked(l lane, now int64) bool {
	b := q.blocked
	if b == nil {
		return true
	}
	if q.fair != nil {
		return q.fair.before(l, b)
	}
	return b.lane.prio < l.prio || (b.lane.prio == l.prio && q.lifoLocked(now))
}

// lifoLocked reports whether the newest waiter of a priority goes first now.
func (q *Queue) lifoLocked(now int64) bool {
	switch q.cfg.order {
	case LIFO:
		return true
	case AdaptiveLIFO:
		return q.codel.Standing(now)
	}
	return false
}

// admitLocked takes n units for lane l if its share and the Admitter allow.
func (q *Queue) admitLocked(l lane, n int64) bool {
	if !q.rulesOKLocked(l, n) || !q.tryAdm(n) {
		return false
	}
	q.accountLocked(l, n)
	return true
}

// expiryLocked returns the instant at which w is shed, and the error it
// gets then; math.MaxInt64 when only its context bounds its wait. With
// CoDel the instant is fixed while w waits (the queue is not empty then);
// the waiter's timer re-reads it all the same when it fires.
func (q *Queue) expiryLocked(w *waiter) (int64, error) {
	at, err := int64(math.MaxInt64), error(nil)
	if q.cfg.maxWait > 0 {
		at, err = addSat(w.enq, int64(q.cfg.maxWait)), ErrTimeout
	}
	if q.cfg.codel {
		if c := q.codel.Deadline(w.enq); c < at {
			at, err = c, ErrCongested
		}
	}
	return at, err
}

// addSat returns a+d for d >= 0, or math.MaxInt64 (never) when the sum is
// past it: a max wait, CoDel interval or pacer slot of centuries means
// never, not an instant wrapped into the past.
func addSat(a, d int64) int64 {
	if a > math.MaxInt64-d {
		return math.MaxInt64
	}
	return a + d
}

// sweepLocked sheds the waiters whose expiry has passed. Every waiter's
// expiry is its arrival plus the same duration, so the oldest of each
// priority go first and the sweep stops at the first one still in time.
func (q *Queue) sweepLocked(now int64) {
	if !q.cfg.codel && q.cfg.maxWait == 0 {
		return
	}
	for _, b := range q.line.buckets {
		for w := b.head; w != nil; {
			next := w.next
			at, err := q.expiryLocked(w)
			if now < at {
				break
			}
			q.dropLocked(w, now, err)
			w = next
		}
	}
}

// leaveLocked takes w out of the line.
func (q *Queue) leaveLocked(w *waiter, now int64) {
	q.line.remove(w)
	if q.fair != nil {
		q.fair.unlink(w)
	}
	q.nwait.Add(-1)
	if q.blocked == w {
		q.blocked = nil
	}
	if q.line.len == 0 {
		if q.codel != nil {
			q.codel.Empty(now)
		}
		q.rate.idle()
	}
}

// dropLocked sheds w with err and wakes it.
func (q *Queue) dropLocked(w *waiter, now int64, err error) {
	q.leaveLocked(w, now)
	if err != ErrClosed {
		q.countShedLocked(err)
	}
	w.state, w.err = shed, err
	w.ready <- struct{}{}
}
