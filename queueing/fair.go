package queueing

import (
	"fmt"
	"hash/maphash"
	"math/bits"
)

// MaxWeight is the largest weight a tenant may have in a fair-share queue.
const MaxWeight = 1 << 20

// maxFreeTenants bounds the tenant entries a fair-share queue keeps for
// reuse, so that tenants coming and going do not allocate, nor pin memory
// after a flood of them.
const maxFreeTenants = 256

// fairShare is the tenant table of a queue WithFairShare: one entry per
// tenant that holds units or waits (an entry holding nothing and waiting
// for nothing is indistinguishable from a fresh one, and is dropped). So
// at most one entry per unit held plus one per waiter: the table is
// bounded by the limit and the queue length. All under the queue lock.
type fairShare struct {
	seed    maphash.Seed
	tenants map[uint64]*tenant
	// waiting are the tenants with waiters, in no order: the candidates of
	// a grant.
	waiting []*tenant
	free    []*tenant
	// seq numbers the waiters in arrival order: instants can be equal.
	seq uint64
}

// tenant is one busy tenant: the units it holds through the queue, its
// weight, and its waiters, highest priority first and oldest first within
// a priority.
type tenant struct {
	key        uint64
	weight     int64
	held       int64
	nwait      int
	at         int // index in fairShare.waiting, while nwait > 0
	head, tail *waiter
}

func newFairShare() *fairShare {
	return &fairShare{seed: maphash.MakeSeed(), tenants: make(map[uint64]*tenant)}
}

// Tenant returns the way into q for the same priority and partition as l,
// on behalf of the named tenant with the given weight, for a queue made
// WithFairShare. Units taken through it must be released through a Lane of
// the same tenant and priority. The name is hashed (64 bits, with a seed
// of the queue's own) and not kept: two names whose hashes collide, a
// chance of 2^-64 for a pair, would share one share. Tenant takes no lock
// and allocates nothing.
// It returns an error when q has no fair share, or when weight is not in
// [1, MaxWeight].
func (l Lane) Tenant(name string, weight int) (Lane, error) {
	f := l.q.fair
	if f == nil {
		return Lane{}, fmt.Errorf("queueing: Tenant on a queue without fair share")
	}
	if weight < 1 || weight > MaxWeight {
		return Lane{}, fmt.Errorf("queueing: tenant weight must be in [1, %d], got %d", MaxWeight, weight)
	}
	l.l.tenant, l.l.weight = maphash.String(f.seed, name), int64(weight)
	return l, nil
}

// FairShare reports whether q shares its limit among tenants
// (WithFairShare).
func (q *Queue) FairShare() bool { return q.fair != nil }

// TenantHeld returns the units the named tenant holds through q; 0 for a
// tenant that holds none or a queue without fair share. It is meant for
// tests and metrics.
func (q *Queue) TenantHeld(name string) int64 {
	if q.fair == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if t := q.fair.tenants[maphash.String(q.fair.seed, name)]; t != nil {
		return t.held
	}
	return 0
}

// get returns the entry of l's tenant, made if it has none; the weight of
// the latest request of a tenant stands.
func (f *fairShare) get(l lane) *tenant {
	t := f.tenants[l.tenant]
	if t == nil {
		if n := len(f.free); n > 0 {
			t, f.free = f.free[n-1], f.free[:n-1]
		} else {
			t = new(tenant)
		}
		t.key = l.tenant
		f.tenants[l.tenant] = t
	}
	t.weight = max(1, l.weight) // a lane made without Tenant weighs 1
	return t
}

// drop forgets t once it holds nothing and waits for nothing.
func (f *fairShare) drop(t *tenant) {
	if t.held != 0 || t.nwait != 0 {
		return
	}
	delete(f.tenants, t.key)
	*t = tenant{}
	if len(f.free) < maxFreeTenants {
		f.free = append(f.free, t)
	}
}

// link adds w to its tenant's waiters, after those of its priority and
// above.
func (f *fairShare) link(w *waiter) {
	t := f.get(w.lane)
	f.seq++
	w.t, w.seq = t, f.seq
	p := t.tail
	for p != nil && p.lane.prio < w.lane.prio {
		p = p.tprev
	}
	w.tprev = p
	if p == nil {
		w.tnext, t.head = t.head, w
	} else {
		w.tnext, p.tnext = p.tnext, w
	}
	if w.tnext != nil {
		w.tnext.tprev = w
	} else {
		t.tail = w
	}
	if t.nwait == 0 {
		t.at = len(f.waiting)
		f.waiting = append(f.waiting, t)
	}
	t.nwait++
}

