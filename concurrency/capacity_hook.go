package concurrency

import "sync/atomic"

// capacityHook is a registered capacity callback: f, and the waiter count
// that gates it. An ungated hook points waiting at its own always, which
// holds 1, so that one test serves both kinds.
type capacityHook struct {
	f       func()
	waiting *atomic.Int64
	always  atomic.Int64
}

// hookSlot holds the one capacity hook of a semaphore. It is read on every
// release, written only when a hook is registered or removed. gate repeats
// the hook's waiter count so that a release reads it with two dependent
// loads (one when there is no hook) rather than three.
type hookSlot struct {
	gate atomic.Pointer[atomic.Int64] // nil: no hook
	p    atomic.Pointer[capacityHook]
}

// register installs f gated by waiting (nil: ungated), removes the hook when
// f is nil, and refuses a second hook with ErrHookInUse. A release that runs
// at the same time as a registration or a removal may or may not run the
// hook.
func (s *hookSlot) register(f func(), waiting *atomic.Int64) error {
	if f == nil {
		s.gate.Store(nil)
		s.p.Store(nil)
		return nil
	}
	h := &capacityHook{f: f, waiting: waiting}
	if waiting == nil {
		h.always.Store(1)
		h.waiting = &h.always
	}
	// CAS nil -> hook: the first registration wins, a second one fails.
	if !s.p.CompareAndSwap(nil, h) {
		return ErrHookInUse
	}
	s.gate.Store(h.waiting)
	return nil
}

// The semaphores fire the hook after a release or a limit increase with
//
//	if g := s.onCapacity.gate.Load(); g != nil && g.Load() != 0 {
//		s.onCapacity.run()
//	}
//
// written out at each site, in this shape so that the common case, no hook,
// stays one load and one branch, and a release with nobody waiting pays two
// loads and no call. Both loads come after the release (sequentially
// consistent atomics), which is what makes the gate safe; see
// Semaphore.OnCapacityWhile.

// run calls the hook, if one is still registered.
func (s *hookSlot) run() {
	if h := s.p.Load(); h != nil {
		h.f()
	}
}
