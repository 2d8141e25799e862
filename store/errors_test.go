package store_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

func TestUnavailable(t *testing.T) {
	err := store.Unavailable(context.DeadlineExceeded)
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v does not match both ErrUnavailable and its cause", err)
	}
	if got, want := err.Error(), "store: unavailable: context deadline exceeded"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	var ue *store.UnavailableError
	if !errors.As(err, &ue) || ue.Cause != context.DeadlineExceeded {
		t.Fatalf("errors.As: %v", ue)
	}
	if errors.Is(store.ErrLeaseNotHeld, store.ErrUnavailable) || errors.Is(io.EOF, store.ErrUnavailable) {
		t.Fatal("unrelated errors match ErrUnavailable")
	}
	if got := (&store.UnavailableError{}).Error(); got != "store: unavailable" {
		t.Fatalf("no cause: %q", got)
	}
}

// TestFaulty checks that a failing Faulty charges nothing and that the
// wrapped store resumes where it was.
func TestFaulty(t *testing.T) {
	f := storetest.NewFaulty(store.NewMemory())
	id, err := f.Register(ctx, store.Spec{Name: "x", Algorithm: store.Concurrency, Limit: 1, LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var req store.Request
	var res store.Result
	req.Add(id, "k", 1)
	if err := f.Decide(ctx, &req, &res); err != nil || !res.Allowed {
		t.Fatalf("pass-through: %v %+v", err, res.Decision())
	}
	lease := res.Hits[0].Lease
	f.SetErr(store.Unavailable(io.ErrUnexpectedEOF))
	if err := f.Decide(ctx, &req, &res); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Decide while failing: %v", err)
	}
	if err := f.Release(ctx, lease, 0); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Release while failing: %v", err)
	}
	if _, err := f.Register(ctx, store.Spec{Name: "y", Algorithm: store.FixedWindow, Limit: 1, Window: time.Second}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Register while failing: %v", err)
	}
	if n := f.Failed(); n != 3 {
		t.Fatalf("Failed() = %d, want 3", n)
	}
	f.SetErr(nil)
	if err := f.Release(ctx, lease, 0); err != nil {
		t.Fatalf("Release after recovery: %v", err)
	}
	if err := f.Decide(ctx, &req, &res); err != nil || !res.Allowed {
		t.Fatalf("Decide after recovery: %v %+v", err, res.Decision())
	}
}
