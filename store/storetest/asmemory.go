package storetest

import (
	"context"
	"slices"
	"time"

	"github.com/sluicehq/sluice/store"
)

// TB is what DecideAsMemory needs of a test: the methods *testing.T and
// *rapid.T share.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// DecideAsMemory decides req on s, a store deciding on its server's clock,
// then mreq (the same hits on m's LimitIDs) on m at the instant s
// reported, and fails t unless the two decided alike to the nanosecond:
// Allowed, N, Decider and every evaluated HitResult. backend names s in
// the failure. It returns both results, for a refund of each, say. It
// blocks for s's round trip.
func DecideAsMemory(t TB, backend string, s store.Store, req *store.Request, m *store.Memory, mreq *store.Request) (res, mres *store.Result) {
	t.Helper()
	ctx := context.Background()
	res, mres = new(store.Result), new(store.Result)
	if err := s.Decide(ctx, req, res); err != nil {
		t.Fatalf("%s: %v", backend, err)
	}
	mreq.Now = res.Now
	if err := m.Decide(ctx, mreq, mres); err != nil {
		t.Fatalf("Memory: %v", err)
	}
	if res.Allowed != mres.Allowed || res.N != mres.N || res.Decider != mres.Decider || !slices.Equal(res.Hits[:res.N], mres.Hits[:mres.N]) {
		t.Fatalf("at %v: %s %+v, Memory %+v", time.Unix(0, res.Now).UTC(), backend, res, mres)
	}
	return res, mres
}
