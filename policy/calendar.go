package policy

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/store"
)

// CalendarSpec is a store.Calendar: where the windows of a fixed_window or
// sliding_window rule start. Zone is the fixed offset from UTC the days
// follow, "+05:30" or "-05:00" ("UTC", "Z" or absent: UTC); Months, from 1
// to 12, makes each window that many calendar months (the rule then has no
// "window").
type CalendarSpec struct {
	Zone   string `json:"zone,omitempty"`
	Months int    `json:"months,omitempty"`
}

// parseZone parses a CalendarSpec zone: "", "UTC" or "Z" for UTC, or
// ±HH:MM.
func parseZone(s string) (time.Duration, error) {
	switch s {
	case "", "UTC", "Z":
		return 0, nil
	}
	bad := fmt.Errorf("zone must be UTC or an offset such as +05:30 or -05:00, got %q", s)
	if len(s) != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' {
		return 0, bad
	}
	h, errH := strconv.Atoi(s[1:3])
	m, errM := strconv.Atoi(s[4:6])
	if errH != nil || errM != nil || m >= 60 || s[1] == '+' || s[4] == '+' {
		return 0, bad
	}
	off := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
	if s[0] == '-' {
		off = -off
	}
	return off, nil
}

// formatZone writes a zone offset as parseZone reads it; "" for UTC.
func formatZone(off time.Duration) string {
	if off == 0 {
		return ""
	}
	sign := '+'
	if off < 0 {
		sign, off = '-', -off
	}
	return fmt.Sprintf("%c%02d:%02d", sign, int(off/time.Hour), int(off%time.Hour/time.Minute))
}

// calendar returns the store.Calendar of spec c (nil: UTC).
func (v *validator) calendar(path string, c *CalendarSpec) store.Calendar {
	if c == nil {
		return store.Calendar{}
	}
	off, err := parseZone(c.Zone)
	if err != nil {
		v.failf(path+".zone", "%v", err)
	}
	if off < -store.MaxCalendarOffset || off > store.MaxCalendarOffset {
		v.failf(path+".zone", "must be within ±%v of UTC, got %s", store.MaxCalendarOffset, c.Zone)
	}
	if c.Months < 0 || c.Months > 12 {
		v.failf(path+".months", "must be from 1 to 12 (or absent), got %d", c.Months)
	}
	return store.Calendar{Offset: off, Months: c.Months}
}

// calendarSpec returns the spec of cal; nil for UTC.
func calendarSpec(cal store.Calendar) *CalendarSpec {
	if cal == (store.Calendar{}) {
		return nil
	}
	return &CalendarSpec{Zone: formatZone(cal.Offset), Months: cal.Months}
}
