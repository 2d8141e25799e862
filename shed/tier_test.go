package shed

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

func tierRules() []Rule {
	return []Rule{
		{Name: "daily/free", Identity: Tenant, Algorithm: FixedWindow, Limit: 2, Window: time.Hour, Tier: "free"},
		{Name: "daily/pro", Identity: Tenant, Algorithm: FixedWindow, Limit: 5, Window: time.Hour, Tier: "pro"},
		{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 100, Window: time.Hour},
	}
}

// admitted counts the attempts of tenant and tier admitted out of n.
func admitted(t *testing.T, c *Controller, tenant, tier string, n int, now int64) int {
	t.Helper()
	ok := 0
	for range n {
		d, tok, err := c.Decide(context.Background(), Attempt{Tenant: tenant, Tier: tier, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			ok++
			tok.DoneAt(now, Success)
		}
	}
	return ok
}

// A tier selects its rules; an unknown tier, or none, gets the default
// tier's limits, never none.
func TestTiers(t *testing.T) {
	c, err := New(tierRules(), WithDefaultTier("free"), quiet())
	if err != nil {
		t.Fatal(err)
	}
	const now = int64(time.Hour)
	for _, tc := range []struct {
		tenant, tier string
		want         int
	}{{"a", "free", 2}, {"b", "pro", 5}, {"c", "enterprise", 2}, {"d", "", 2}} {
		if got := admitted(t, c, tc.tenant, tc.tier, 10, now); got != tc.want {
			t.Errorf("tier %q admitted %d, want %d", tc.tier, got, tc.want)
		}
	}
	st := c.Stats()
	if st.Rules[0].Tier != "free" || st.Rules[0].Allowed != 6 || st.Rules[1].Allowed != 5 || st.Rules[2].Allowed != 11 {
		t.Fatalf("stats %+v", st.Rules)
	}
}

func TestTierValidation(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want string
	}{
		{nil, "WithDefaultTier must name"},
		{[]Option{WithDefaultTier("gold")}, "default tier \"gold\" is no rule's tier"},
	} {
		_, err := New(tierRules(), append(tc.opts, quiet())...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	if _, err := New([]Rule{{Name: "x", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: time.Second}},
		WithDefaultTier("free"), quiet()); err == nil {
		t.Error("a default tier without tiered rules was accepted")
	}
}

// An override scales one key's limit until it expires; other keys, and
// the key after the expiry, keep the rule's limit.
func TestOverrides(t *testing.T) {
	clock := int64(time.Hour)
	c, err := New([]Rule{
		{Name: "daily", Identity: Tenant, Algorithm: FixedWindow, Limit: 3, Window: 24 * time.Hour},
		{Name: "burst", Identity: APIKey, Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Hour)},
	}, WithClock(func() int64 { return clock }), quiet())
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	if err := c.SetOverrides([]Override{{Rule: "daily", Key: "acme", Factor: 10, Until: until}}); err != nil {
		t.Fatal(err)
	}
	if got := admitted(t, c, "acme", "", 40, clock); got != 30 {
		t.Errorf("overridden tenant admitted %d, want 30", got)
	}
	if got := admitted(t, c, "other", "", 40, clock); got != 3 {
		t.Errorf("other tenant admitted %d, want 3", got)
	}
	// Two hours on the override has expired: acme counts on the rule's own
	// state again (3 per day, none used yet).
	later := clock + int64(2*time.Hour)
	if got := admitted(t, c, "acme", "", 10, later); got != 3 {
		t.Errorf("after expiry admitted %d, want 3", got)
	}
	bad := []struct {
		o    Override
		want string
	}{
		{Override{Rule: "nope", Key: "a", Factor: 2, Until: until}, "unknown rule"},
		{Override{Rule: "daily", Key: "a", Factor: 0, Until: until}, "factor must be positive"},
		{Override{Rule: "daily", Key: "a", Factor: nan(), Until: until}, "factor must be positive"},
		{Override{Rule: "daily", Key: "", Factor: 2, Until: until}, "empty key"},
	}
	for _, b := range bad {
		if err := c.SetOverrides([]Override{b.o}); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%+v: got %v, want %q", b.o, err, b.want)
		}
	}
	if err := c.SetOverrides(make([]Override, MaxOverrides+1)); err == nil {
		t.Error("more than MaxOverrides accepted")
	}
	// API keys are hashed like a request's.
	if err := c.SetOverrides([]Override{{Rule: "burst", Key: "secret-key", Factor: 3, Until: until}}); err != nil {
		t.Fatal(err)
	}
	ok := 0
	for range 5 {
		d, tok, _ := c.Decide(context.Background(), Attempt{APIKey: "secret-key", Tenant: "t2"})
		if d.Allowed {
			ok++
			tok.Done(Success)
		}
	}
	if ok != 3 {
		t.Errorf("overridden API key admitted %d, want 3", ok)
	}
}
