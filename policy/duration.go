package policy

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// day is the "d" unit of policy durations.
const day = 24 * time.Hour

// parseDuration parses a policy duration: Go's syntax ("1h30m", "250ms")
// or a whole number of days ("1d", "7d"). A well-formed duration longer
// than a time.Duration holds (about 292 years: 2562047h47m16.854775807s,
// 106751 days and a bit) is an error of its own, never a wrapped or
// clamped value; one that fits is returned exactly, for the constructor it
// reaches to accept or refuse.
func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok && n != "" && !strings.ContainsAny(n, "hmsuµn.") {
		v, err := strconv.ParseInt(n, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange), err == nil && v > math.MaxInt64/int64(day):
			return 0, errTooLong(s)
		case err != nil || v < 0:
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return time.Duration(v) * day, nil // v*day <= MaxInt64, checked above
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		// time.ParseDuration reports overflow as it reports a typo; a
		// string of the right form can only have failed by overflow.
		if wellFormed(s) {
			return 0, errTooLong(s)
		}
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return d, nil
}

// errTooLong is the error of a duration s that does not fit.
func errTooLong(s string) error {
	return fmt.Errorf("duration %q is too long: the longest is %v (106751d23h47m16.854775807s)", s, time.Duration(math.MaxInt64))
}

// wellFormed reports whether s has the form time.ParseDuration reads: an
// optional sign, then one or more numbers (digits with an optional
// fraction) each followed by a unit.
func wellFormed(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for s != "" {
		i, digits := 0, 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, digits = i+1, digits+1
		}
		if i < len(s) && s[i] == '.' {
			i++
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i, digits = i+1, digits+1
			}
		}
		if digits == 0 {
			return false
		}
		s = s[i:]
		unit := false
		// Longest units first, so that "ms" is not read as "m".
		for _, u := range []string{"ns", "us", "µs", "μs", "ms", "h", "m", "s"} {
			if rest, ok := strings.CutPrefix(s, u); ok {
				s, unit = rest, true
				break
			}
		}
		if !unit {
			return false
		}
	}
	return true
}

// formatDuration writes d in the largest unit that holds it exactly, so
// that 15 minutes is "15m" and a day "1d"; parseDuration reads it back.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	units := []struct {
		u    time.Duration
		name string
	}{{day, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"},
		{time.Millisecond, "ms"}, {time.Microsecond, "us"}}
	for _, u := range units {
		if d%u.u == 0 {
			return strconv.FormatInt(int64(d/u.u), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}
