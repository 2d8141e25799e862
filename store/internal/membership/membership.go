// Package membership is a remote store's side of package fallback: the
// one instance that every Fallback around the store counts as (Instance),
// heartbeating through one call of the store's (Beat), and the Fallbacks
// made around it, their log lines naming the backend. redisstore, pgstore
// and mysqlstore keep one Instance each; what a beat is on the wire stays
// in each store.
package membership

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
)

// Beat is a remote store's heartbeat call: with join, record this
// instance as live (joining when it is not counted) and return how many
// instances beat within memory; without join (memory 0), take this
// instance out of the count. It must be safe for concurrent use and
// return fallback.Membership's errors.
type Beat func(ctx context.Context, memory time.Duration, join bool) (int64, error)

// Instance is one instance of a remote store among those that share its
// limits: the Fallbacks made by its Fallback method count as this one
// instance, which leaves when the last of them closes. It is safe for
// concurrent use; use New, the zero value is not usable.
type Instance struct {
	backend string
	shared  *fallback.Shared
}

// New returns the Instance that beats through beat, whose Fallbacks' log
// lines name backend ("Redis", "PostgreSQL").
func New(backend string, beat Beat) *Instance {
	return &Instance{backend: backend, shared: fallback.NewShared(members(beat))}
}

// Fallback returns a fallback.Store around remote that counts as this
// instance, with fallback.WithBackendName of the instance's backend before
// opts (so that one of the caller's names another). Errors are
// fallback.New's, the instance unchanged.
func (in *Instance) Fallback(remote store.Store, opts []fallback.Option) (*fallback.Store, error) {
	return in.shared.New(remote, append([]fallback.Option{fallback.WithBackendName(in.backend)}, opts...)...)
}

// members is a Beat as a fallback.Membership.
type members Beat

var _ fallback.Membership = members(nil)

// Beat joins (or refreshes) this instance and counts the live ones.
func (m members) Beat(ctx context.Context, memory time.Duration) (int64, error) {
	return m(ctx, memory, true)
}

// Leave takes this instance out of the count.
func (m members) Leave(ctx context.Context) error {
	_, err := m(ctx, 0, false)
	return err
}
