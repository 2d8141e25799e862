package queueing

import "errors"

// ErrShed is the umbrella sentinel for every request the queue sheds for
// its own protection: errors.Is(err, ErrShed) is true for ErrQueueFull,
// ErrTimeout, ErrCongested, ErrDeadline and ErrDisplaced. A context error
// (the caller gave up) and ErrClosed are not shed errors.
var ErrShed = errors.New("queueing: shed")

// shedError is a specific reason for shedding; it matches ErrShed too.
type shedError string

func (e shedError) Error() string { return string(e) }

// Is makes every shedError match the umbrella ErrShed.
func (e shedError) Is(target error) bool { return target == ErrShed }

var (
	// ErrQueueFull: the queue (or the share of it open to the request's
	// priority) is full, and the request would be served after every
	// waiter, so it is the one shed.
	ErrQueueFull error = shedError("queueing: queue full")
	// ErrTimeout: the request waited its max wait (WithMaxWait) without
	// getting a permit.
	ErrTimeout error = shedError("queueing: max wait elapsed")
	// ErrCongested: CoDel shed the request; it waited longer than the
	// queue's current timeout (the target under a standing queue, the
	// interval otherwise).
	ErrCongested error = shedError("queueing: shed by CoDel, queue congested")
	// ErrDeadline: the request's context deadline falls before its expected
	// turn (WithDeadlineAware), so it was rejected without waiting.
	ErrDeadline error = shedError("queueing: deadline falls before expected turn")
	// ErrDisplaced: a newcomer took the waiter's place in a full queue:
	// one of higher priority, or under LIFO one of equal priority (the
	// oldest waiter is the one served last, and the likeliest abandoned).
	ErrDisplaced error = shedError("queueing: displaced by higher priority")
)

// ErrTooLarge is returned by Acquire, at once and with nothing held, for a
// request that can never be served as things stand: one of more units than
// the Admitter's whole limit when the Admitter reports its limit (a
// Limit() int64 method, as concurrency's semaphores have), or one whose
// units, added to those already queued, are past math.MaxInt64. Waiting
// would only hold up the waiters behind it. It is the caller's request,
// not the queue's protection, so it does not match ErrShed; a limit raised
// later does not revive it.
var ErrTooLarge = errors.New("queueing: request larger than the Admitter's whole limit")

// ErrClosed is returned by Acquire after Close, and to every waiter still
// queued when Close is called.
var ErrClosed = errors.New("queueing: queue closed")
