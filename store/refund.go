package store

import (
	"context"
	"fmt"
)

// Refunder is a Store that gives back, after the work, what an admitted
// decision charged: a request that turned out not to count (a login that
// succeeded, under a rule that counts only failures) or that cost less
// than was charged. Callers find it with a type assertion
// (s.(store.Refunder)).
type Refunder interface {
	// Refund gives back, for each hit of req, its Cost (at most what the
	// admitting decision charged) on the key's state, as of res.Now, the
	// admitting decision's instant (Memory; a network store its own clock's
	// reading of it): a window's count in the window that counted it,
	// never a later one; a bucket's debt, only what the hit's tokens still
	// weigh at req.Now (paid off at res.Now plus the hit's ResetAfter:
	// ratelimit.GCRA.RefundLate, with its limit); a log's entries made at
	// res.Now or before that still count, never an admission made since
	// (a refund that comes after the admission expired frees nothing). A
	// hit whose reservation is still pending (HitResult.Wait) is cancelled
	// as of req.Now instead. res is that admitting decision's
	// Result, so the store knows where each hit was counted (a key's own
	// state or the shared overflow state). What a window no longer holds
	// (it has rolled over) is not given back, and a Concurrency hit is
	// given back by releasing its lease, not here (Refund skips it).
	// It returns an error matching ErrUnknownLimit for a limit not
	// registered, ErrUnavailable (wrapped) when a network store fails, and
	// an error for a malformed req or a res that did not admit it. Giving
	// back more than was charged is the caller's error; a state never goes
	// below empty.
	Refund(ctx context.Context, req *Request, res *Result) error
}

var _ Refunder = (*Memory)(nil)

// Refund gives back the hits of req (see Refunder). It never blocks.
func (m *Memory) Refund(_ context.Context, req *Request, res *Result) error {
	if err := CheckRefund(req, res); err != nil {
		return err
	}
	for i := range req.Hits[:req.N] {
		h := &req.Hits[i]
		l := m.lookup(h.Limit)
		if l == nil {
			return fmt.Errorf("%w: hit %d names limit %d", ErrUnknownLimit, i, h.Limit)
		}
		if l.registered().Algorithm == Concurrency {
			continue
		}
		// A charge goes back as of its admission (res.Now: its window; a
		// bucket only what it still weighs at req.Now); a reservation still
		// pending is cancelled as of now.
		at := res.Now
		if res.Hits[i].Wait > 0 {
			at = req.Now
		}
		l.undo(h, at, max(at, req.Now), &res.Hits[i])
	}
	return nil
}

// CheckRefund returns an error starting with "store: " unless req is a
// well-formed refund of res, a Result that admitted it: the check every
// Refunder makes before it gives anything back.
func CheckRefund(req *Request, res *Result) error {
	if req == nil || res == nil {
		return fmt.Errorf("store: Refund needs a request and the admitting result")
	}
	if err := req.Check(); err != nil {
		return err
	}
	if !res.Allowed || res.N != req.N {
		return fmt.Errorf("store: Refund of a decision that did not admit these %d hits", req.N)
	}
	return nil
}
