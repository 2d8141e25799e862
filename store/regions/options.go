package regions

import (
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Defaults of a Store.
const (
	// DefaultPeriod is the sync period: every DefaultPeriod, on multiples
	// of it on the wall clock, each region publishes its usage, and reads
	// the others' a read delay later.
	DefaultPeriod = 2 * time.Second
	// DefaultHeadroom is the part of each global limit that no region's
	// allowance includes: the margin for the sync lag.
	DefaultHeadroom = 0.1
	// DefaultCapacity is the most keys a Store tracks (over all its global
	// limits) in the current windows.
	DefaultCapacity = 100_000
	// DefaultSyncTimeout bounds each call to the Exchange.
	DefaultSyncTimeout = time.Second
)

// Option configures New.
type Option interface{ apply(*config) error }

type config struct {
	period, readDelay, timeout time.Duration
	headroom                   float64
	capacity                   int
	perRegion                  map[string]bool
	logger                     *slog.Logger
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithPeriod sets the sync period P (DefaultPeriod by default; at least a
// millisecond). The over-admission bound grows with it (see the package
// doc); the cost of a sync, one Publish and one Others call carrying every
// key tracked, is paid once per P.
func WithPeriod(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("regions: sync period must be at least 1ms, got %v", d)
		}
		c.period = d
		return nil
	})
}

// WithReadDelay sets how long after its Publish a region reads the others'
// usage (a quarter of the period by default; less than the period): long
// enough for every region's Publish of the same round to reach the global
// store, the cross-region latency and the clocks' skew.
func WithReadDelay(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("regions: read delay must be positive, got %v", d)
		}
		c.readDelay = d
		return nil
	})
}

// WithHeadroom sets the headroom h (DefaultHeadroom by default; 0 <= h < 1):
// each region's allowance of a key is limit − ⌊h·limit⌋ − what the other
// regions used.
func WithHeadroom(h float64) Option {
	return optionFunc(func(c *config) error {
		if math.IsNaN(h) || h < 0 || h >= 1 {
			return fmt.Errorf("regions: headroom must be in [0, 1), got %v", h)
		}
		c.headroom = h
		return nil
	})
}

// WithCapacity sets the most keys the Store tracks in the current windows
// of its global limits (DefaultCapacity by default; at least 1). A
// decision on a new key beyond it fails with store.ErrUnavailable, before
// anything is charged, so that the rule's failure policy answers (see
// Store.Decide).
func WithCapacity(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("regions: capacity must be at least 1, got %d", n)
		}
		c.capacity = n
		return nil
	})
}

// WithSyncTimeout bounds each Exchange call of a sync (DefaultSyncTimeout
// by default; it must be shorter than the read delay's remainder of the
// period, or rounds are skipped).
func WithSyncTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("regions: sync timeout must be positive, got %v", d)
		}
		c.timeout = d
		return nil
	})
}

// WithPerRegion marks limits, by Spec.Name, as per-region: each region
// enforces the whole limit on its own store, with no exchange, so that
// globally they admit up to N times the limit for N regions. Use it for
// abuse limits (per-IP bursts, login attempts), which must answer in real
// time and whose offenders are local to a region anyway.
func WithPerRegion(names ...string) Option {
	return optionFunc(func(c *config) error {
		if c.perRegion == nil {
			c.perRegion = make(map[string]bool)
		}
		for _, n := range names {
			if n == "" {
				return fmt.Errorf("regions: per-region limit needs a name")
			}
			c.perRegion[n] = true
		}
		return nil
	})
}

// WithLogger sets the logger of sync failures and recoveries
// (slog.Default() by default): one line when a region loses the global
// store, one when it has it back.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("regions: nil logger")
		}
		c.logger = l
		return nil
	})
}
