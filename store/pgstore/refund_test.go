package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/pgstore"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestRefundNeverGoesBelowEmpty: a refund of more than was charged leaves
// the key empty (its whole limit, no more), on every algorithm, and a key
// never charged has nothing to give back.
func TestRefundNeverGoesBelowEmpty(t *testing.T) {
	s := newStore(t, sharedPool(t))
	ctx := context.Background()
	for _, spec := range []store.Spec{
		{Name: "fixed", Algorithm: store.FixedWindow, Limit: 3, Window: 24 * time.Hour},
		{Name: "sliding", Algorithm: store.SlidingWindow, Limit: 3, Window: 24 * time.Hour},
		{Name: "bucket", Algorithm: store.TokenBucket, Limit: 3, Rate: ratelimit.Rate{Count: 3, Per: 24 * time.Hour}},
	} {
		id := storetest.MustRegister(t, s, spec)
		res := storetest.Decide(t, s, id, "k", 1)
		var req store.Request
		req.Add(id, "k", 100)
		if err := s.Refund(ctx, &req, res); err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		var never store.Request
		never.Add(id, "never", 1)
		if err := s.Refund(ctx, &never, res); err != nil {
			t.Fatalf("%s: refund of a key never charged: %v", spec.Name, err)
		}
		admitted := 0
		for range 5 {
			if storetest.Decide(t, s, id, "k", 1).Allowed {
				admitted++
			}
		}
		if admitted != 3 {
			t.Errorf("%s: %d admitted after an over-refund, want the limit, 3", spec.Name, admitted)
		}
		if u, err := s.Usage(ctx, id, "never"); err != nil || u.Used != 0 {
			t.Errorf("%s: a key never charged uses %d after a refund (%v), want 0", spec.Name, u.Used, err)
		}
	}
	var req store.Request
	req.Add(1000, "k", 1)
	if err := s.Refund(ctx, &req, &store.Result{Allowed: true, N: 1}); !errors.Is(err, store.ErrUnknownLimit) {
		t.Errorf("refund on an unknown limit: %v, want ErrUnknownLimit", err)
	}
}

// TestMigrateDropsTheFormerRefund: Migrate over a schema of a former
// version, whose refund function gave back in the window of the refund's
// time or a bucket's whole cost, leaves only the refund that takes the
// admission's instant and each bucket's paid-off instant.
func TestMigrateDropsTheFormerRefund(t *testing.T) {
	p := sharedPool(t)
	ctx := context.Background()
	name := testSchema(t, p)
	s, err := pgstore.New(p, pgstore.WithSchema(name))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The former signatures, as schemas migrated before held them.
	for _, args := range []string{"", ", at bigint"} {
		if _, err := p.Exec(ctx, `CREATE FUNCTION "`+name+`".refund(names text[], kinds smallint[], keys bytea[], costs bigint[],
			limits bigint[], params bigint[], shifts bigint[], months int[], wait_ms int`+args+`) RETURNS bigint
			LANGUAGE sql AS 'SELECT 0::bigint'`); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_proc WHERE proname = 'refund' AND pronamespace = $1::text::regnamespace`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d refund functions after Migrate, want 1 (the former ones dropped)", n)
	}
	id := storetest.MustRegister(t, s, store.Spec{Name: "bucket", Algorithm: store.TokenBucket, Limit: 2,
		Rate: ratelimit.Rate{Count: 2, Per: time.Hour}})
	res := storetest.Decide(t, s, id, "k", 1)
	var req store.Request
	req.Add(id, "k", 1)
	if err := s.Refund(ctx, &req, res); err != nil {
		t.Fatalf("Refund after Migrate over the former schema: %v", err)
	}
}
