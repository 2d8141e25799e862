package adaptive

import (
	"context"
	"errors"
)

// Outcome is what a Token reports when the work it admitted ends.
type Outcome uint8

const (
	// Success: the work completed (even with an application error); its
	// latency is a sample of the service.
	Success Outcome = iota
	// Ignore: the sample says nothing about the service (the client went
	// away, the request was invalid); only the permit is returned.
	Ignore
	// Dropped: the work timed out, hit its deadline or was abandoned because
	// of overload; a congestion signal, with no latency sample.
	Dropped
)

// String returns a short lower-case name for o.
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Ignore:
		return "ignore"
	case Dropped:
		return "dropped"
	}
	return "unknown"
}

// OutcomeOf maps the error a unit of work returned to an Outcome: nil is
// Success, context.DeadlineExceeded (wrapped or not) is Dropped,
// context.Canceled is Ignore (the caller went away), and any other error is
// Success, because the work ran and its latency is a fair sample.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return Success
	case errors.Is(err, context.DeadlineExceeded):
		return Dropped
	case errors.Is(err, context.Canceled):
		return Ignore
	}
	return Success
}
