package store

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Lease IDs of the memory store: bit 63 marks a lease on the limit's shared
// overflow state; bits 24..62 are a per-state sequence number (started at a
// random value, so that a lease of an evicted and reused state never matches
// a new one); bits 0..23 index the lease's slot (a state never has more
// slots than MaxLeaseLimit).
const (
	slotBits  = 24
	slotMask  = 1<<slotBits - 1
	sharedBit = uint64(1) << 63
	seqMask   = (sharedBit - 1) &^ slotMask
)

// leaseState is the per-key state of a Concurrency limit in a Memory store:
// the permits held and the live leases, kept in a list ordered by expiry so
// that expired leases are found at its head in O(1).
//
// It takes a mutex: a lease is several words (id, expiry, cost, links) that
// must change together with the permit count, and the expiry order needs a
// list. The lock is per key and held for a few dozen instructions (longer
// only when a rejection computes its RetryAfter, or a call reclaims many
// expired leases at once: both bounded by the limit, the second amortized
// O(1) per lease). Rate limits take no lock.
//
// The zero value is fresh. Slots are allocated as the number of leases held
// at once grows (a slice append, amortized) and kept across Reset, so a key
// in steady state allocates nothing.
type leaseState struct {
	mu       sync.Mutex
	inflight int64 // permits held by live leases
	seq      uint64
	slots    []leaseSlot
	// head and tail of the live list (oldest expiry first) and the head of
	// the free list, as slot index + 1; 0 is none.
	head, tail, free int32
}

type leaseSlot struct {
	id         uint64 // 0 when free
	expires    int64
	cost       int64
	prev, next int32 // index + 1
}

// Reset makes s fresh, keeping its slots. It is called by the table when it
// holds the state exclusively.
func (s *leaseState) Reset() {
	s.mu.Lock()
	s.inflight = 0
	s.slots = s.slots[:0]
	s.head, s.tail, s.free = 0, 0, 0
	s.seq = rand.Uint64()
	s.mu.Unlock()
}

// leaseLimit is a Concurrency spec's configuration.
type leaseLimit struct {
	limit int64
	ttl   int64
}

func (l *leaseLimit) at(s *leaseState, i int32) *leaseSlot { return &s.slots[i-1] }

// unlink removes live slot i from the live list, frees its permits and
// pushes it on the free list.
func (l *leaseLimit) unlink(s *leaseState, i int32) {
	sl := l.at(s, i)
	if sl.prev != 0 {
		l.at(s, sl.prev).next = sl.next
	} else {
		s.head = sl.next
	}
	if sl.next != 0 {
		l.at(s, sl.next).prev = sl.prev
	} else {
		s.tail = sl.prev
	}
	s.inflight -= sl.cost
	*sl = leaseSlot{next: s.free}
	s.free = i
}

// reclaim frees every expired lease, from the head of the list. Each lease
// is reclaimed once, so this is amortized O(1) per acquisition, and one call
// reclaims at most Limit leases (the most a key holds); no sweeper goroutine
// is needed, and Remaining is always exact.
func (l *leaseLimit) reclaim(s *leaseState, now int64) {
	for s.head != 0 && l.at(s, s.head).expires <= now {
		l.unlink(s, s.head)
	}
}

// view reports s at now (under the lock, after reclaim).
func (l *leaseLimit) view(s *leaseState, now int64) ratelimit.Decision {
	// Over a limit lowered by Update, nothing remains.
	d := ratelimit.Decision{Limit: l.limit, Remaining: max(0, l.limit-s.inflight)}
	if s.tail != 0 {
		d.ResetAfter = time.Duration(max(0, l.at(s, s.tail).expires-now))
	}
	return d
}

// acquire takes cost permits at now as a lease. The lease's ID is 0 when
// cost is 0 (a peek) or the request is rejected.
func (l *leaseLimit) acquire(s *leaseState, now, cost int64, shared bool) (ratelimit.Decision, uint64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.reclaim(s, now)
	d := l.view(s, now)
	switch {
	case cost == 0:
		return d, 0, 0
	case cost > l.limit:
		d.RetryAfter = ratelimit.Never
		return d, 0, 0
	case s.inflight+cost > l.limit:
		// A rejection must carry RetryAfter > 0 (Decision.Allowed is
		// RetryAfter == 0): 1 ns unless the walk below finds the wait.
		d.RetryAfter = 1
		// The wait until enough of the live leases expire, if none is
		// released earlier: walk the list in expiry order.
		free := l.limit - s.inflight
		for i := s.head; i != 0; i = l.at(s, i).next {
			free += l.at(s, i).cost
			if free >= cost {
				d.RetryAfter = time.Duration(max(1, l.at(s, i).expires-now))
				break
			}
		}
		return d, 0, 0
	}
	var i int32
	if s.free != 0 {
		i = s.free
		s.free = l.at(s, i).next
	} else {
		s.slots = append(s.slots, leaseSlot{})
		i = int32(len(s.slots))
	}
	if s.seq == 0 { // a state the table never reset
		s.seq = rand.Uint64()
	}
	s.seq++
	id := s.seq<<slotBits&seqMask | uint64(i-1)
	if id == 0 { // sequence and slot both zero: skip to the next number
		s.seq++
		id = s.seq<<slotBits&seqMask | uint64(i-1)
	}
	if shared {
		id |= sharedBit
	}
	expires := now + l.ttl
	sl := l.at(s, i)
	*sl = leaseSlot{id: id, expires: expires, cost: cost}
	// Insert in expiry order from the tail: callers' now values are nearly
	// increasing, so this is almost always one step.
	p := s.tail
	for p != 0 && l.at(s, p).expires > expires {
		p = l.at(s, p).prev
	}
	sl.prev = p
	if p != 0 {
		sl.next = l.at(s, p).next
		l.at(s, p).next = i
	} else {
		sl.next = s.head
		s.head = i
	}
	if sl.next != 0 {
		l.at(s, sl.next).prev = i
	} else {
		s.tail = i
	}
	s.inflight += cost
	return l.view(s, now), id, expires
}

// release gives back lease id at now and reports whether it was held. An
// expired lease is not held (its permits are reclaimed, if not yet).
func (l *leaseLimit) release(s *leaseState, id uint64, now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := false
	if i := int32(id&slotMask) + 1; int(i) <= len(s.slots) {
		if sl := l.at(s, i); sl.id == id && id != 0 {
			held = sl.expires > now
			l.unlink(s, i)
		}
	}
	l.reclaim(s, now)
	return held
}

// recovered reports whether s holds no live lease at now.
func (l *leaseLimit) recovered(s *leaseState, now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tail == 0 || l.at(s, s.tail).expires <= now
}
