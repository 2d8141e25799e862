package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/clock"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return store.NewMemory() })
}

func TestZeroMemoryConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return new(store.Memory) })
}

// TestFaultyConformance runs the harness through a Faulty with no error
// set: it must pass every call through unchanged.
func TestFaultyConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return storetest.NewFaulty(store.NewMemory()) })
}

// serverClock is a Memory that decides on its own clock, like a network
// store on its server's: it ignores Request.Now and the now of Release.
type serverClock struct{ *store.Memory }

func (s serverClock) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	r := *req
	r.Now = clock.Now()
	return s.Memory.Decide(ctx, &r, res)
}

func (s serverClock) Release(ctx context.Context, l store.Lease, _ int64) error {
	return s.Memory.Release(ctx, l, clock.Now())
}

// Refund gives back on the store's clock too, as Refunder says a network
// store does.
func (s serverClock) Refund(ctx context.Context, req *store.Request, res *store.Result) error {
	r := *req
	r.Now = clock.Now()
	return s.Memory.Refund(ctx, &r, res)
}

// TestServerTimeConformance runs the harness's server-time mode (real
// sleeps instead of a controlled now) on a Memory that reads its own clock,
// inside a synctest bubble, where the sleeps take no real time.
func TestServerTimeConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return serverClock{store.NewMemory()} },
		storetest.WithServerTime(400*time.Millisecond), storetest.WithWrapper(synctest.Test))
}

// onlyStore hides every method of a Store but the Store interface's.
type onlyStore struct{ store.Store }

// TestFaultyWithoutUpdaterConformance: a Faulty around a store without
// Update answers errors.ErrUnsupported, and the harness skips the Update
// cases rather than fail them.
func TestFaultyWithoutUpdaterConformance(t *testing.T) {
	f := storetest.NewFaulty(onlyStore{store.NewMemory()})
	err := f.Update(context.Background(), 1, store.Spec{Name: "x"})
	if !errors.Is(err, errors.ErrUnsupported) || !strings.HasPrefix(err.Error(), "store: ") {
		t.Fatalf("Update through a Faulty around a store without it: %v", err)
	}
	storetest.Run(t, func(*testing.T) store.Store { return storetest.NewFaulty(onlyStore{store.NewMemory()}) })
}
