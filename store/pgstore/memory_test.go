package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/store"
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
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		spec := func(i int) store.Spec {
			s := store.Spec{Name: fmt.Sprintf("l%d-%d", n, i), Limit: rapid.Int64Range(1, 6).Draw(rt, "limit")}
			switch rapid.IntRange(0, 4).Draw(rt, "algorithm") {
			case 0:
				s.Algorithm, s.Rate = store.TokenBucket, concurrency.Per(s.Limit, time.Duration(rapid.IntRange(5, 40).Draw(rt, "ms"))*time.Millisecond)
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
			pids[i], mids[i] = mustRegister(t, pg, sp), mustRegister(t, m, sp)
		}
		keys := []string{"a", "b"}
		for step := range 15 {
			var preq, mreq store.Request
			for h := range rapid.IntRange(1, 2).Draw(rt, "hits") {
				i := rapid.IntRange(0, 1).Draw(rt, "limit_index")
				k := keys[rapid.IntRange(0, 1).Draw(rt, "key")]
				cost := rapid.Int64Range(0, 7).Draw(rt, "cost")
				preq.Add(pids[i], k, cost)
				mreq.Add(mids[i], k, cost)
				_ = h
			}
			var pres, mres store.Result
			if err := pg.Decide(ctx, &preq, &pres); err != nil {
				rt.Fatal(err)
			}
			mreq.Now = pres.Now
			if err := m.Decide(ctx, &mreq, &mres); err != nil {
				rt.Fatal(err)
			}
			if pres.Allowed != mres.Allowed || pres.N != mres.N || pres.Decider != mres.Decider {
				rt.Fatalf("step %d at %v: PostgreSQL %+v, Memory %+v", step, time.Unix(0, pres.Now).UTC(), pres, mres)
			}
			for i := range pres.N {
				if pd, md := pres.Hits[i].Decision, mres.Hits[i].Decision; pd != md {
					rt.Fatalf("step %d hit %d at %v: PostgreSQL %+v, Memory %+v", step, i, time.Unix(0, pres.Now).UTC(), pd, md)
				}
			}
		}
	})
}
