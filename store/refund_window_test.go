package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// TestRefundGoesToTheWindowThatCounted: a refund made after its window
// ended, when the next window has counted others, gives nothing back to
// that next window (which would then admit more than its limit).
func TestRefundGoesToTheWindowThatCounted(t *testing.T) {
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			m := store.NewMemory()
			ctx := context.Background()
			id, err := m.Register(ctx, store.Spec{Name: "w", Algorithm: alg, Limit: 4, Window: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			const w = int64(time.Minute)
			decide := func(now, cost int64) *store.Result {
				req := &store.Request{Now: now}
				req.Add(id, "k", cost)
				res := new(store.Result)
				if err := m.Decide(ctx, req, res); err != nil {
					t.Fatal(err)
				}
				return res
			}
			first := decide(100*w+w/2, 2) // two in one window
			if !first.Allowed {
				t.Fatal("first admissions refused")
			}
			next := 101*w + w/2
			// The next window takes what is left: all 4 for a fixed window,
			// 3 for a sliding one (the previous window's 2 weigh 1).
			left := decide(next, 0).Decision().Remaining
			if !decide(next, left).Allowed {
				t.Fatalf("the next window's %d refused", left)
			}
			req := &store.Request{Now: next}
			req.Add(id, "k", 2)
			if err := m.Refund(ctx, req, first); err != nil { // the first two did not count
				t.Fatal(err)
			}
			// A fixed window: nothing fits (its own 4 still count). A
			// sliding window: the previous window's weight is gone, one fits.
			want := int64(0)
			if alg == store.SlidingWindow {
				want = 1
			}
			if got := decide(next, 0).Decision().Remaining; got != want {
				t.Fatalf("after the refund of the previous window's two: Remaining %d, want %d", got, want)
			}
		})
	}
}
