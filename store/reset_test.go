package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// TestResetForgetsOneKey: Reset gives one key of one limit its whole
// limit back and leaves the other keys, and other limits, as they were.
func TestResetForgetsOneKey(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	for _, spec := range []store.Spec{
		{Name: "daily", Algorithm: store.FixedWindow, Limit: 2, Window: 24 * time.Hour},
		{Name: "log", Algorithm: store.SlidingLog, Limit: 2, Window: time.Hour},
		{Name: "inflight", Algorithm: store.Concurrency, Limit: 2, LeaseTTL: time.Hour},
	} {
		id, err := m.Register(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		hit := func(key string) bool {
			req := store.Request{Now: int64(1) << 50}
			req.Add(id, key, 1)
			var res store.Result
			if err := m.Decide(ctx, &req, &res); err != nil {
				t.Fatal(err)
			}
			return res.Allowed
		}
		for _, key := range []string{"a", "a", "b", "b"} {
			hit(key)
		}
		if hit("a") || hit("b") {
			t.Fatalf("%s: admitted over the limit", spec.Name)
		}
		if err := m.Reset(ctx, id, "a"); err != nil {
			t.Fatal(err)
		}
		if !hit("a") || !hit("a") || hit("a") {
			t.Fatalf("%s: a reset key does not have exactly its limit back", spec.Name)
		}
		if hit("b") {
			t.Fatalf("%s: resetting a reset b too", spec.Name)
		}
		if err := m.Reset(ctx, id, "never-seen"); err != nil {
			t.Fatalf("%s: resetting an unknown key: %v", spec.Name, err)
		}
	}
	if err := m.Reset(ctx, 99, "a"); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("unknown limit: %v", err)
	}
}
