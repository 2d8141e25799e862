package queueing

import (
	"fmt"
	"time"
)

// Default CoDel parameters, as used at Facebook ("Fail at Scale"): when the
// queue has not been empty in the last DefaultInterval, the queue timeout is
// DefaultTarget, else DefaultInterval.
const (
	DefaultTarget   = 5 * time.Millisecond
	DefaultInterval = 100 * time.Millisecond
)

// CoDel is the controlled-delay state machine, a pure value: it reads no
// clock and every method takes now (monotonic nanoseconds). The owner tells
// it when the queue is empty (Empty) and asks for the current timeout. If
// the queue has not been empty within the interval, the queue is standing
// and a waiter older than the target is shed; otherwise the interval is the
// timeout. A Queue uses it under its lock; a simulator can drive it
// directly in virtual time.
//
// CoDel is not safe for concurrent use. The zero value is not usable; call
// NewCoDel.
type CoDel struct {
	target, interval int64
	lastEmpty        int64
	seen             bool
}

// NewCoDel returns a CoDel with the given target and interval. It returns
// an error unless 0 < target < interval. Any length is honoured: a target
// or interval so long that the instant it ends lies past math.MaxInt64
// (about 146 years after the monotonic clock's start) never ends, and a
// waiter is then never shed for it.
func NewCoDel(target, interval time.Duration) (*CoDel, error) {
	if target <= 0 || interval <= 0 {
		return nil, fmt.Errorf("queueing: CoDel target and interval must be positive, got %v and %v", target, interval)
	}
	if target >= interval {
		return nil, fmt.Errorf("queueing: CoDel target %v must be below the interval %v", target, interval)
	}
	return &CoDel{target: int64(target), interval: int64(interval)}, nil
}

// Empty records that the queue was empty at now. Call it whenever the queue
// is seen empty: when a request arrives to an empty queue and when a
// departure leaves it empty.
func (c *CoDel) Empty(now int64) {
	if !c.seen || now > c.lastEmpty {
		c.lastEmpty, c.seen = now, true
	}
}

// Standing reports whether the queue has not been empty within the last
// interval before now. Before the first Empty it reports false.
func (c *CoDel) Standing(now int64) bool {
	return c.seen && now-c.lastEmpty >= c.interval
}

// Timeout returns how long a waiter may wait at now: the target when the
// queue is standing, the interval otherwise.
func (c *CoDel) Timeout(now int64) time.Duration {
	if c.Standing(now) {
		return time.Duration(c.target)
	}
	return time.Duration(c.interval)
}

// Expired reports whether a waiter that entered the queue at enqueued must
// be shed at now, that is whether it has waited at least Timeout(now).
func (c *CoDel) Expired(enqueued, now int64) bool {
	return now-enqueued >= int64(c.Timeout(now))
}

// Deadline returns the instant at which a waiter that entered at enqueued
// expires, given that the queue stays non-empty until then (as it does
// while that waiter is in it, so the answer does not change while it
// waits): the interval after its arrival, or the target after it once the
// queue turns standing, whichever comes first. Expired(enqueued, now) is
// now >= Deadline(enqueued). An instant past math.MaxInt64 (a target or
// interval of centuries) is math.MaxInt64: never.
func (c *CoDel) Deadline(enqueued int64) int64 {
	at := addSat(enqueued, c.interval)
	if !c.seen {
		return at
	}
	if standing := max(addSat(c.lastEmpty, c.interval), addSat(enqueued, c.target)); standing < at {
		return standing
	}
	return at
}

// Target returns the target delay.
func (c *CoDel) Target() time.Duration { return time.Duration(c.target) }

// Interval returns the interval.
func (c *CoDel) Interval() time.Duration { return time.Duration(c.interval) }
