package store

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Calendar says where the windows of a FixedWindow or SlidingWindow limit
// start, the same on every store: Memory on its clock (internal clock.Now
// counts from the Unix epoch), a network store on its server's.
//
// The zero Calendar is UTC: a window of length Window starts wherever the
// time since Monday 1970-01-05 00:00 UTC is a multiple of Window, so a day
// starts at midnight UTC, an hour on the hour, a week on Monday at 00:00.
// Offset moves those starts to another zone's midnight; Months makes the
// windows calendar months.
//
// A Calendar is a small comparable value; the zero value is UTC.
type Calendar struct {
	// Offset is the offset from UTC of the zone whose days the windows
	// follow, east positive (as time.FixedZone's): -5h for UTC-05:00, so
	// that a day window starts at 05:00 UTC. It must be a whole number of
	// minutes within ±14h. It is a fixed offset, not an IANA zone: a
	// daylight saving change does not move it.
	Offset time.Duration
	// Months, from 1 to 12, makes each window that many calendar months of
	// the zone, starting at 00:00 on the first of a month, counted from
	// January 1970: 1 is monthly, 3 quarterly (January, April, July,
	// October), 12 yearly. Spec.Window must then be zero. Zero means
	// windows of Spec.Window.
	Months int
}

// MaxCalendarOffset bounds Calendar.Offset: the zones in use lie within
// UTC-12 and UTC+14.
const MaxCalendarOffset = 14 * time.Hour

// monthSpan is the length of one calendar month on a monthly Calendar's
// window clock: the longest month, so that the clock never runs faster
// than real time.
const monthSpan = 31 * 24 * time.Hour

// monday is Monday 1970-01-05 00:00 UTC, the origin of the windows of a
// fixed length: 4 days after the Unix epoch (a Thursday). Windows that
// divide a day start as they would from the epoch; a week starts on Monday.
const monday = int64(4 * 24 * time.Hour)

// validate checks c for a limit of algorithm alg and window w.
func (c Calendar) validate(alg Algorithm, w time.Duration) error {
	if c == (Calendar{}) {
		return nil
	}
	switch {
	case alg != FixedWindow && alg != SlidingWindow:
		return fmt.Errorf("a calendar applies only to %v and %v, not %v", FixedWindow, SlidingWindow, alg)
	case c.Offset < -MaxCalendarOffset || c.Offset > MaxCalendarOffset:
		return fmt.Errorf("a calendar offset must be within ±%v, got %v", MaxCalendarOffset, c.Offset)
	case c.Offset%time.Minute != 0:
		return fmt.Errorf("a calendar offset must be whole minutes, got %v", c.Offset)
	case c.Months < 0 || c.Months > 12:
		return fmt.Errorf("calendar months must be from 1 to 12 (or 0 for windows of Window), got %d", c.Months)
	case c.Months > 0 && w != 0:
		return fmt.Errorf("a window of %d calendar months takes no Window, got %v", c.Months, w)
	}
	return nil
}

// span returns the window length on c's window clock for a spec window w:
// w itself, or Months·31 days.
func (c Calendar) span(w time.Duration) time.Duration {
	if c.Months > 0 {
		return time.Duration(c.Months) * monthSpan
	}
	return w
}

// WindowClock converts between a limit's time and its window clock: the
// clock on which its windows are aligned multiples of their length, where
// the concurrency package's window algorithms run. For windows of a fixed
// length it is the limit's time shifted (Monday origin and zone offset);
// for calendar months it runs each month at its own pace, so that every
// month spans the same monthSpan, and fractions of a month (the sliding
// window's weight) are kept. It is a small immutable value, safe for
// concurrent use.
type WindowClock struct {
	shift  int64 // added to the time: the zone offset, and for fixed lengths the Monday origin
	months int64 // months per window; 0 for fixed lengths
	span   int64 // window length on the window clock, ns
}

