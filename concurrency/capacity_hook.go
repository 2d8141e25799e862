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
// release, written only when a hook is registered or removed.
type hookSlot struct {
	p atomic.Pointer[capacityHook]
}

// register installs f gated by waiting (nil: ungated), removes the hook when
// f is nil, and refuses a second hook with ErrHookInUse.
func (s *hookSlot) register(f func(), waiting *atomic.Int64) error {
	if f == nil {
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
	return nil
}

// due returns the hook to run now that capacity may have freed up, or nil
// when there is none or its waiter count reads zero: a release with nobody
// waiting pays two loads and no call. Both loads come after the caller's
// release (sequentially consistent atomics), which is what makes the gate
// safe; see Semaphore.OnCapacityWhile. It is small enough to inline, and the
// caller makes the call: if h := s.onCapacity.due(); h != nil { h.f() }.
func (s *hookSlot) due() *capacityHook {
	if h := s.p.Load(); h != nil && h.waiting.Load() != 0 {
		return h
	}
	return nil
}
