package mysqlstore

import (
	"fmt"
	"time"
)

// DefaultTimeout is the per-call deadline of a Store unless WithTimeout
// sets another: a hung database costs a request at most this much. A
// decision here commits a transaction: 1 to 5 ms on a healthy server.
const DefaultTimeout = 100 * time.Millisecond

// DefaultPrefix is the prefix of a Store's table and routines unless
// WithPrefix names another.
const DefaultPrefix = "sluice"

// maxPrefix bounds a prefix so that the longest name it starts
// ("_window_at") stays within MariaDB's 64 characters.
const maxPrefix = 48

// Option configures New.
type Option interface{ apply(*config) error }

type config struct {
	prefix  string
	timeout time.Duration
}

type prefixOption string

func (o prefixOption) apply(c *config) error {
	if o == "" || len(o) > maxPrefix {
		return fmt.Errorf("mysqlstore: prefix %q must be 1 to %d bytes", string(o), maxPrefix)
	}
	for _, r := range string(o) {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("mysqlstore: prefix %q may hold only ASCII letters, digits and _", string(o))
		}
	}
	c.prefix = string(o)
	return nil
}

// WithPrefix sets the prefix of the names of the store's table and
// routines in the connection's database (DefaultPrefix by default): the
// table prefix_state, the procedures prefix_decide and prefix_cleanup.
// Stores of one prefix share their limits' state: give each deployment its
// own. It must be 1 to 48 ASCII letters, digits or underscores.
func WithPrefix(prefix string) Option { return prefixOption(prefix) }

type timeoutOption time.Duration

func (o timeoutOption) apply(c *config) error {
	if time.Duration(o) < time.Millisecond {
		return fmt.Errorf("mysqlstore: timeout must be at least 1ms, got %v", time.Duration(o))
	}
	c.timeout = time.Duration(o)
	return nil
}

// WithTimeout sets the deadline of each call to the database
// (DefaultTimeout by default), at least 1ms. It bounds the call on both
// sides: the client gives up after it, and the server aborts the statement
// after three quarters of it (max_statement_time), rolling the decision
// back (see the package doc for the one case where it cannot). A call that misses it
// fails with an error matching store.ErrUnavailable; the caller's own
// deadline, when earlier, still applies on the client side.
func WithTimeout(d time.Duration) Option { return timeoutOption(d) }
