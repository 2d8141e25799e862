package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// day is the "d" unit of policy durations.
const day = 24 * time.Hour

// parseDuration parses a policy duration: Go's syntax ("1h30m", "250ms")
// or a whole number of days ("1d", "7d").
func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok && n != "" && !strings.ContainsAny(n, "hmsuµn.") {
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v < 0 || v > int64(1<<62)/int64(day) {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		return time.Duration(v) * day, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return d, nil
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
