package policy_test

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/ratelimit"
)

// windowDoc is a policy whose only rule has window w, on line 3.
func windowDoc(w string) []byte {
	return []byte(fmt.Sprintf(`{"version": 1, "rules": [
  {"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5,
   "window": %q}]}`, w))
}

// parseWindow parses windowDoc(w) and returns the rule's window.
func parseWindow(w string) (time.Duration, error) {
	p, err := policy.Parse("t.json", windowDoc(w))
	if err != nil {
		return 0, err
	}
	rules, err := p.Rules()
	if err != nil {
		return 0, err
	}
	return rules[0].Window, nil
}

// TestParseDurationOverflowIsAnError: a duration past the longest a
// time.Duration holds is an error with its line, never a wrapped or
// clamped value; one that fits, up to the last nanosecond, is passed on
// exactly for its constructor to judge.
func TestParseDurationOverflowIsAnError(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want time.Duration
	}{
		{"106751d", 106751 * 24 * time.Hour},
		{"53376d", 53376 * 24 * time.Hour},
		{"2562047h", 2562047 * time.Hour},
		{"2562047h47m16.854775807s", math.MaxInt64},
		{"9223372036854775807ns", math.MaxInt64},
	} {
		got, err := parseWindow(tc.s)
		if err != nil || got != tc.want {
			t.Errorf("%q: got %v (%d), %v; want %d", tc.s, got, int64(got), err, int64(tc.want))
		}
	}
	for _, s := range []string{"106752d", "99999999999999999999d", "2562048h", "2562047h47m16.854775808s",
		"9223372036854775808ns", "153722868m", "9223372036.854775808s", "1h2562047h", "18446744073709551616ns"} {
		got, err := parseWindow(s)
		if err == nil || !strings.Contains(err.Error(), "t.json:3: rules[0].window: duration "+fmt.Sprintf("%q", s)+" is too long") {
			t.Errorf("%q: got %v (%d), %v; want a too-long error at line 3", s, got, int64(got), err)
		}
	}
	if _, err := parseWindow("15 minutes"); err == nil || !strings.Contains(err.Error(), `invalid duration "15 minutes"`) {
		t.Errorf("a malformed duration: %v", err)
	}
}

// TestParseDurationIsExactOrAnError: for any count of any unit, the
// parsed window is the exact product when it fits in a time.Duration and an
// error naming the overflow when it does not.
func TestParseDurationIsExactOrAnError(t *testing.T) {
	units := []struct {
		name string
		d    time.Duration
	}{{"ns", time.Nanosecond}, {"us", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second},
		{"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	rapid.Check(t, func(t *rapid.T) {
		u := rapid.SampledFrom(units).Draw(t, "unit")
		limit := uint64(math.MaxInt64) / uint64(u.d)
		n := rapid.OneOf(rapid.Uint64Range(1, 1000), rapid.Uint64Range(limit-2, limit+2), rapid.Uint64Min(1)).Draw(t, "n")
		s := fmt.Sprintf("%d%s", n, u.name)
		got, err := parseWindow(s)
		exact := new(big.Int).Mul(new(big.Int).SetUint64(n), big.NewInt(int64(u.d)))
		if exact.IsInt64() && exact.Int64() < int64(ratelimit.MinWindow) {
			if err == nil || !strings.Contains(err.Error(), "must be at least") {
				t.Fatalf("%q: got %d, %v; want the minimum window's error", s, int64(got), err)
			}
			return
		}
		if exact.IsInt64() {
			if err != nil || int64(got) != exact.Int64() {
				t.Fatalf("%q: got %d, %v; want %v", s, int64(got), err, exact)
			}
			return
		}
		if err == nil || !strings.Contains(err.Error(), "is too long") {
			t.Fatalf("%q: got %d, %v; want a too-long error", s, int64(got), err)
		}
	})
}
