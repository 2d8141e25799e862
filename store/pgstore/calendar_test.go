package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// calCase is a window limit on a calendar.
type calCase struct {
	alg store.Algorithm
	w   time.Duration
	cal store.Calendar
}

// TestWindowsOnTheCalendarAsMemory: a window limit on PostgreSQL (deciding
// on the database's clock) places its windows where Memory places them at
// the same instant, for every kind of calendar: the wait to the window's
// end agrees to the microsecond (clock_timestamp()'s resolution).
func TestWindowsOnTheCalendarAsMemory(t *testing.T) {
	p := sharedPool(t)
	cases := []calCase{
		{store.FixedWindow, 24 * time.Hour, store.Calendar{}},
		{store.FixedWindow, 7 * 24 * time.Hour, store.Calendar{}},
		{store.FixedWindow, 24 * time.Hour, store.Calendar{Offset: -5 * time.Hour}},
		{store.FixedWindow, time.Hour, store.Calendar{Offset: 5*time.Hour + 30*time.Minute}},
		{store.FixedWindow, 0, store.Calendar{Months: 1}},
		{store.FixedWindow, 0, store.Calendar{Months: 3, Offset: 9 * time.Hour}},
		{store.FixedWindow, 0, store.Calendar{Months: 12, Offset: -14 * time.Hour}},
		{store.SlidingWindow, 24 * time.Hour, store.Calendar{Offset: -8 * time.Hour}},
		{store.SlidingWindow, 0, store.Calendar{Months: 1}},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%v/%v/%+v", tc.alg, tc.w, tc.cal), func(t *testing.T) {
			ctx := context.Background()
			spec := store.Spec{Name: fmt.Sprint("cal", i), Algorithm: tc.alg, Limit: 5, Window: tc.w, Calendar: tc.cal}
			pg := newStore(t, p)
			pid := storetest.MustRegister(t, pg, spec)
			m := store.NewMemory()
			mid := storetest.MustRegister(t, m, spec)
			pres := storetest.Decide(t, pg, pid, "k", 1)
			req := store.Request{Now: pres.Now}
			req.Add(mid, "k", 1)
			var mres store.Result
			if err := m.Decide(ctx, &req, &mres); err != nil {
				t.Fatal(err)
			}
			pd, md := pres.Hits[0].Decision, mres.Hits[0].Decision
			if !pd.Allowed() || !md.Allowed() || pd.Remaining != md.Remaining {
				t.Fatalf("PostgreSQL %+v, Memory %+v", pd, md)
			}
			if pd.ResetAfter != md.ResetAfter {
				t.Fatalf("window ends in %v on PostgreSQL, %v on Memory (at %v)", pd.ResetAfter, md.ResetAfter,
					time.Unix(0, pres.Now).UTC())
			}
		})
	}
}

// TestWindowClockInSQLIsWindowClock: the schema's window_at and real_at
// compute store.WindowClock's At and Real exactly, to the nanosecond, at
// any instant from 1970 to 2200 (month ends, leap days and zone offsets
// included), so every window the decide function places is Memory's.
func TestWindowClockInSQLIsWindowClock(t *testing.T) {
	p := sharedPool(t)
	s := newStore(t, p)
	schema := `"` + s.SchemaName() + `"`
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		var cal store.Calendar
		var w time.Duration
		cal.Offset = time.Duration(rapid.IntRange(-14*60, 14*60).Draw(rt, "offset_minutes")) * time.Minute
		if rapid.Bool().Draw(rt, "months") {
			cal.Months = rapid.IntRange(1, 12).Draw(rt, "per_window")
		} else {
			w = rapid.SampledFrom([]time.Duration{time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour,
				90 * time.Minute, 36 * time.Hour, 1234567 * time.Microsecond}).Draw(rt, "window")
		}
		k := cal.Clock(w)
		const lo, hi = int64(15 * time.Hour), int64(7258118400) * int64(time.Second) // 2200-01-01
		nows := make([]int64, 40)
		for i := range nows {
			if i%2 == 1 && k.Months() > 0 {
				// Near a window boundary: where month arithmetic goes wrong.
				b := k.Real(k.At(nows[i-1])/int64(k.Span())*int64(k.Span()) + int64(k.Span()))
				nows[i] = max(lo, b+rapid.Int64Range(-2, 2).Draw(rt, "near"))
				continue
			}
			nows[i] = rapid.Int64Range(lo, hi).Draw(rt, "now")
		}
		var ats, reals []int64
		err := p.QueryRow(ctx, `SELECT array_agg(`+schema+`.window_at(t, $2, $3, $4) ORDER BY o),
			array_agg(`+schema+`.real_at(`+schema+`.window_at(t, $2, $3, $4) + $5, $2, $3, $4) ORDER BY o)
			FROM unnest($1::bigint[]) WITH ORDINALITY AS u(t, o)`,
			nows, int64(k.Shift()), int32(k.Months()), int64(k.Span()), int64(k.Span()/3)).Scan(&ats, &reals)
		if err != nil {
			rt.Fatal(err)
		}
		for i, now := range nows {
			if want := k.At(now); ats[i] != want {
				rt.Fatalf("window_at(%v) = %d, WindowClock.At = %d", time.Unix(0, now).UTC(), ats[i], want)
			}
			if want := k.Real(k.At(now) + int64(k.Span()/3)); reals[i] != want {
				rt.Fatalf("real_at(At(%v)+span/3) = %d, WindowClock.Real = %d", time.Unix(0, now).UTC(), reals[i], want)
			}
		}
	})
}
