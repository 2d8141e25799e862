package fallback_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/fallback"
)

// countedMembers counts the calls a Shared passes on.
type countedMembers struct{ beats, leaves atomic.Int64 }

func (m *countedMembers) Beat(context.Context, time.Duration) (int64, error) {
	m.beats.Add(1)
	return 1, nil
}

func (m *countedMembers) Leave(context.Context) error {
	m.leaves.Add(1)
	return nil
}

// TestSharedLeavesWithTheLastStore: the Stores a Shared makes around one
// remote are one instance: each beats through it, and the instance leaves
// once, when the last of them Closes; a Store New refused does not count.
func TestSharedLeavesWithTheLastStore(t *testing.T) {
	m := new(countedMembers)
	sh := fallback.NewShared(m)
	remote := store.NewMemory()
	a, err := sh.New(remote)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sh.New(remote)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.New(remote, fallback.WithTripAfter(0)); err == nil {
		t.Fatal("a bad option accepted")
	}
	if _, err := sh.New(nil); err == nil {
		t.Fatal("a nil remote accepted")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := m.leaves.Load(); n != 0 {
		t.Fatalf("left %d times with a Store still open", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := m.leaves.Load(); n != 1 {
		t.Fatalf("left %d times after the last Close, want 1", n)
	}
	if m.beats.Load() < 2 {
		t.Fatalf("%d beats from two Stores", m.beats.Load())
	}
	if _, err := fallback.NewShared(nil).New(remote); err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a Shared of no Membership: %v", err)
	}
}
