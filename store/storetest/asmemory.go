package storetest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/ratelimit"
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

// DecidesAsMemory is a property test of s, a store deciding on its
// server's clock (named backend in failures) that keeps token buckets,
// fixed windows and, when sliding, sliding windows: any sequence of
// requests (one or two hits, on one or two keys of two fresh limits,
// random costs) decided on s gets the very decisions store.Memory makes
// when it decides the same requests at the instants s reported (see
// DecideAsMemory), over short windows that roll over during the run, on
// calendar months and on zones. When s is a store.Refunder, an admitted
// request of windows of a day or more (which do not roll over between a
// decision and its refund) is now and then refunded on both, on s at its
// own later instant. It registers limits on s under fresh names and
// blocks for a round trip per decision.
func DecidesAsMemory(t *testing.T, backend string, s store.Store, sliding bool) {
	t.Helper()
	ctx := context.Background()
	short := func(rt *rapid.T) time.Duration {
		return time.Duration(rapid.IntRange(5, 40).Draw(rt, "ms")) * time.Millisecond
	}
	algorithms := []func(rt *rapid.T, sp *store.Spec){
		func(rt *rapid.T, sp *store.Spec) {
			sp.Algorithm, sp.Rate = store.TokenBucket, ratelimit.Per(sp.Limit, short(rt))
		},
		func(rt *rapid.T, sp *store.Spec) { sp.Algorithm, sp.Window = store.FixedWindow, short(rt) },
		func(rt *rapid.T, sp *store.Spec) {
			sp.Algorithm, sp.Calendar = store.FixedWindow, store.Calendar{Months: rapid.IntRange(1, 12).Draw(rt, "months")}
		},
		func(rt *rapid.T, sp *store.Spec) {
			sp.Algorithm, sp.Window = store.FixedWindow, 24*time.Hour
			sp.Calendar = store.Calendar{Offset: time.Duration(rapid.IntRange(-14*60, 14*60).Draw(rt, "offset_min")) * time.Minute}
		},
	}
	if sliding {
		algorithms = append(algorithms,
			func(rt *rapid.T, sp *store.Spec) { sp.Algorithm, sp.Window = store.SlidingWindow, short(rt) },
			func(_ *rapid.T, sp *store.Spec) {
				sp.Algorithm, sp.Calendar = store.SlidingWindow, store.Calendar{Months: 1, Offset: -9 * time.Hour}
			})
	}
	refunder, _ := s.(store.Refunder)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		m := store.NewMemory()
		var ids, mids [2]store.LimitID
		var long [2]bool // a fixed window of a day or more
		for i := range 2 {
			sp := store.Spec{Name: fmt.Sprintf("l%d-%d", n, i), Limit: rapid.Int64Range(1, 6).Draw(rt, "limit")}
			algorithms[rapid.IntRange(0, len(algorithms)-1).Draw(rt, "algorithm")](rt, &sp)
			ids[i], mids[i] = MustRegister(t, s, sp), MustRegister(t, m, sp)
			long[i] = sp.Algorithm == store.FixedWindow && (sp.Window >= 24*time.Hour || sp.Calendar.Months > 0)
		}
		keys := []string{"a", "b"}
		for range 15 {
			var req, mreq store.Request
			refundable := refunder != nil
			for range rapid.IntRange(1, 2).Draw(rt, "hits") {
				i := rapid.IntRange(0, 1).Draw(rt, "limit_index")
				refundable = refundable && long[i]
				k := keys[rapid.IntRange(0, 1).Draw(rt, "key")]
				cost := rapid.Int64Range(0, 7).Draw(rt, "cost")
				req.Add(ids[i], k, cost)
				mreq.Add(mids[i], k, cost)
			}
			res, mres := DecideAsMemory(rt, backend, s, &req, m, &mreq)
			if res.Allowed && refundable && rapid.Bool().Draw(rt, "refund") {
				if err := refunder.Refund(ctx, &req, res); err != nil {
					rt.Fatalf("%s: %v", backend, err)
				}
				mreq.Now = res.Now // Memory refunds at the decision's instant
				if err := m.Refund(ctx, &mreq, mres); err != nil {
					rt.Fatalf("Memory: %v", err)
				}
			}
		}
	})
}