// unlink takes w out of its tenant's waiters, and forgets the tenant when
// that leaves it idle.
func (f *fairShare) unlink(w *waiter) {
	t := w.t
	if w.tprev != nil {
		w.tprev.tnext = w.tnext
	} else {
		t.head = w.tnext
	}
	if w.tnext != nil {
		w.tnext.tprev = w.tprev
	} else {
		t.tail = w.tprev
	}
	w.tprev, w.tnext, w.t = nil, nil, nil
	t.nwait--
	if t.nwait == 0 {
		last := f.waiting[len(f.waiting)-1]
		f.waiting[t.at], last.at = last, t.at
		f.waiting[len(f.waiting)-1] = nil
		f.waiting = f.waiting[:len(f.waiting)-1]
	}
	f.drop(t)
}

// account books delta units to l's tenant. It panics when a release would
// make the count negative (not matched by an acquisition of that tenant).
func (f *fairShare) account(l lane, delta int64) {
	t := f.tenants[l.tenant]
	if t == nil || t.held+delta < 0 {
		panic(fmt.Sprintf("queueing: Release of %d units more than the tenant holds", -delta))
	}
	t.held += delta
	f.drop(t)
}

// first returns the waiter t serves next: its oldest of its highest
// priority, or its newest of that priority when lifo.
func (t *tenant) first(lifo bool) *waiter {
	w := t.head
	if lifo {
		for w.tnext != nil && w.tnext.lane.prio == w.lane.prio {
			w = w.tnext
		}
	}
	return w
}

// poorer reports whether tenant a holds less per unit of weight than b:
// a.held/a.weight < b.held/b.weight, in 128 bits (held may be near
// MaxInt64, weights up to MaxWeight).
func poorer(aHeld, aWeight, bHeld, bWeight int64) bool {
	ah, al := bits.Mul64(uint64(aHeld), uint64(bWeight))
	bh, bl := bits.Mul64(uint64(bHeld), uint64(aWeight))
	return ah < bh || (ah == bh && al < bl)
}

// next returns the waiter to serve next: of the highest priority waiting;
// among those, of the tenant that holds the least per unit of weight (the
// max-min fair choice: a tenant below its share is served before one above
// it); among equals, the one that came first (last when lifo).
func (f *fairShare) next(lifo bool) *waiter {
	var best *waiter
	for _, t := range f.waiting {
		if w := t.first(lifo); best == nil || ahead(w, best, lifo) {
			best = w
		}
	}
	return best
}

// ahead reports whether waiter w is served before waiter b (see next).
func ahead(w, b *waiter, lifo bool) bool {
	if w.lane.prio != b.lane.prio {
		return w.lane.prio > b.lane.prio
	}
	t, u := w.t, b.t
	switch {
	case poorer(t.held, t.weight, u.held, u.weight):
		return true
	case poorer(u.held, u.weight, t.held, t.weight):
		return false
	case lifo:
		return w.seq > b.seq
	}
	return w.seq < b.seq
}

// before reports whether a request of lane l would be served before the
// waiter b: of higher priority, or of equal priority from a tenant that
// holds less per unit of weight.
func (f *fairShare) before(l lane, b *waiter) bool {
	if l.prio != b.lane.prio {
		return l.prio > b.lane.prio
	}
	var held int64
	if t := f.tenants[l.tenant]; t != nil {
		held = t.held
	}
	return poorer(held, max(1, l.weight), b.t.held, b.t.weight)
}

// victim returns the waiter a request of lane l displaces from a full
// queue, or nil: the last waiter (lowest priority, newest) of the tenant
// with the most waiters per unit of weight, when that tenant would still
// have more than l's after l joined, and the waiter's priority is not
// above l's. So a tenant that floods the queue loses its own waiters to the
// others' newcomers, instead of the others being turned away.
func (f *fairShare) victim(l lane) *waiter {
	var nl int64 = 1 // l's waiters once it joined
	if t := f.tenants[l.tenant]; t != nil {
		nl += int64(t.nwait)
	}
	wl := max(1, l.weight)
	var heavy *tenant
	for _, t := range f.waiting {
		if t.key == l.tenant {
			continue
		}
		if heavy == nil || poorer(int64(heavy.nwait), heavy.weight, int64(t.nwait), t.weight) {
			heavy = t
		}
	}
	if heavy == nil || !poorer(nl, wl, int64(heavy.nwait), heavy.weight) || heavy.tail.lane.prio > l.prio {
		return nil
	}
	return heavy.tail
}