// Clock returns the window clock of windows of spec window w on c, which
// must be valid (Spec.Validate) for w; for no window (w <= 0 and no
// months), the time itself.
func (c Calendar) Clock(w time.Duration) WindowClock {
	if c.Months == 0 && w <= 0 {
		return WindowClock{} // no windows: the time itself
	}
	if c.Months == 0 {
		// Windows start where now - monday + Offset is a multiple of w; any
		// multiple of w may be added to the shift, so take the one in
		// [0, w): the window clock never reads less than now.
		shift := (int64(c.Offset) - monday) % int64(w)
		if shift < 0 {
			shift += int64(w)
		}
		return WindowClock{shift: shift, span: int64(w)}
	}
	return WindowClock{shift: int64(c.Offset), months: int64(c.Months), span: int64(c.span(0))}
}

// Span returns the window length on the window clock.
func (k WindowClock) Span() time.Duration { return time.Duration(k.span) }

// Shift and Months describe the clock to a network store that runs it on
// its server (redisstore's script does): At(now) is now + Shift for
// windows of a fixed length (Months 0); for calendar months, the local time
// now + Shift is cut into windows of Months months, and each window spans
// Span on the window clock, numbered from the one before January 1970.
func (k WindowClock) Shift() time.Duration { return time.Duration(k.shift) }

// Months returns the months per window, 0 for windows of a fixed length.
func (k WindowClock) Months() int { return int(k.months) }

// At returns now, nanoseconds since the Unix epoch, on the window clock.
// now must be non-negative.
func (k WindowClock) At(now int64) int64 {
	if k.months == 0 {
		return now + k.shift
	}
	return k.monthAt(now)
}

// monthAt is At for windows of calendar months, apart so that At inlines.
func (k WindowClock) monthAt(now int64) int64 {
	// Window -1 is the one before January 1970 (UTC-14:00 sees 1969 until
	// 14:00 UTC): numbering from it keeps the window clock non-negative.
	p, start, end := k.period(now + k.shift)
	frac, _ := mulDiv(now+k.shift-start, k.span, end-start, false) // < span: fits
	return (p+1)*k.span + frac
}

// Real returns the earliest limit time at which the window clock reads at
// least at: the inverse of At, rounded up, so a wait it gives is never
// shorter than the truth.
func (k WindowClock) Real(at int64) int64 {
	if k.months == 0 {
		return at - k.shift
	}
	p, frac := at/k.span-1, at%k.span
	start, end := k.bounds(p)
	real, _ := mulDiv(frac, end-start, k.span, true) // < a month: fits
	return start + real - k.shift
}

// Decision converts d, decided on the window clock at at = k.At(now), to
// the limit's time: its RetryAfter and ResetAfter become waits from now.
func (k WindowClock) Decision(now, at int64, d ratelimit.Decision) ratelimit.Decision {
	if k.months == 0 {
		return d // a shift: the waits are the same
	}
	return k.monthDecision(now, at, d)
}

// monthDecision is Decision for windows of calendar months, apart so that
// Decision inlines.
func (k WindowClock) monthDecision(now, at int64, d ratelimit.Decision) ratelimit.Decision {
	if d.RetryAfter > 0 && d.RetryAfter != ratelimit.Never {
		d.RetryAfter = time.Duration(max(1, k.Real(at+int64(d.RetryAfter))-now))
	}
	if d.ResetAfter > 0 {
		d.ResetAfter = time.Duration(max(1, k.Real(at+int64(d.ResetAfter))-now))
	}
	return d
}

// period returns the window of local time t (Unix ns in the zone): its
// number since January 1970 and its bounds in local Unix ns.
func (k WindowClock) period(t int64) (p, start, end int64) {
	y, m, _ := time.Unix(0, t).UTC().Date()
	month := int64(y-1970)*12 + int64(m) - 1 // -1 is December 1969
	p = floorDiv(month, k.months)
	start, end = k.bounds(p)
	return p, start, end
}

// bounds returns the local Unix ns bounds of window p.
func (k WindowClock) bounds(p int64) (start, end int64) {
	return monthStart(p * k.months), monthStart((p + 1) * k.months)
}

// monthStart returns 00:00 UTC on the first of month m, counted from
// January 1970 (0), in Unix ns.
func monthStart(m int64) int64 {
	return time.Date(1970+int(floorDiv(m, 12)), time.Month(m-floorDiv(m, 12)*12+1), 1, 0, 0, 0, 0, time.UTC).UnixNano()
}

// floorDiv is a/b rounded down, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
