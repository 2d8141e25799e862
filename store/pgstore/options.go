package pgstore

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultTimeout is the per-call deadline of a Store unless WithTimeout
// sets another: a hung database costs a request at most this much. It is
// longer than Redis's: a decision here commits a transaction, 1 to 5 ms on
// a healthy server.
const DefaultTimeout = 100 * time.Millisecond

// DefaultSchema is the schema of a Store's table and functions unless
// WithSchema names another.
const DefaultSchema = "sluice"

// Option configures New.
type Option interface{ apply(*config) error }

type config struct {
	schema  string
	timeout time.Duration
}

type schemaOption string

func (o schemaOption) apply(c *config) error {
	if o == "" || len(o) > 63 {
		return fmt.Errorf("pgstore: schema name %q must be 1 to 63 bytes", string(o))
	}
	c.schema = string(o)
	return nil
}

// WithSchema sets the schema that holds the store's table and functions
// (DefaultSchema by default). Stores of one schema share their limits' state:
// give each deployment its own. The name is quoted as an identifier, so any
// name of 1 to 63 bytes works, case kept.
func WithSchema(name string) Option { return schemaOption(name) }

type timeoutOption time.Duration

func (o timeoutOption) apply(c *config) error {
	if o <= 0 {
		return fmt.Errorf("pgstore: timeout must be positive, got %v", time.Duration(o))
	}
	c.timeout = time.Duration(o)
	return nil
}

// WithTimeout sets the deadline of each call to the database
// (DefaultTimeout by default). A call that misses it fails with an error
// matching store.ErrUnavailable; the caller's own deadline, when earlier,
// still applies.
func WithTimeout(d time.Duration) Option { return timeoutOption(d) }

// quote returns name as a quoted SQL identifier.
func quote(name string) string { return pgx.Identifier{name}.Sanitize() }
