package sqlquota

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// TestUsageIsDecideAtCostZero: a reading on store.Memory (which Decide
// at cost 0 charges nothing) reports what the key took, the window it is
// in on the calendar, and charges nothing; an unknown id is
// store.ErrUnknownLimit.
func TestUsageIsDecideAtCostZero(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	mem := atClock{Memory: store.NewMemory(), now: now.UnixNano()}
	spec := store.Spec{Name: "month", Algorithm: store.FixedWindow, Limit: 10, Calendar: store.Calendar{Months: 1}}
	id, err := mem.Register(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	limits := Limits{Backend: "test"}
	if lid, err := limits.Register(spec); err != nil || lid != id {
		t.Fatalf("registry id %d, memory's %d: %v", lid, id, err)
	}
	var req store.Request
	req.Add(id, "acme", 3)
	if err := mem.Decide(ctx, &req, new(store.Result)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		u, err := Usage(ctx, mem, &limits, id, "acme")
		if err != nil {
			t.Fatal(err)
		}
		want := store.Usage{
			Limit: 10, Used: 3, Remaining: 7,
			Start: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC),
			ResetAfter: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC).Sub(now), Now: now,
		}
		if u != want {
			t.Fatalf("usage %+v, want %+v", u, want)
		}
	}
	if _, err := Usage(ctx, mem, &limits, id+1, "acme"); !errors.Is(err, store.ErrUnknownLimit) {
		t.Fatalf("an unknown id: %v", err)
	}
}

// atClock is a Memory that decides at now, as a SQL store decides on the
// database's clock whatever the request's Now.
type atClock struct {
	*store.Memory
	now int64
}

func (m atClock) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	req.Now = m.now
	return m.Memory.Decide(ctx, req, res)
}
