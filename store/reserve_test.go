package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// TestReserveAfterRateUpdate: a token bucket whose rate changed in place
// (a warped clock) reserves slots at the new rate, in real time, and a
// cancelled latest reservation gives its slot back.
func TestReserveAfterRateUpdate(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory()
	spec := store.Spec{Name: "b", Algorithm: store.TokenBucket, Limit: 1, Rate: ratelimit.Per(1, 10*time.Second)}
	id, err := m.Register(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1) << 50
	decide := func() (*store.Request, *store.Result) {
		req := &store.Request{Now: now}
		req.Add(id, "k", 1)
		req.Hits[0].MaxWait = time.Minute
		res := new(store.Result)
		if err := m.Decide(ctx, req, res); err != nil {
			t.Fatal(err)
		}
		return req, res
	}
	if _, res := decide(); !res.Allowed || res.Wait != 0 {
		t.Fatalf("%+v", res)
	}
	spec.Rate = ratelimit.Per(1, 20*time.Second)
	if err := m.Update(ctx, id, spec); err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 2; k++ {
		if _, res := decide(); !res.Allowed || res.Wait != time.Duration(k)*20*time.Second {
			t.Fatalf("reservation %d: %+v, want a wait of %v", k, res, time.Duration(k)*20*time.Second)
		}
	}
	req, res := decide() // at 60 s
	if err := m.Refund(ctx, req, res); err != nil {
		t.Fatal(err)
	}
	if _, res := decide(); !res.Allowed || res.Wait != 60*time.Second {
		t.Fatalf("after cancelling the latest: %+v, want a wait of 60s", res)
	}
}
