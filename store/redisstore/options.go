package redisstore

import (
	"fmt"
	"strings"
	"time"
)

// DefaultTimeout is the per-call deadline of a Store unless WithTimeout
// sets another: a hung Redis costs a request at most this much.
const DefaultTimeout = 20 * time.Millisecond

// DefaultPrefix is the key prefix of a Store unless WithPrefix sets another.
const DefaultPrefix = "sluice"

// Option configures New.
type Option interface{ apply(*config) error }

type config struct {
	prefix  string
	timeout time.Duration
}

type prefixOption string

func (o prefixOption) apply(c *config) error {
	p := string(o)
	if p == "" || strings.ContainsAny(p, "{}") {
		return fmt.Errorf("redisstore: prefix %q must be non-empty and free of braces (it is the keys' hash tag)", p)
	}
	c.prefix = p
	return nil
}

// WithPrefix sets the prefix of every key the store writes (DefaultPrefix
// by default). Stores with the same prefix share their limits: give each
// deployment its own. The prefix becomes the keys' hash tag ({prefix}), so
// it must not contain braces, and on Redis Cluster all keys of one prefix
// live in one slot, on one master.
func WithPrefix(prefix string) Option { return prefixOption(prefix) }

type timeoutOption time.Duration

func (o timeoutOption) apply(c *config) error {
	if o <= 0 {
		return fmt.Errorf("redisstore: timeout must be positive, got %v", time.Duration(o))
	}
	c.timeout = time.Duration(o)
	return nil
}

// WithTimeout sets the deadline of each call to Redis (DefaultTimeout by
// default). A call that misses it fails with an error matching
// store.ErrUnavailable; the caller's own deadline, when earlier, still
// applies.
func WithTimeout(d time.Duration) Option { return timeoutOption(d) }