// HugeDecideAsMemory tests that at the largest limits, windows and costs a
// Spec accepts, s (as in DecidesAsMemory) neither overflows (which would
// fail the decision) nor decides otherwise than store.Memory, on token
// buckets, fixed windows and, when sliding, sliding windows. It registers
// limits named after their subtests on s and blocks for a round trip per
// decision.
func HugeDecideAsMemory(t *testing.T, backend string, s store.Store, sliding bool) {
	t.Helper()
	m := store.NewMemory()
	const longest = time.Duration(1) << 59
	specs := []store.Spec{
		{Name: "bucket", Algorithm: store.TokenBucket, Limit: 1 << 40, Rate: ratelimit.Per(1, 1<<19)},
		{Name: "bucket-max", Algorithm: store.TokenBucket, Limit: math.MaxInt64 >> 40, Rate: ratelimit.Per(1, time.Duration(1)<<(59-23))},
		{Name: "fixed", Algorithm: store.FixedWindow, Limit: 1 << 58, Window: longest},
		{Name: "fixed-year", Algorithm: store.FixedWindow, Limit: 1 << 40, Calendar: store.Calendar{Months: 12, Offset: 14 * time.Hour}},
		{Name: "fixed-quarter-west", Algorithm: store.FixedWindow, Limit: 1 << 50, Calendar: store.Calendar{Months: 3, Offset: -12 * time.Hour}},
	}
	if sliding {
		specs = append(specs,
			store.Spec{Name: "sliding", Algorithm: store.SlidingWindow, Limit: 1<<30 - 1, Window: longest},
			store.Spec{Name: "sliding-month", Algorithm: store.SlidingWindow, Limit: 1<<27 - 1, Calendar: store.Calendar{Months: 12}})
	}
	for _, spec := range specs {
		t.Run(spec.Name, func(t *testing.T) {
			if err := spec.Validate(); err != nil {
				t.Fatalf("the test's spec: %v", err)
			}
			id, mid := MustRegister(t, s, spec), MustRegister(t, m, spec)
			l := spec.Limit
			for _, cost := range []int64{l / 2, l / 2, l, 1, l - 1, 0, math.MaxInt64, l/2 + 1, 1} {
				var req, mreq store.Request
				req.Add(id, "k", cost)
				req.Add(id, "k", cost/3)
				mreq.Add(mid, "k", cost)
				mreq.Add(mid, "k", cost/3)
				DecideAsMemory(t, fmt.Sprintf("%s, cost %d", backend, cost), s, &req, m, &mreq)
			}
		})
	}
}

// WindowsAsMemory tests that window limits on the store newStore returns
// (one per subtest, deciding on its server's clock; backend names it in
// failures) place their windows where store.Memory places them at the
// same instant, for every kind of calendar (days, weeks, zone offsets,
// months, quarters, years; sliding windows too): a fresh key's first
// decision is admitted on both with the same Remaining, and its wait to
// the window's end agrees within tolerance (the server clock's
// resolution, or 0). It blocks for a round trip per subtest.
func WindowsAsMemory(t *testing.T, backend string, newStore func(t *testing.T) store.Store, tolerance time.Duration) {
	t.Helper()
	for i, tc := range []struct {
		alg store.Algorithm
		w   time.Duration
		cal store.Calendar
	}{
		{store.FixedWindow, 24 * time.Hour, store.Calendar{}},
		{store.FixedWindow, 7 * 24 * time.Hour, store.Calendar{}},
		{store.FixedWindow, 24 * time.Hour, store.Calendar{Offset: -5 * time.Hour}},
		{store.FixedWindow, time.Hour, store.Calendar{Offset: 5*time.Hour + 30*time.Minute}},
		{store.FixedWindow, 0, store.Calendar{Months: 1}},
		{store.FixedWindow, 0, store.Calendar{Months: 3, Offset: 9 * time.Hour}},
		{store.FixedWindow, 0, store.Calendar{Months: 12, Offset: -14 * time.Hour}},
		{store.SlidingWindow, 24 * time.Hour, store.Calendar{Offset: -8 * time.Hour}},
		{store.SlidingWindow, 0, store.Calendar{Months: 1}},
	} {
		t.Run(fmt.Sprintf("%v/%v/%+v", tc.alg, tc.w, tc.cal), func(t *testing.T) {
			spec := store.Spec{Name: fmt.Sprint("cal", i), Algorithm: tc.alg, Limit: 5, Window: tc.w, Calendar: tc.cal}
			s, m := newStore(t), store.NewMemory()
			res := Decide(t, s, MustRegister(t, s, spec), "k", 1)
			req := store.Request{Now: res.Now}
			req.Add(MustRegister(t, m, spec), "k", 1)
			var mres store.Result
			if err := m.Decide(context.Background(), &req, &mres); err != nil {
				t.Fatal(err)
			}
			d, md := res.Hits[0].Decision, mres.Hits[0].Decision
			if !d.Allowed() || !md.Allowed() || d.Remaining != md.Remaining {
				t.Fatalf("%s %+v, Memory %+v", backend, d, md)
			}
			if diff := d.ResetAfter - md.ResetAfter; diff < -tolerance || diff > tolerance {
				t.Fatalf("window ends in %v on %s, %v on Memory (at %v)", d.ResetAfter, backend, md.ResetAfter,
					time.Unix(0, res.Now).UTC())
			}
		})
	}
}
