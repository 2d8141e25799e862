package store

import (
	"context"
	"fmt"
)

// Resetter is a Store that can forget one key of one limit: an operator's
// reset of a client ("give acme its daily quota back"). Callers find it
// with a type assertion (s.(store.Resetter)).
type Resetter interface {
	// Reset makes key of limit id fresh: its usage is forgotten, and a
	// concurrency key's leases are dropped (their Release then returns
	// ErrLeaseNotHeld). A decision racing with Reset may be counted
	// before or after it, or lost. Resetting a key that has no state is
	// no error. It returns an error matching ErrUnknownLimit when id is not
	// registered, and ErrUnavailable (wrapped) when a network store fails.
	Reset(ctx context.Context, id LimitID, key string) error
}

var _ Resetter = (*Memory)(nil)

// Reset forgets key of limit id (see Resetter). A key counted on the
// limit's shared overflow state is not reset (that state is every such
// key's).
func (m *Memory) Reset(_ context.Context, id LimitID, key string) error {
	l := m.lookup(id)
	if l == nil {
		return fmt.Errorf("%w: limit %d is not registered", ErrUnknownLimit, id)
	}
	l.reset(key)
	return nil
}

func (r *rateLimit[S, P, A]) reset(key string) {
	if ref, ok := r.table.Lookup(key); ok {
		P(ref.Value()).Reset()
		ref.Release()
	}
}

func (l *leaseTable) reset(key string) {
	if ref, ok := l.table.Lookup(key); ok {
		ref.Value().Reset()
		ref.Release()
	}
}
