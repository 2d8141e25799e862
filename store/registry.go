package store

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// Registry is the table of limits that a network store keeps in this
// process (its Register, Update and Unregister do no I/O): each limit's
// parameters L, boxed once for the server, by LimitID, and the names in
// use. Lookups take no lock (the table is copied on write); changes are
// serialized. IDs are never reused. The zero value is an empty Registry;
// it must not be copied after first use. redisstore, pgstore, mysqlstore and
// memcachestore keep theirs in one.
type Registry[L any] struct {
	mu    sync.Mutex
	names map[string]struct{}
	// limits is indexed by LimitID-1; an unregistered limit leaves nil (a
	// tombstone, so that IDs are never reused).
	limits atomic.Pointer[[]*L]
}

// Add adds l under name and returns its LimitID. It returns an error
// starting with "store: " when name is taken or the IDs have run out.
func (r *Registry[L]) Add(name string, l *L) (LimitID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.names[name]; dup {
		return 0, fmt.Errorf("store: limit %q is registered already", name)
	}
	old := r.All()
	if uint64(len(old)) >= math.MaxUint32 {
		return 0, fmt.Errorf("store: too many limits")
	}
	next := append(slices.Clip(old), l)
	if r.names == nil {
		r.names = make(map[string]struct{})
	}
	r.names[name] = struct{}{}
	r.limits.Store(&next)
	return LimitID(len(next)), nil
}

// Replace puts l in the place of limit id, after check approves of the
// limit there; it returns an error matching ErrUnknownLimit for an id not
// registered, and check's error (the limit unchanged).
func (r *Registry[L]) Replace(id LimitID, l *L, check func(old *L) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.Lookup(id)
	if old == nil {
		return fmt.Errorf("%w: limit %d is not registered", ErrUnknownLimit, id)
	}
	if err := check(old); err != nil {
		return err
	}
	next := slices.Clone(r.All())
	next[id-1] = l
	r.limits.Store(&next)
	return nil
}

// Remove drops limit id, registered under name, which is free again. It
// returns an error matching ErrUnknownLimit for an id not registered.
func (r *Registry[L]) Remove(id LimitID, name func(*L) string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.Lookup(id)
	if l == nil {
		return fmt.Errorf("%w: limit %d is not registered", ErrUnknownLimit, id)
	}
	next := slices.Clone(r.All())
	next[id-1] = nil
	delete(r.names, name(l))
	r.limits.Store(&next)
	return nil
}

// All returns the table, indexed by LimitID-1 (nil for an unregistered
// limit). It must not be changed.
func (r *Registry[L]) All() []*L {
	if p := r.limits.Load(); p != nil {
		return *p
	}
	return nil
}

// Lookup returns limit id, or nil when it is not registered.
func (r *Registry[L]) Lookup(id LimitID) *L {
	ls := r.All()
	if id == 0 || int(id) > len(ls) {
		return nil
	}
	return ls[id-1]
}

// ReleaseNone is Release (see Store) for a network store that keeps no
// concurrency limits in r, so holds no lease: it returns ErrLeaseNotHeld
// for a lease not held, an error matching ErrUnknownLimit for a lease of a
// limit not registered, and otherwise an error starting with "store: "
// that the limit is not a concurrency limit. It does no I/O.
func (r *Registry[L]) ReleaseNone(lease Lease) error {
	if !lease.Held() {
		return ErrLeaseNotHeld
	}
	if r.Lookup(lease.Limit) == nil {
		return fmt.Errorf("%w: lease names limit %d", ErrUnknownLimit, lease.Limit)
	}
	return fmt.Errorf("store: lease names limit %d, which is not a concurrency limit", lease.Limit)
}

// CheckInPlace reports whether a network store can change limit was to
// spec in place (Updater): only Limit, and a Concurrency limit's LeaseTTL.
// A token bucket's rate cannot change there (its debt would change
// meaning, and every instance would have to agree on when). Its error
// starts with "store: ", names the limit and says what the store, named
// backend, cannot do.
func CheckInPlace(was, spec Spec, backend string) error {
	fixed := func(s Spec) Spec {
		s.Limit, s.LeaseTTL = 0, 0
		if s.Capacity == 0 {
			s.Capacity = DefaultCapacity
		}
		return s
	}
	switch {
	case was.Name != spec.Name:
		return fmt.Errorf("store: limit %q: Update cannot rename it to %q", was.Name, spec.Name)
	case was.Algorithm == TokenBucket && was.Rate != spec.Rate:
		return fmt.Errorf("store: limit %q: the %s store cannot change a token bucket's rate in place", was.Name, backend)
	case fixed(was) != fixed(spec):
		return fmt.Errorf("store: limit %q: only Limit, and LeaseTTL of a concurrency limit, change in place", was.Name)
	}
	return nil
}
