package storetest_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestSpecOfAdmitsLimitPerPeriod: SpecOf's spec of every algorithm is
// valid, admits limit at once on Memory and not one more, and after period
// (the whole window, refill or lease) admits again.
func TestSpecOfAdmitsLimitPerPeriod(t *testing.T) {
	for _, alg := range []store.Algorithm{store.TokenBucket, store.FixedWindow, store.SlidingWindow, store.SlidingLog, store.Concurrency} {
		spec := storetest.SpecOf(alg, "x", 3, time.Second)
		if spec.Name != "x" || spec.Algorithm != alg || spec.Limit != 3 {
			t.Fatalf("%v: %+v", alg, spec)
		}
		m := store.NewMemory()
		id := storetest.MustRegister(t, m, spec)
		decide := func(now int64) bool {
			req := store.Request{Now: now}
			req.Add(id, "k", 1)
			var res store.Result
			if err := m.Decide(t.Context(), &req, &res); err != nil {
				t.Fatal(err)
			}
			return res.Allowed
		}
		for i := range 3 {
			if !decide(0) {
				t.Fatalf("%v: request %d of 3 rejected", alg, i+1)
			}
		}
		if decide(0) {
			t.Fatalf("%v: a fourth request admitted", alg)
		}
		if !decide(int64(2 * time.Second)) {
			t.Fatalf("%v: rejected a period later", alg)
		}
	}
}
