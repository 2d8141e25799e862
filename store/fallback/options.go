package fallback

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults of a Fallback.
const (
	// DefaultTripAfter is how many consecutive failed calls open the
	// breaker.
	DefaultTripAfter = 3
	// DefaultRecoverAfter is how many consecutive successful probes close
	// it again.
	DefaultRecoverAfter = 3
	// DefaultProbeInterval is the period of the heartbeat, which is also
	// the probe while the breaker is open.
	DefaultProbeInterval = time.Second
	// DefaultInstanceMemory is how long an instance that stopped beating
	// goes on counting in N (see WithInstanceMemory).
	DefaultInstanceMemory = time.Minute
)

// Option configures New.
type Option interface{ apply(*config) error }

type config struct {
	tripAfter, recoverAfter int
	probe, memory           time.Duration
	instances               int64 // static N; 0: counted by heartbeats
	logger                  *slog.Logger
	failClosed              map[string]bool
	backend                 string // the remote's name in log lines
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithTripAfter sets how many consecutive calls that fail with
// store.ErrUnavailable (errors, deadline misses, failed heartbeats) open
// the breaker (DefaultTripAfter by default; at least 1).
func WithTripAfter(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("fallback: trip threshold must be at least 1, got %d", n)
		}
		c.tripAfter = n
		return nil
	})
}

// WithRecoverAfter sets how many consecutive successful probes close the
// breaker again (DefaultRecoverAfter by default; at least 1): the
// hysteresis that keeps a flapping remote from flapping the mode. Decisions
// return to the remote within n probe intervals of its recovery.
func WithRecoverAfter(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("fallback: recovery threshold must be at least 1, got %d", n)
		}
		c.recoverAfter = n
		return nil
	})
}

// WithProbeInterval sets the period of the instance's heartbeat on the remote,
// which is also the probe of an open breaker (DefaultProbeInterval by
// default). Every instance sharing the limits should use the same interval
// (see WithInstanceMemory).
func WithProbeInterval(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("fallback: probe interval must be positive, got %v", d)
		}
		c.probe = d
		return nil
	})
}

// WithInstanceMemory sets how long an instance goes on counting in N
// after its last heartbeat (DefaultInstanceMemory, or three probe
// intervals when that is longer, by default; at least three probe
// intervals). An instance that Closes leaves N at once; one that stops
// beating may have lost the remote only and be deciding on its share locally,
// so it goes on counting for d: were it dropped at once, the others'
// shares would grow into its own when the remote fails for them too. The price
// is availability after a crash or a scale-down without Close: for d, a
// degraded instance enforces the smaller share of the larger N. Every
// instance sharing the limits should use the same memory, as the same probe
// interval.
func WithInstanceMemory(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("fallback: instance memory must be positive, got %v", d)
		}
		c.memory = d
		return nil
	})
}

// WithInstances fixes N, the number of instances that share each limit,
// instead of counting them through heartbeats: while degraded each
// instance enforces limit ÷ n.
func WithInstances(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("fallback: instances must be at least 1, got %d", n)
		}
		c.instances = int64(n)
		return nil
	})
}

// WithLogger sets the logger of mode changes (slog.Default() by default):
// one line per change, at most one a second (changes in between are
// counted in the next line).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("fallback: nil logger")
		}
		c.logger = l
		return nil
	})
}

// WithFailClosed marks limits, by Spec.Name, as fail-closed: while
// degraded, a request naming one is rejected (a ReasonLimited decision
// whose RetryAfter is the probe interval) instead of being decided on the
// local share. Use it for limits that must never be exceeded, such as
// login attempts.
func WithFailClosed(names ...string) Option {
	return optionFunc(func(c *config) error {
		if c.failClosed == nil {
			c.failClosed = make(map[string]bool)
		}
		for _, n := range names {
			if n == "" {
				return fmt.Errorf("fallback: fail-closed limit needs a name")
			}
			c.failClosed[n] = true
		}
		return nil
	})
}

// WithBackendName names the remote store in the log lines of mode changes
// ("the remote store" by default): "Redis", "PostgreSQL".
func WithBackendName(name string) Option {
	return optionFunc(func(c *config) error {
		if name == "" {
			return fmt.Errorf("fallback: empty backend name")
		}
		c.backend = name
		return nil
	})
}
