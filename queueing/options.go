package queueing

import (
	"fmt"
	"math"
	"time"
)

// Order is how a Queue picks the next waiter among those of equal priority.
type Order uint8

const (
	// FIFO serves the oldest waiter first.
	FIFO Order = iota
	// LIFO serves the newest waiter first: under overload the oldest are
	// the likeliest to have been abandoned by their clients.
	LIFO
	// AdaptiveLIFO serves FIFO while the queue drains and LIFO once a
	// standing queue forms (the queue has not been empty within the CoDel
	// interval; DefaultInterval unless WithCoDel sets another).
	AdaptiveLIFO
)

// String returns "fifo", "lifo" or "adaptive-lifo".
func (o Order) String() string {
	switch o {
	case FIFO:
		return "fifo"
	case LIFO:
		return "lifo"
	case AdaptiveLIFO:
		return "adaptive-lifo"
	}
	return "order(?)"
}

// DefaultMaxLength is the queue length used when WithMaxLength is not given.
const DefaultMaxLength = 1024

// Option configures a Queue in New.
type Option interface {
	apply(*config) error
}

type config struct {
	order         Order
	maxLen        int
	maxWait       time.Duration
	codel         bool
	target        time.Duration
	interval      time.Duration
	deadlineAware bool
	reserve       float64
	reserveFrom   Priority
	partitions    []partitionSpec
	fair          bool
}

type partitionSpec struct {
	name     string
	fraction float64
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithOrder sets the order among waiters of equal priority (FIFO by
// default).
func WithOrder(o Order) Option {
	return optionFunc(func(c *config) error {
		if o > AdaptiveLIFO {
			return fmt.Errorf("queueing: unknown order %d", o)
		}
		c.order = o
		return nil
	})
}

// WithMaxLength bounds the number of waiters (DefaultMaxLength by default).
// It returns an error from New unless n is positive; pass math.MaxInt for a
// queue whose only bound is time.
func WithMaxLength(n int) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("queueing: max length must be positive, got %d", n)
		}
		c.maxLen = n
		return nil
	})
}

// WithMaxWait sheds a waiter with ErrTimeout once it has waited d. Without
// it a waiter waits until its context ends (or CoDel sheds it). It returns
// an error from New unless d is positive. Any length is honoured: a max
// wait so long that it would end past math.MaxInt64 on the monotonic clock
// (about 146 years after its start; time.Duration(math.MaxInt64) for
// instance) never ends, as if WithMaxWait were not given.
func WithMaxWait(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("queueing: max wait must be positive, got %v", d)
		}
		c.maxWait = d
		return nil
	})
}

// WithCoDel turns on controlled-delay shedding: if the queue has not been
// empty within interval, waiters older than target are shed with
// ErrCongested; otherwise a waiter is shed after waiting interval. Use
// DefaultTarget and DefaultInterval unless measurements say otherwise. It
// returns an error from New unless 0 < target < interval; lengths that end
// past math.MaxInt64 never end (see NewCoDel).
func WithCoDel(target, interval time.Duration) Option {
	return optionFunc(func(c *config) error {
		if _, err := NewCoDel(target, interval); err != nil {
			return err
		}
		c.codel, c.target, c.interval = true, target, interval
		return nil
	})
}

// WithDeadlineAware rejects at once, with ErrDeadline, a request whose
// context deadline falls before the time the units queued ahead of it are
// expected to drain, estimated from the recent rate at which the queue
// hands out permits. Until the first estimate exists nobody is rejected.
func WithDeadlineAware() Option {
	return optionFunc(func(c *config) error {
		c.deadlineAware = true
		return nil
	})
}

// WithReserve keeps a fraction of the limit for work of priority from and
// above: requests below from may hold at most Limit - floor(fraction*Limit)
// units through the queue (Stripe reserves 20% for critical traffic:
// WithReserve(0.2, Critical)). The Admitter must have a Limit() int64
// method. It returns an error from New unless 0 < fraction < 1.
func WithReserve(fraction float64, from Priority) Option {
	return optionFunc(func(c *config) error {
		if math.IsNaN(fraction) || fraction <= 0 || fraction >= 1 {
			return fmt.Errorf("queueing: reserve fraction must be in (0, 1), got %v", fraction)
		}
		c.reserve, c.reserveFrom = fraction, from
		return nil
	})
}

// WithPartition adds a named partition guaranteed floor(fraction*Limit)
// units: while a partition holds less than its guarantee it is admitted
// whenever the Admitter has room, and other partitions may borrow only the
// capacity that no partition's unused guarantee claims. The Admitter must
// have a Limit() int64 method. It returns an error from New when the name
// is empty or repeated, the fraction is not in (0, 1], or the fractions of
// all partitions add up to more than 1.
func WithPartition(name string, fraction float64) Option {
	return optionFunc(func(c *config) error {
		if name == "" {
			return fmt.Errorf("queueing: partition name must not be empty")
		}
		if math.IsNaN(fraction) || fraction <= 0 || fraction > 1 {
			return fmt.Errorf("queueing: partition %q fraction must be in (0, 1], got %v", name, fraction)
		}
		sum := fraction
		for _, p := range c.partitions {
			if p.name == name {
				return fmt.Errorf("queueing: partition %q given twice", name)
			}
			sum += p.fraction
		}
		if sum > 1+1e-9 {
			return fmt.Errorf("queueing: partition fractions add up to %v, more than 1", sum)
		}
		c.partitions = append(c.partitions, partitionSpec{name, fraction})
		return nil
	})
}

// WithFairShare shares the limit among tenants, work-conserving: a
// request names its tenant and weight with Lane.Tenant; whenever units
// free up they go, within the highest priority waiting, to the tenant that
// holds the least per unit of weight. So each busy tenant gets at least its
// weight's share, floor(Limit·w/W) with W the weights of the tenants that
// hold units or wait, as fast as holders release; capacity no other tenant
// waits for is lent to whoever asks, and taken back at the next releases
// once its owner waits again (running work is never preempted). A full
// queue sheds the newest waiter of the tenant with the most waiters per
// unit of weight rather than another tenant's newcomer. The Admitter must
// have a Limit() int64 method; every call then takes the queue lock, and
// the admission is decided under it, in one step with the Admitter's
// TryAcquire (no check-then-act race); serving a waiter scans the tenants
// that wait. The queue tracks one entry per tenant that holds units or
// waits, so at most Limit plus the max length entries, and drops an entry
// as soon as its tenant holds nothing and waits for nothing. It returns an
// error from New when combined with WithPartition.
func WithFairShare() Option {
	return optionFunc(func(c *config) error {
		c.fair = true
		return nil
	})
}
