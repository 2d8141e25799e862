package redisstore

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
)

// FallbackOption configures NewFallback.
type FallbackOption interface{ apply(*fallbackConfig) error }

type fallbackConfig struct {
	tripAfter, recoverAfter int
	probe                   time.Duration
	instances               int64 // static N; 0: counted by heartbeats
	logger                  *slog.Logger
	failClosed              map[string]bool
}

type fallbackOptionFunc func(*fallbackConfig) error

func (f fallbackOptionFunc) apply(c *fallbackConfig) error { return f(c) }

// WithTripAfter sets how many consecutive calls that fail with
// store.ErrUnavailable (errors, deadline misses, failed heartbeats) open
// the breaker (DefaultTripAfter by default; at least 1).
func WithTripAfter(n int) FallbackOption {
	return fallbackOptionFunc(func(c *fallbackConfig) error {
		if n < 1 {
			return fmt.Errorf("redisstore: trip threshold must be at least 1, got %d", n)
		}
		c.tripAfter = n
		return nil
	})
}

// WithRecoverAfter sets how many consecutive successful probes close the
// breaker again (DefaultRecoverAfter by default; at least 1): the
// hysteresis that keeps a flapping Redis from flapping the mode. Decisions
// return to Redis within n probe intervals of its recovery.
func WithRecoverAfter(n int) FallbackOption {
	return fallbackOptionFunc(func(c *fallbackConfig) error {
		if n < 1 {
			return fmt.Errorf("redisstore: recovery threshold must be at least 1, got %d", n)
		}
		c.recoverAfter = n
		return nil
	})
}

// WithProbeInterval sets the period of the instance's heartbeat in Redis,
// which is also the probe of an open breaker (DefaultProbeInterval by
// default). An instance counts as live for three intervals after its last
// heartbeat, so every instance of one prefix should use the same interval.
func WithProbeInterval(d time.Duration) FallbackOption {
	return fallbackOptionFunc(func(c *fallbackConfig) error {
		if d <= 0 {
			return fmt.Errorf("redisstore: probe interval must be positive, got %v", d)
		}
		c.probe = d
		return nil
	})
}

// WithInstances fixes N, the number of instances that share each limit,
// instead of counting them through heartbeats: while degraded each
// instance enforces limit ÷ n.
func WithInstances(n int) FallbackOption {
	return fallbackOptionFunc(func(c *fallbackConfig) error {
		if n < 1 {
			return fmt.Errorf("redisstore: instances must be at least 1, got %d", n)
		}
		c.instances = int64(n)
		return nil
	})
}

// WithLogger sets the logger of mode changes (slog.Default() by default):
// one line per change, at most one a second (changes in between are
// counted in the next line).
func WithLogger(l *slog.Logger) FallbackOption {
	return fallbackOptionFunc(func(c *fallbackConfig) error {
		if l == nil {
			return fmt.Errorf("redisstore: nil logger")
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
func WithFailClosed(names ...string) FallbackOption {
	return fallbackOptionFunc(func(c *fallbackConfig) error {
		if c.failClosed == nil {
			c.failClosed = make(map[string]bool)
		}
		for _, n := range names {
			if n == "" {
				return fmt.Errorf("redisstore: fail-closed limit needs a name")
			}
			c.failClosed[n] = true
		}
		return nil
	})
}
