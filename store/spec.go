package store

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
)

// Algorithm is how a limit counts.
type Algorithm uint8

const (
	// TokenBucket is an exact token bucket of Limit tokens refilled at Rate,
	// run as GCRA (ratelimit.GCRA).
	TokenBucket Algorithm = iota + 1
	// FixedWindow admits Limit per aligned window of length Window
	// (ratelimit.FixedWindow): up to 2·Limit across a boundary, so never
	// for authentication.
	FixedWindow
	// SlidingWindow is the approximate sliding-window counter of Limit per
	// Window (ratelimit.SlidingWindow states its error bound).
	SlidingWindow
	// SlidingLog admits exactly at most Limit in any interval of length
	// Window (ratelimit.SlidingLog); memory grows with Limit.
	SlidingLog
	// Concurrency holds at most Limit permits per key at once, as Leases
	// that expire after LeaseTTL.
	Concurrency
)

// String returns the algorithm's name, such as "token_bucket".
func (a Algorithm) String() string {
	switch a {
	case TokenBucket:
		return "token_bucket"
	case FixedWindow:
		return "fixed_window"
	case SlidingWindow:
		return "sliding_window"
	case SlidingLog:
		return "sliding_log"
	case Concurrency:
		return "concurrency"
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// DefaultCapacity is the number of keys a Memory store holds per limit when
// Spec.Capacity is zero. A Memory store preallocates each limit's table
// (concurrency.TableBytes of its state: 8 bytes for TokenBucket,
// FixedWindow, SlidingWindow and SlidingLog, 64 for Concurrency), and a
// SlidingLog key's ring (16·Limit bytes) or a Concurrency key's lease slots
// grow on top; Spec.MemoryBytes is the worst case of a spec. At
// DefaultCapacity a token bucket takes 2 MiB, a sliding log of 1,000 per
// window up to 1 GiB.
const DefaultCapacity = 1 << 16

// MaxLeaseLimit is the largest Limit of a Concurrency spec: 2^24 permits per
// key.
const MaxLeaseLimit = 1 << 24

// maxTTL bounds LeaseTTL as the concurrency package bounds windows (2^59 ns,
// about 18 years), so that now+TTL never overflows.
const maxTTL = time.Duration(1) << 59

// Spec describes one limit. Fields that do not apply to the algorithm must
// be left zero; Validate rejects them rather than ignore them.
type Spec struct {
	// Name identifies the limit within a store; it must be non-empty and
	// unique. A network store uses it in its key names.
	Name string
	// Algorithm is how the limit counts; the zero value is rejected.
	Algorithm Algorithm
	// Limit is the burst of a TokenBucket, the admissions per Window of the
	// window algorithms, the permits per key of Concurrency (at most
	// MaxLeaseLimit). It must be positive.
	Limit int64
	// Rate is the refill rate of a TokenBucket (only).
	Rate ratelimit.Rate
	// Window is the window of FixedWindow, SlidingWindow and SlidingLog
	// (only).
	Window time.Duration
	// Capacity is the most keys a Memory store holds for this limit (a
	// hard cap; only recovered keys are evicted). Zero means
	// DefaultCapacity; negative is rejected. A network store, whose keys
	// expire by TTL, ignores it.
	Capacity int
	// Overflow is what a Memory store does with a new key when the limit's
	// table is full of live keys: reject it (concurrency.OverflowReject,
	// the default) or count it on one state shared by all such keys
	// (concurrency.OverflowShare). Either way HitResult.Overflow reports it.
	// The shared state is bounded like any key's. A key counted there that
	// later finds room in the table starts fresh in its own entry, so across
	// that move one key can get up to twice its limit in a window.
	Overflow concurrency.Overflow
	// Calendar places the windows of FixedWindow and SlidingWindow (only):
	// the zero value is UTC (a day window starts at midnight UTC, a week on
	// Monday); it may name a zone's fixed offset, or make the windows
	// calendar months (then Window is zero). Every store places them alike.
	Calendar Calendar
	// LeaseTTL is how long a Concurrency lease holds its permits unless
	// released earlier (only, and required, for Concurrency). Set it above
	// the longest time a holder may legitimately run (such as the request
	// timeout): a lease that lapses while its holder still runs hands its
	// permits to others, and the limit is exceeded until the holder ends.
	LeaseTTL time.Duration
}

// Validate reports whether s is a usable spec, with an error starting with
// "store: " that names the limit. It checks the algorithm's own parameter
// ranges through the concurrency package's constructors, so a spec that
// passes Validate builds on every store.
func (s Spec) Validate() error {
	_, err := s.build()
	return err
}

// built is a validated spec with its memory-store configuration.
type built struct {
	gcra    *ratelimit.GCRA
	fixed   *ratelimit.FixedWindow
	sliding *ratelimit.SlidingWindow
	log     *ratelimit.SlidingLog
	// recoverAfter is the longest an untouched state takes to recover: the
	// RetryAfter hint for a key rejected by a full table.
	recoverAfter time.Duration
	// clock is the window clock of FixedWindow and SlidingWindow (the zero
	// WindowClock, the time itself, for the others).
	clock WindowClock
}

func (s Spec) errorf(format string, args ...any) error {
	return fmt.Errorf("store: limit %q: "+format, append([]any{s.Name}, args...)...)
}

func (s Spec) build() (built, error) {
	var b built
	if s.Name == "" {
		return b, fmt.Errorf("store: limit needs a name")
	}
	if s.Algorithm < TokenBucket || s.Algorithm > Concurrency {
		return b, s.errorf("unknown algorithm %v", s.Algorithm)
	}
	if s.Limit <= 0 {
		return b, s.errorf("limit must be positive, got %d", s.Limit)
	}
	if s.Capacity < 0 {
		return b, s.errorf("capacity must not be negative, got %d", s.Capacity)
	}
	if s.Overflow > concurrency.OverflowShare {
		return b, s.errorf("unknown overflow policy %d", s.Overflow)
	}
	if s.Algorithm != TokenBucket && s.Rate != (ratelimit.Rate{}) {
		return b, s.errorf("a rate applies only to %v, not %v", TokenBucket, s.Algorithm)
	}
	windowed := s.Algorithm == FixedWindow || s.Algorithm == SlidingWindow || s.Algorithm == SlidingLog
	if !windowed && s.Window != 0 {
		return b, s.errorf("a window does not apply to %v", s.Algorithm)
	}
	if err := s.Calendar.validate(s.Algorithm, s.Window); err != nil {
		return b, s.errorf("%w", err)
	}
	span := s.Calendar.span(s.Window) // the window on the window clock
	if s.Algorithm != Concurrency && s.LeaseTTL != 0 {
		return b, s.errorf("a lease TTL applies only to %v, not %v", Concurrency, s.Algorithm)
	}
	var err error
	switch s.Algorithm {
	case TokenBucket:
		if b.gcra, err = ratelimit.NewGCRA(s.Rate, s.Limit); err == nil {
			b.recoverAfter = time.Duration(s.Limit) * b.gcra.Interval()
		}
	case FixedWindow:
		b.fixed, err = ratelimit.NewFixedWindow(s.Limit, span)
		b.recoverAfter, b.clock = span, s.Calendar.Clock(span)
	case SlidingWindow:
		b.sliding, err = ratelimit.NewSlidingWindow(s.Limit, span)
		b.recoverAfter, b.clock = 2*span, s.Calendar.Clock(span)
	case SlidingLog:
		b.log, err = ratelimit.NewSlidingLog(s.Limit, s.Window)
		b.recoverAfter = s.Window
	case Concurrency:
		switch {
		case s.Limit > MaxLeaseLimit:
			return b, s.errorf("a concurrency limit must be at most %d, got %d", MaxLeaseLimit, s.Limit)
		case s.LeaseTTL <= 0:
			return b, s.errorf("lease TTL must be positive, got %v", s.LeaseTTL)
		case s.LeaseTTL > maxTTL:
			return b, s.errorf("lease TTL %v is longer than the supported %v", s.LeaseTTL, maxTTL)
		}
		b.recoverAfter = s.LeaseTTL
	}
	if err != nil {
		return b, s.errorf("%w", err)
	}
	return b, nil
}
