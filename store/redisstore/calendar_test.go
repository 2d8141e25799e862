package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestWindowsOnTheCalendarAsMemory: a window limit on Redis (deciding on
// the server's clock) places its windows where Memory places them at the
// same instant, for every kind of calendar: the wait to the window's end
// agrees to the microsecond (Redis's TIME resolution).
func TestWindowsOnTheCalendarAsMemory(t *testing.T) {
	c := sharedClient(t)
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
			ctx := context.Background()
			spec := store.Spec{Name: fmt.Sprint("cal", i), Algorithm: tc.alg, Limit: 5, Window: tc.w, Calendar: tc.cal}
			r := newStore(t, c, testPrefix(t, c))
			rid := storetest.MustRegister(t, r, spec)
			m := store.NewMemory()
			mid := storetest.MustRegister(t, m, spec)
			var req store.Request
			var rres, mres store.Result
			req.Add(rid, "k", 1)
			if err := r.Decide(ctx, &req, &rres); err != nil {
				t.Fatal(err)
			}
			req = store.Request{Now: rres.Now}
			req.Add(mid, "k", 1)
			if err := m.Decide(ctx, &req, &mres); err != nil {
				t.Fatal(err)
			}
			rd, md := rres.Hits[0].Decision, mres.Hits[0].Decision
			if !rd.Allowed() || !md.Allowed() || rd.Remaining != md.Remaining {
				t.Fatalf("Redis %+v, Memory %+v", rd, md)
			}
			if diff := rd.ResetAfter - md.ResetAfter; diff < -2*time.Microsecond || diff > 2*time.Microsecond {
				t.Fatalf("window ends in %v on Redis, %v on Memory (at %v)", rd.ResetAfter, md.ResetAfter,
					time.Unix(0, rres.Now).UTC())
			}
		})
	}
}
