package queueing

// waitState is where a waiter stands; it changes only under the queue lock.
type waitState uint8

const (
	queued waitState = iota
	granted
	shed
)

// lane is who is asking: a priority, a partition index (-1: none) and,
// in a fair-share queue, a tenant (its hashed name) and its weight (0:
// made without Lane.Tenant, weighs 1).
type lane struct {
	prio   Priority
	part   int
	tenant uint64
	weight int64
}

// waiter is one blocked Acquire. ready receives exactly one value, sent
// under the queue lock when the waiter is granted or shed by someone else.
type waiter struct {
	prev, next *waiter
	b          *bucket
	n          int64
	lane       lane
	enq        int64
	state      waitState
	err        error
	ready      chan struct{}
	// In a fair-share queue: the waiter's tenant, its place among the
	// tenant's waiters, and its arrival number.
	t            *tenant
	tprev, tnext *waiter
	seq          uint64
}

// bucket holds the waiters of one priority in arrival order (head oldest).
type bucket struct {
	prio       Priority
	head, tail *waiter
	len        int
	units      int64
}

// line is the set of waiters: buckets sorted by priority, highest first.
// Empty buckets are dropped on the next push, never while a caller may be
// iterating, so iteration can remove the waiter it stands on.
type line struct {
	buckets []*bucket
	len     int
	units   int64
}

func (l *line) push(w *waiter) {
	l.compact()
	i := 0
	for i < len(l.buckets) && l.buckets[i].prio > w.lane.prio {
		i++
	}
	if i == len(l.buckets) || l.buckets[i].prio != w.lane.prio {
		l.buckets = append(l.buckets, nil)
		copy(l.buckets[i+1:], l.buckets[i:])
		l.buckets[i] = &bucket{prio: w.lane.prio}
	}
	b := l.buckets[i]
	w.b, w.prev, w.next = b, b.tail, nil
	if b.tail != nil {
		b.tail.next = w
	} else {
		b.head = w
	}
	b.tail = w
	b.len++
	b.units += w.n
	l.len++
	l.units += w.n
}

func (l *line) remove(w *waiter) {
	b := w.b
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		b.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		b.tail = w.prev
	}
	w.prev, w.next, w.b = nil, nil, nil
	b.len--
	b.units -= w.n
	l.len--
	l.units -= w.n
}

func (l *line) compact() {
	j := 0
	for _, b := range l.buckets {
		if b.len > 0 {
			l.buckets[j] = b
			j++
		}
	}
	clear(l.buckets[j:])
	l.buckets = l.buckets[:j]
}

// last returns the waiter that would be served last, or nil: of the
// lowest priority, the newest, or the oldest when lifo.
func (l *line) last(lifo bool) *waiter {
	for i := len(l.buckets) - 1; i >= 0; i-- {
		if b := l.buckets[i]; b.len > 0 {
			if lifo {
				return b.head
			}
			return b.tail
		}
	}
	return nil
}

// unitsAhead returns the units queued ahead of a new arrival of priority p:
// those of higher priority, plus those of equal priority unless lifo.
func (l *line) unitsAhead(p Priority, lifo bool) int64 {
	var u int64
	for _, b := range l.buckets {
		if b.prio > p || (b.prio == p && !lifo) {
			u += b.units
		}
	}
	return u
}

// each calls f on every waiter in service order (by priority, then oldest
// first, or newest first when lifo) until f returns false. f may remove the
// waiter it is given.
func (l *line) each(lifo bool, f func(*waiter) bool) {
	for _, b := range l.buckets {
		if lifo {
			for w := b.tail; w != nil; {
				prev := w.prev
				if !f(w) {
					return
				}
				w = prev
			}
			continue
		}
		for w := b.head; w != nil; {
			next := w.next
			if !f(w) {
				return
			}
			w = next
		}
	}
}
