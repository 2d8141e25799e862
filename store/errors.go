package store

import "errors"

// ErrUnavailable is matched (errors.Is) by every error of a store that
// could not decide: a network store that is down, slow past its deadline,
// out of memory. Nothing was charged. A caller branches on it to fail open
// or closed; other errors are programming errors (bad input). Memory never
// returns it; a test fake can (storetest.Faulty).
var ErrUnavailable = errors.New("store: unavailable")

// ErrLeaseNotHeld is returned by Release for a lease that is not held: it
// was released already, it has expired (its permits came back by
// themselves), or it never came from this store.
var ErrLeaseNotHeld = errors.New("store: lease not held")

// ErrUnknownLimit is matched (errors.Is) by the error of a call naming a
// LimitID the store does not hold: never registered by it, or unregistered.
// It is bad input, never a store failure.
var ErrUnknownLimit = errors.New("store: unknown limit")

// UnavailableError is the error of a store that could not decide, wrapping
// the cause. It matches ErrUnavailable and unwraps to Cause.
type UnavailableError struct {
	// Cause is what went wrong, such as a dial error or
	// context.DeadlineExceeded from the store's own deadline.
	Cause error
}

// Unavailable returns an *UnavailableError wrapping cause.
func Unavailable(cause error) error { return &UnavailableError{Cause: cause} }

// Error returns "store: unavailable: " and the cause.
func (e *UnavailableError) Error() string {
	if e.Cause == nil {
		return ErrUnavailable.Error()
	}
	return ErrUnavailable.Error() + ": " + e.Cause.Error()
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Cause }

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
