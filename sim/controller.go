package sim

import "time"

// Request is one attempt of a client request, as the simulator presents it
// to a Controller. The Controller may read it and keep the pointer until it
// calls Env.Start or Env.Shed for it; it must not change it.
type Request struct {
	// ID is unique per attempt within a run.
	ID uint64
	// Arrival is the instant the attempt reached the server, in virtual
	// nanoseconds since the start of the run.
	Arrival int64
	// Deadline is the instant the client gives up on this attempt; work
	// completed after it is wasted (Late).
	Deadline int64
	// Priority is 0 for critical requests, 1 for the rest.
	Priority int
	// Attempt is 0 for a first try, n for the n-th retry.
	Attempt int

	service  time.Duration // base service time, before the capacity factor
	origin   int64         // arrival of the first attempt
	admitted int64
	permit   Permit
	decided  bool
	// wasRetried: the client has sent the next attempt already.
	wasRetried bool
}

// Outcome is how admitted work ended, as reported to its Permit.
type Outcome uint8

const (
	// Good: completed by the client's deadline.
	Good Outcome = iota
	// Late: completed after the client's deadline; the work was wasted. An
	// adaptive limiter sees it as a drop (the server would see a deadline
	// error).
	Late
)

// String returns "good" or "late".
func (o Outcome) String() string {
	if o == Good {
		return "good"
	}
	return "late"
}

// Permit is what a Controller hands to Env.Start for admitted work. The
// simulator calls Done exactly once, at the virtual instant the work
// completes, with its outcome. Done may call back into the Env (for example
// to start a waiting request).
type Permit interface {
	Done(now int64, o Outcome)
}

// Env is the simulator as a Controller sees it. All calls happen on the
// simulator's single goroutine; nothing needs locking.
type Env interface {
	// Now returns the current virtual instant in nanoseconds since the start
	// of the run (always >= 1).
	Now() int64
	// Start admits r now: it enters the server (a FIFO in front of the
	// workers). p.Done is called when it completes.
	Start(r *Request, p Permit)
	// Shed rejects r now. The client may retry, depending on the scenario.
	Shed(r *Request)
	// At schedules f at virtual instant t (>= Now()): a waiting Controller
	// uses it for its timeouts and wake-ups.
	At(t int64, f func())
}

// Controller decides admission. For every request the simulator calls
// Offer once; the Controller must then call exactly one of env.Start(r, p)
// or env.Shed(r) for it, either during Offer or later (a queueing
// discipline keeps r and decides when capacity frees up or a timer it set
// with env.At fires). The simulator panics on a second decision for the same
// request and reports requests left undecided at the end of the run.
//
// This is the contract shared by every controller the simulator compares:
// the adaptive limiters, fixed limits, queueing disciplines and composed
// controllers.
type Controller interface {
	// Offer presents r, at env.Now().
	Offer(env Env, r *Request)
	// Limit returns the concurrency limit in force, for the time series; 0
	// when there is none.
	Limit() int
}

// Admitter is the simple form of a Controller that decides at once.
type Admitter interface {
	// Admit decides r at now: a Permit and true to start it, false to shed it.
	Admit(now int64, r *Request) (Permit, bool)
	// Limit is as for Controller.
	Limit() int
}

// Immediate makes a Controller of an Admitter.
func Immediate(a Admitter) Controller { return immediate{a} }

type immediate struct{ a Admitter }

func (c immediate) Offer(env Env, r *Request) {
	if p, ok := c.a.Admit(env.Now(), r); ok {
		env.Start(r, p)
	} else {
		env.Shed(r)
	}
}

func (c immediate) Limit() int { return c.a.Limit() }
