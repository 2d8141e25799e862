package shed

import (
	"context"

	"github.com/sluicehq/sluice/adaptive"
)

// Token is the permit of an admitted attempt. Done it exactly once when the
// work ends, on every path (error, timeout, panic: use defer), or the
// permits it holds stay taken (store leases only until their TTL). A Token
// is a small value; only one copy may be done, and a second Done is
// harmless: it releases nothing and is counted in Stats.DoubleDone. The
// zero Token, returned with a rejection, does nothing.
type Token struct {
	a   *ticket
	gen uint64
}

// Done reports the outcome of the work to the adaptive limits (Success:
// its latency, from the decision to now on the Controller's clock, is a
// sample; Dropped: a congestion signal; Ignore: neither) and returns the
// attempt's concurrency permits and leases. Safe for concurrent use; it
// blocks only as long as a network store takes to release a lease.
func (t Token) Done(o Outcome) { t.DoneAt(0, o) }

// DoneAt is Done at now (monotonic nanoseconds, on the clock the attempt
// was decided on): for simulations that pass Attempt.Now. Zero means the
// Controller's clock.
func (t Token) DoneAt(now int64, o Outcome) { t.done(now, o, -1) }

// DoneStatus is Done for work answered with an HTTP status (or the like):
// the outcome is the middleware's (5xx is Dropped, anything else Success),
// and rules that count only some statuses (Rule.Count) give back their
// charge for the others.
func (t Token) DoneStatus(status int) {
	o := Success
	if status >= 500 {
		o = Dropped
	}
	t.done(0, o, status)
}

// done ends t's attempt once: moving a.gen on makes every copy of t
// stale, so that a copy done again, maybe at the same time, releases
// nothing (counted in Stats.DoubleDone).
func (t Token) done(now int64, o Outcome, status int) {
	if t.a == nil {
		return
	}
	a := t.a
	if !a.gen.CompareAndSwap(t.gen, t.gen+1) {
		a.ctr[cDoubleDone].Add(1)
		return
	}
	a.c.finish(a, now, o, status)
}

// outcomeOfStatus maps a handler's response status and its request's
// context to the outcome reported to adaptive limits: 5xx and a deadline
// are drops (overload signals), a client that went away says nothing, and
// anything else is a success whose latency counts.
func outcomeOfStatus(status int, ctx context.Context) Outcome {
	if status >= 500 {
		return Dropped
	}
	if err := ctx.Err(); err != nil {
		return adaptive.OutcomeOf(err)
	}
	return Success
}
