package pgstore_test

import (
	"context"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestWindowsOnTheCalendarAsMemory: a window limit on PostgreSQL (deciding
// on the database's clock) places its windows where Memory places them at
// the same instant, for every kind of calendar: the wait to the window's
// end agrees to the microsecond, clock_timestamp()'s resolution
// (storetest.WindowsAsMemory).
func TestWindowsOnTheCalendarAsMemory(t *testing.T) {
	p := sharedPool(t)
	storetest.WindowsAsMemory(t, "PostgreSQL", func(t *testing.T) store.Store { return newStore(t, p) }, 0)
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
