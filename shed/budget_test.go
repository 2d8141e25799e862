package shed

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestByteBudgetRefusesTheGigabyteSlidingLog: the sliding log of 1,000 an
// hour per IP at the default capacity, which reached a gigabyte in the
// field, is an error from New naming the rule, its worst case and the
// budget; a lower capacity or a raised budget makes it fit.
func TestByteBudgetRefusesTheGigabyteSlidingLog(t *testing.T) {
	login := Rule{Name: "login-ip", Identity: IP, Algorithm: SlidingLog, Limit: 1000, Window: time.Hour}
	_, err := New([]Rule{login}, quiet())
	if err == nil {
		t.Fatal("a 1 GiB worst case was accepted under the default budget")
	}
	for _, want := range []string{`"login-ip"`, "byte budget", "67108864 bytes (64.0 MiB)", "GiB", "sliding_log of 1000 per key at 65536 keys"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	small := login
	small.Capacity = 1000
	small.CGNATFactor = 1
	if _, err := New([]Rule{small}, quiet()); err != nil {
		t.Errorf("1,000 keys of 16 KiB: %v", err)
	}
	raised := login
	raised.MaxBytes = 2 << 30
	if _, err := New([]Rule{raised}, quiet()); err != nil {
		t.Errorf("a raised budget: %v", err)
	}
}

// TestByteBudgetCountsTheScaledLimits: a rule's CGNAT keys (at ten times
// the limit) count against its budget, as its own keys do.
func TestByteBudgetCountsTheScaledLimits(t *testing.T) {
	r := Rule{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1000, Window: time.Hour, Capacity: 1000, CGNATFactor: 1}
	c := &Controller{}
	own, err := c.worstBytes(&r)
	if err != nil {
		t.Fatal(err)
	}
	r.CGNATFactor = 0 // the default, 10
	both, err := c.worstBytes(&r)
	if err != nil {
		t.Fatal(err)
	}
	if both < own+1000*10*1000*16 {
		t.Errorf("with CGNAT keys %d bytes, without %d: the CGNAT table of 1,000 keys of 10,000 is not counted", both, own)
	}
	r.MaxBytes = both - 1
	if err := c.checkBudget(&r); err == nil {
		t.Errorf("a budget a byte short of the worst case %d was accepted", both)
	}
	r.MaxBytes = both
	if err := c.checkBudget(&r); err != nil {
		t.Errorf("a budget of exactly the worst case: %v", err)
	}
}

// TestByteBudgetCountsThePrefixLimit: an IP rule that overflows by prefix
// keeps a second table of network prefixes, which counts against its
// budget too.
func TestByteBudgetCountsThePrefixLimit(t *testing.T) {
	r := Rule{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1000, Window: time.Hour, Capacity: 1000, CGNATFactor: 1}
	c := &Controller{}
	own, err := c.worstBytes(&r)
	if err != nil {
		t.Fatal(err)
	}
	r.Overflow = OverflowPrefix // 1,000 prefixes (the rule's smaller capacity) of 4 x 1,000
	both, err := c.worstBytes(&r)
	if err != nil {
		t.Fatal(err)
	}
	if both < own+1000*DefaultPrefixFactor*1000*16 {
		t.Errorf("with prefix keys %d bytes, without %d: the prefix table is not counted", both, own)
	}
}

// TestByteBudgetValidation: a negative budget, or one on a Global rule
// (no key table), is an error; a huge capacity is an error, never a panic.
func TestByteBudgetValidation(t *testing.T) {
	for _, r := range []Rule{
		{Name: "neg", Identity: IP, Algorithm: FixedWindow, Limit: 5, Window: time.Hour, MaxBytes: -1},
		{Name: "global", Algorithm: FixedWindow, Limit: 5, Window: time.Hour, MaxBytes: 1 << 20},
		{Name: "huge", Identity: IP, Algorithm: TokenBucket, Limit: 5, Rate: ratelimit.Per(1, time.Second), Capacity: math.MaxInt, MaxBytes: math.MaxInt64},
		{Name: "tiny", Identity: User, Algorithm: TokenBucket, Limit: 5, Rate: ratelimit.Per(1, time.Second), MaxBytes: 1024},
	} {
		if _, err := New([]Rule{r}, quiet()); err == nil || !strings.Contains(err.Error(), r.Name) {
			t.Errorf("%s: %v, want an error naming the rule", r.Name, err)
		}
	}
}
