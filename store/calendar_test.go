package store

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestCalendarWindowsStartOnTheirBoundaries: on the window clock, a
// window starts exactly where the calendar says it does.
func TestCalendarWindowsStartOnTheirBoundaries(t *testing.T) {
	utc := func(s string) int64 {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixNano()
	}
	day, week := 24*time.Hour, 7*24*time.Hour
	for _, tc := range []struct {
		name  string
		cal   Calendar
		w     time.Duration
		start string // a window starts here
		mid   string // and not here
	}{
		{"day at midnight UTC", Calendar{}, day, "2026-12-01T00:00:00Z", "2026-12-01T12:00:00Z"},
		{"hour on the hour", Calendar{}, time.Hour, "2026-12-01T13:00:00Z", "2026-12-01T13:30:00Z"},
		{"week on Monday", Calendar{}, week, "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"day at midnight UTC-05:00", Calendar{Offset: -5 * time.Hour}, day, "2026-12-01T05:00:00Z", "2026-12-01T00:00:00Z"},
		{"day at midnight UTC+05:30", Calendar{Offset: 5*time.Hour + 30*time.Minute}, day, "2026-11-30T18:30:00Z", "2026-12-01T00:00:00Z"},
		{"week on Monday UTC+14:00", Calendar{Offset: 14 * time.Hour}, week, "2026-11-29T10:00:00Z", "2026-11-30T00:00:00Z"},
		{"month", Calendar{Months: 1}, 0, "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"},
		{"month after February", Calendar{Months: 1}, 0, "2028-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"quarter", Calendar{Months: 3}, 0, "2026-10-01T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"year UTC-08:00", Calendar{Months: 12, Offset: -8 * time.Hour}, 0, "2027-01-01T08:00:00Z", "2027-01-01T00:00:00Z"},
		{"month UTC-14:00 in January 1970", Calendar{Months: 1, Offset: -14 * time.Hour}, 0, "1970-01-01T14:00:00Z", "1970-01-01T13:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cal.validate(FixedWindow, tc.w); err != nil {
				t.Fatal(err)
			}
			k := tc.cal.Clock(tc.w)
			span := int64(k.Span())
			if at := k.At(utc(tc.start)); at%span != 0 {
				t.Fatalf("%s is %v into a window, want a start", tc.start, time.Duration(at%span))
			}
			if at := k.At(utc(tc.mid)); at%span == 0 {
				t.Fatalf("%s starts a window", tc.mid)
			}
			if got := k.Real(k.At(utc(tc.start))); got != utc(tc.start) {
				t.Fatalf("Real(At(start)) = %v, want the start", time.Unix(0, got).UTC())
			}
		})
	}
}

// TestCalendarClockNeverRunsAhead: the window clock is monotonic, Real
// inverts At rounding towards the later instant, and a wait converted to
// real time is never shorter than the truth.
func TestCalendarClockNeverRunsAhead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cal := Calendar{
			Offset: time.Duration(rapid.IntRange(-14*60, 14*60).Draw(t, "offset_min")) * time.Minute,
			Months: rapid.IntRange(0, 12).Draw(t, "months"),
		}
		w := time.Duration(0)
		if cal.Months == 0 {
			w = time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(400*24*time.Hour)).Draw(t, "window"))
		}
		k := cal.Clock(w)
		hi := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		a := rapid.Int64Range(0, hi).Draw(t, "a")
		b := rapid.Int64Range(a, hi).Draw(t, "b")
		if k.At(a) > k.At(b) {
			t.Fatalf("At(%d) = %d > At(%d) = %d", a, k.At(a), b, k.At(b))
		}
		if r := k.Real(k.At(a)); r > a {
			t.Fatalf("Real(At(%d)) = %d, later than %d", a, r, a)
		}
		x := k.At(a) + rapid.Int64Range(1, int64(k.Span())).Draw(t, "wait")
		if r := k.Real(x); k.At(r) < x || (r > 0 && k.At(r-1) >= x) {
			t.Fatalf("Real(%d) = %d is not the first instant the clock reads it", x, r)
		}
		// The window a real instant falls in is the calendar's.
		if cal.Months > 0 {
			p := k.At(a)/int64(k.Span()) - 1
			start, end := k.bounds(p)
			if local := a + int64(cal.Offset); local < start || local >= end {
				t.Fatalf("%v (local) outside its window [%v, %v)", time.Unix(0, local).UTC(),
					time.Unix(0, start).UTC(), time.Unix(0, end).UTC())
			}
		}
	})
}

// TestCalendarMonthWindowCountsAMonth: a monthly fixed window on Memory
// admits its limit once per calendar month and tells a rejected client the
// exact start of the next month.
func TestCalendarMonthWindowCountsAMonth(t *testing.T) {
	m := NewMemory()
	id, err := m.Register(t.Context(), Spec{Name: "monthly", Algorithm: FixedWindow, Limit: 2, Calendar: Calendar{Months: 1}})
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) int64 {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixNano()
	}
	decide := func(now int64) ratelimit.Decision {
		var req Request
		var res Result
		req.Now = now
		req.Add(id, "tenant:acme", 1)
		if err := m.Decide(t.Context(), &req, &res); err != nil {
			t.Fatal(err)
		}
		return res.Hits[0].Decision
	}
	for _, s := range []string{"2026-02-01T00:00:00Z", "2026-02-27T23:00:00Z"} {
		if d := decide(at(s)); !d.Allowed() {
			t.Fatalf("%s: %+v", s, d)
		}
	}
	d := decide(at("2026-02-28T12:00:00Z"))
	if d.Allowed() || d.RetryAfter != 12*time.Hour {
		t.Fatalf("third in February: %+v, want a rejection until March 1st (12h)", d)
	}
	if d := decide(at("2026-03-01T00:00:00Z")); !d.Allowed() {
		t.Fatalf("first of March: %+v", d)
	}
}

// TestCalendarValidation: bad calendars are errors naming the field.
func TestCalendarValidation(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "a", Algorithm: SlidingLog, Limit: 1, Window: time.Hour, Calendar: Calendar{Offset: time.Hour}}, "applies only"},
		{Spec{Name: "a", Algorithm: FixedWindow, Limit: 1, Window: time.Hour, Calendar: Calendar{Offset: 15 * time.Hour}}, "within"},
		{Spec{Name: "a", Algorithm: FixedWindow, Limit: 1, Window: time.Hour, Calendar: Calendar{Offset: time.Second}}, "whole minutes"},
		{Spec{Name: "a", Algorithm: FixedWindow, Limit: 1, Calendar: Calendar{Months: 13}}, "1 to 12"},
		{Spec{Name: "a", Algorithm: FixedWindow, Limit: 1, Window: time.Hour, Calendar: Calendar{Months: 1}}, "takes no Window"},
		{Spec{Name: "a", Algorithm: FixedWindow, Limit: 1}, "window"},
	} {
		err := tc.spec.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.spec, err, tc.want)
		}
	}
}
