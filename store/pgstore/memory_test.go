package pgstore_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestDecisionsAsMemoryAtTheSameInstants: any sequence of requests (two
// hits, on one or two keys, random costs) decided on PostgreSQL gets the
// very decisions Memory makes when it decides the same requests at the
// instants the database reported: admissions, Remaining, RetryAfter and
// ResetAfter to the nanosecond, for every algorithm the store keeps, over
// short windows that roll over during the run and on calendar months.
func TestDecisionsAsMemoryAtTheSameInstants(t *testing.T) {
	p := sharedPool(t)
	pg := newStore(t, p)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		spec := func(i int) store.Spec {
			s := store.Spec{Name: fmt.Sprintf("l%d-%d", n, i), Limit: rapid.Int64Range(1, 6).Draw(rt, "limit")}
			switch rapid.IntRange(0, 4).Draw(rt, "algorithm") {
			case 0:
				s.Algorithm, s.Rate = store.TokenBucket, ratelimit.Per(s.Limit, time.Duration(rapid.IntRange(5, 40).Draw(rt, "ms"))*time.Millisecond)
			case 1:
				s.Algorithm, s.Window = store.FixedWindow, time.Duration(rapid.IntRange(5, 40).Draw(rt, "ms"))*time.Millisecond
			case 2:
				s.Algorithm, s.Window = store.SlidingWindow, time.Duration(rapid.IntRange(5, 40).Draw(rt, "ms"))*time.Millisecond
			case 3:
				s.Algorithm, s.Calendar = store.FixedWindow, store.Calendar{Months: rapid.IntRange(1, 12).Draw(rt, "months")}
			default:
				s.Algorithm, s.Calendar = store.SlidingWindow, store.Calendar{Months: 1, Offset: -9 * time.Hour}
			}
			return s
		}
		m := store.NewMemory()
		var pids, mids [2]store.LimitID
		for i := range 2 {
			sp := spec(i)
			pids[i], mids[i] = storetest.MustRegister(t, pg, sp), storetest.MustRegister(t, m, sp)
		}
		keys := []string{"a", "b"}
		for range 15 {
			var preq, mreq store.Request
			for h := range rapid.IntRange(1, 2).Draw(rt, "hits") {
				i := rapid.IntRange(0, 1).Draw(rt, "limit_index")
				k := keys[rapid.IntRange(0, 1).Draw(rt, "key")]
				cost := rapid.Int64Range(0, 7).Draw(rt, "cost")
				preq.Add(pids[i], k, cost)
				mreq.Add(mids[i], k, cost)
				_ = h
			}
			storetest.DecideAsMemory(rt, "PostgreSQL", pg, &preq, m, &mreq)
		}
	})
}

// TestHugeLimitsAndWindowsDecideAsMemory: at the largest limits, windows
// and costs a Spec accepts, the database's arithmetic neither overflows
// (which would fail the decision) nor differs from Memory's.
func TestHugeLimitsAndWindowsDecideAsMemory(t *testing.T) {
	p := sharedPool(t)
	pg := newStore(t, p)
	m := store.NewMemory()
	const longest = time.Duration(1) << 59
	specs := []store.Spec{
		{Name: "bucket", Algorithm: store.TokenBucket, Limit: 1 << 40, Rate: ratelimit.Per(1, 1<<19)},
		{Name: "bucket-max", Algorithm: store.TokenBucket, Limit: math.MaxInt64 >> 40, Rate: ratelimit.Per(1, time.Duration(1)<<(59-23))},
		{Name: "fixed", Algorithm: store.FixedWindow, Limit: 1 << 58, Window: longest},
		{Name: "sliding", Algorithm: store.SlidingWindow, Limit: 1<<30 - 1, Window: longest},
		{Name: "sliding-month", Algorithm: store.SlidingWindow, Limit: 1<<27 - 1, Calendar: store.Calendar{Months: 12}},
		{Name: "fixed-year", Algorithm: store.FixedWindow, Limit: 1 << 40, Calendar: store.Calendar{Months: 12, Offset: 14 * time.Hour}},
	}
	for _, spec := range specs {
		t.Run(spec.Name, func(t *testing.T) {
			if err := spec.Validate(); err != nil {
				t.Fatalf("the test's spec: %v", err)
			}
			pid, mid := storetest.MustRegister(t, pg, spec), storetest.MustRegister(t, m, spec)
			l := spec.Limit
			for _, cost := range []int64{l / 2, l / 2, l, 1, l - 1, 0, math.MaxInt64, l/2 + 1, 1} {
				var preq, mreq store.Request
				preq.Add(pid, "k", cost)
				preq.Add(pid, "k", cost/3)
				mreq.Add(mid, "k", cost)
				mreq.Add(mid, "k", cost/3)
				storetest.DecideAsMemory(t, fmt.Sprintf("PostgreSQL, cost %d", cost), pg, &preq, m, &mreq)
			}
		})
	}
}
