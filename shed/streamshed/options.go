package streamshed

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// Option configures NewGuard.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	category string
	burst    int64
	rate     ratelimit.Rate
	life     time.Duration
	now      func() int64
	attempt  func(*http.Request) shed.Attempt
}

// WithCategory decides the opening of connections as attempts of category
// (DefaultCategory otherwise): the Controller's rules of that category,
// and of category "", apply to them.
func WithCategory(category string) Option {
	return optionFunc(func(c *config) error {
		c.category = category
		return nil
	})
}

// WithMessageLimit lets every connection send burst messages at once,
// refilled at rate (DefaultMessageBurst and DefaultMessagesPerSecond
// otherwise). NewGuard returns ratelimit.NewGCRA's errors for a burst or
// rate it cannot honour.
func WithMessageLimit(burst int64, rate ratelimit.Rate) Option {
	return optionFunc(func(c *config) error {
		c.burst, c.rate = burst, rate
		return nil
	})
}

// WithMaxLifetime ends every connection d after it opened: the Guard closes
// it with GoingAway and gives its Token back. Set it below the LeaseTTL of
// the Controller's per-key Concurrency rules, so that no connection
// outlives its lease (the store cannot renew one). Zero, the default,
// means no bound; a negative d is an error.
func WithMaxLifetime(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("streamshed: negative max lifetime %v", d)
		}
		c.life = d
		return nil
	})
}

// WithClock reads the time of the message buckets (Conn.Message) from now
// (monotonic nanoseconds, positive) instead of the internal clock: for
// simulations and tests. The attempts Open decides are on the
// Controller's clock (shed.WithClock) unless they carry Now.
func WithClock(now func() int64) Option {
	return optionFunc(func(c *config) error {
		if now == nil {
			return errors.New("streamshed: WithClock(nil)")
		}
		c.now = now
		return nil
	})
}

// WithAttempt tells Accept and Middleware who opens a connection (its
// address, user, API key, tenant, tier, cost); the Guard sets the category
// and the time. By default the attempt carries the TCP peer's address
// alone (fingerprint.NewResolver with no proxy trusted).
func WithAttempt(f func(*http.Request) shed.Attempt) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("streamshed: WithAttempt(nil)")
		}
		c.attempt = f
		return nil
	})
}
