package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice/store"
)

// Faulty wraps a Store and, while an error is set, fails every call with it
// instead of calling the wrapped store (so nothing is charged), the way a
// network store fails when its server is down. Use it to test callers'
// fail-open and fail-closed paths; set an error matching
// store.ErrUnavailable (store.Unavailable(cause)) for an outage.
//
// A Faulty always implements store.Updater: Update passes through to a
// wrapped store that implements it, and otherwise returns an error
// matching errors.ErrUnsupported (so that a caller, like the conformance
// harness, can tell "cannot" from "failed"); so does store.Resetter.
//
// A Faulty is safe for concurrent use; SetErr may be called at any time.
// Use NewFaulty; the zero value is not usable.
type Faulty struct {
	inner store.Store
	err   atomic.Pointer[error]
	calls atomic.Int64
}

var (
	_ store.Store    = (*Faulty)(nil)
	_ store.Updater  = (*Faulty)(nil)
	_ store.Resetter = (*Faulty)(nil)
	_ store.Refunder = (*Faulty)(nil)
)

// NewFaulty returns a Faulty around inner that passes calls through until
// SetErr.
func NewFaulty(inner store.Store) *Faulty { return &Faulty{inner: inner} }

// SetErr makes every later call return err; nil passes calls through again.
func (f *Faulty) SetErr(err error) {
	if err == nil {
		f.err.Store(nil)
		return
	}
	f.err.Store(&err)
}

// Failed returns how many calls have failed because of SetErr.
func (f *Faulty) Failed() int64 { return f.calls.Load() }

func (f *Faulty) fail() error {
	if p := f.err.Load(); p != nil {
		f.calls.Add(1)
		return *p
	}
	return nil
}

// Register registers spec with the wrapped store unless an error is set.
func (f *Faulty) Register(ctx context.Context, spec store.Spec) (store.LimitID, error) {
	if err := f.fail(); err != nil {
		return 0, err
	}
	return f.inner.Register(ctx, spec)
}

// Decide decides req on the wrapped store unless an error is set.
func (f *Faulty) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.inner.Decide(ctx, req, res)
}

// Release releases lease on the wrapped store unless an error is set.
func (f *Faulty) Release(ctx context.Context, lease store.Lease, now int64) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.inner.Release(ctx, lease, now)
}

// Unregister unregisters id from the wrapped store unless an error is set.
func (f *Faulty) Unregister(ctx context.Context, id store.LimitID) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.inner.Unregister(ctx, id)
}

// Update updates limit id on the wrapped store unless an error is set. It
// returns an error matching errors.ErrUnsupported when the wrapped store
// does not implement store.Updater.
func (f *Faulty) Update(ctx context.Context, id store.LimitID, spec store.Spec) error {
	if err := f.fail(); err != nil {
		return err
	}
	u, ok := f.inner.(store.Updater)
	if !ok {
		return fmt.Errorf("store: %T cannot update a limit in place: %w", f.inner, errors.ErrUnsupported)
	}
	return u.Update(ctx, id, spec)
}

// Reset resets key of limit id on the wrapped store unless an error is set.
// It returns an error matching errors.ErrUnsupported when the wrapped store
// does not implement store.Resetter.
func (f *Faulty) Reset(ctx context.Context, id store.LimitID, key string) error {
	if err := f.fail(); err != nil {
		return err
	}
	r, ok := f.inner.(store.Resetter)
	if !ok {
		return fmt.Errorf("store: %T cannot reset a key: %w", f.inner, errors.ErrUnsupported)
	}
	return r.Reset(ctx, id, key)
}

// Refund gives back req's hits on the wrapped store unless an error is set.
// It returns an error matching errors.ErrUnsupported when the wrapped store
// does not implement store.Refunder.
func (f *Faulty) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	if err := f.fail(); err != nil {
		return err
	}
	r, ok := f.inner.(store.Refunder)
	if !ok {
		return fmt.Errorf("store: %T cannot refund: %w", f.inner, errors.ErrUnsupported)
	}
	return r.Refund(ctx, req, res)
}
