package mysqlstore_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestDecisionsAsMemoryAtTheSameInstants: any sequence of requests (one or
// two hits, on one or two keys, random costs) decided on MariaDB gets the
// very decisions Memory makes when it decides the same requests at the
// instants the database reported: admissions, Remaining, RetryAfter and
// ResetAfter to the nanosecond, for token buckets and fixed windows, over
// short windows that roll over during the run and on calendar months and
// zones, with refunds of admitted requests on long windows between them.
func TestDecisionsAsMemoryAtTheSameInstants(t *testing.T) {
	my := newStore(t, sharedDB(t))
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		spec := func(i int) store.Spec {
			s := store.Spec{Name: fmt.Sprintf("l%d-%d", n, i), Limit: rapid.Int64Range(1, 6).Draw(rt, "limit")}
			switch rapid.IntRange(0, 3).Draw(rt, "algorithm") {
			case 0:
				s.Algorithm, s.Rate = store.TokenBucket, ratelimit.Per(s.Limit, time.Duration(rapid.IntRange(5, 40).Draw(rt, "ms"))*time.Millisecond)
			case 1:
				s.Algorithm, s.Window = store.FixedWindow, time.Duration(rapid.IntRange(5, 40).Draw(rt, "ms"))*time.Millisecond
			case 2:
				s.Algorithm, s.Calendar = store.FixedWindow, store.Calendar{Months: rapid.IntRange(1, 12).Draw(rt, "months")}
			default:
				s.Algorithm, s.Window = store.FixedWindow, 24*time.Hour
				s.Calendar = store.Calendar{Offset: time.Duration(rapid.IntRange(-14*60, 14*60).Draw(rt, "offset_min")) * time.Minute}
			}
			return s
		}
		m := store.NewMemory()
		var ids, mids [2]store.LimitID
		var long [2]bool // a window of a day or more: it does not roll over between a decision and its refund
		for i := range 2 {
			sp := spec(i)
			ids[i], mids[i] = storetest.MustRegister(t, my, sp), storetest.MustRegister(t, m, sp)
			long[i] = sp.Algorithm == store.FixedWindow && (sp.Window >= 24*time.Hour || sp.Calendar.Months > 0)
		}
		keys := []string{"a", "b"}
		for range 15 {
			var req, mreq store.Request
			refundable := true
			for range rapid.IntRange(1, 2).Draw(rt, "hits") {
				i := rapid.IntRange(0, 1).Draw(rt, "limit_index")
				refundable = refundable && long[i]
				k := keys[rapid.IntRange(0, 1).Draw(rt, "key")]
				cost := rapid.Int64Range(0, 7).Draw(rt, "cost")
				req.Add(ids[i], k, cost)
				mreq.Add(mids[i], k, cost)
			}
			res, mres := storetest.DecideAsMemory(rt, "MariaDB", my, &req, m, &mreq)
			// Now and then an admitted request of long windows is refunded,
			// on both (on MariaDB at its own later instant, in the same
			// window).
			if res.Allowed && refundable && rapid.Bool().Draw(rt, "refund") {
				if err := my.Refund(ctx, &req, res); err != nil {
					rt.Fatal(err)
				}
				mreq.Now = res.Now // Memory refunds at the decision's instant
				if err := m.Refund(ctx, &mreq, mres); err != nil {
					rt.Fatal(err)
				}
			}
		}
	})
}

// TestHugeLimitsAndWindowsDecideAsMemory: at the largest limits, windows
// and costs a Spec accepts, the database's arithmetic neither overflows
// (MariaDB fails a BIGINT overflow, which would fail the decision) nor
// differs from Memory's.
func TestHugeLimitsAndWindowsDecideAsMemory(t *testing.T) {
	my := newStore(t, sharedDB(t))
	m := store.NewMemory()
	const longest = time.Duration(1) << 59
	specs := []store.Spec{
		{Name: "bucket", Algorithm: store.TokenBucket, Limit: 1 << 40, Rate: ratelimit.Per(1, 1<<19)},
		{Name: "bucket-max", Algorithm: store.TokenBucket, Limit: math.MaxInt64 >> 40, Rate: ratelimit.Per(1, time.Duration(1)<<(59-23))},
		{Name: "fixed", Algorithm: store.FixedWindow, Limit: 1 << 58, Window: longest},
		{Name: "fixed-year", Algorithm: store.FixedWindow, Limit: 1 << 40, Calendar: store.Calendar{Months: 12, Offset: 14 * time.Hour}},
		{Name: "fixed-quarter-west", Algorithm: store.FixedWindow, Limit: 1 << 50, Calendar: store.Calendar{Months: 3, Offset: -12 * time.Hour}},
	}
	for _, spec := range specs {
		t.Run(spec.Name, func(t *testing.T) {
			if err := spec.Validate(); err != nil {
				t.Fatalf("the test's spec: %v", err)
			}
			id, mid := storetest.MustRegister(t, my, spec), storetest.MustRegister(t, m, spec)
			l := spec.Limit
			for _, cost := range []int64{l / 2, l / 2, l, 1, l - 1, 0, math.MaxInt64, l/2 + 1, 1} {
				var req, mreq store.Request
				req.Add(id, "k", cost)
				req.Add(id, "k", cost/3)
				mreq.Add(mid, "k", cost)
				mreq.Add(mid, "k", cost/3)
				storetest.DecideAsMemory(t, fmt.Sprintf("MariaDB, cost %d", cost), my, &req, m, &mreq)
			}
		})
	}
}
