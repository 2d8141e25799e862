package policy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/shed"
)

const tiered = `{
  "version": 1,
  "tiers": {"attribute": "plan", "names": ["free", "pro", "automation"], "default": "free"},
  "rules": [
    {"name": "daily", "identity": "tenant", "algorithm": "fixed_window", "limit": 3, "window": "1d",
     "tiers": {"pro": {"limit": 10}, "automation": {"limit": 20}}}
  ],
  "overrides": [{"rule": "daily", "key": "acme", "factor": 2, "until": "2999-01-01T00:00:00Z"}]
}`

// A tiered rule is one rule per tier; unknown tiers get the default
// tier's limit; an override scales every tier of its rule for its key.
func TestTieredPolicy(t *testing.T) {
	p, err := policy.Parse("tiers.json", []byte(tiered))
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := p.Rules()
	var names []string
	for _, r := range rules {
		names = append(names, r.Name+":"+r.Tier)
	}
	if got := strings.Join(names, " "); got != "daily/free:free daily/pro:pro daily/automation:automation" {
		t.Fatalf("rules %s", got)
	}
	c, err := p.New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now := int64(time.Hour)
	count := func(tenant, tier string) int {
		n := 0
		for range 50 {
			d, tok, err := c.Decide(context.Background(), shed.Attempt{Tenant: tenant, Tier: tier, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				n++
				tok.DoneAt(now, shed.Success)
			}
		}
		return n
	}
	for _, tc := range []struct {
		tenant, tier string
		want         int
	}{{"a", "free", 3}, {"b", "pro", 10}, {"c", "automation", 20}, {"d", "platinum", 3}, {"e", "", 3},
		{"acme", "pro", 20}} {
		if got := count(tc.tenant, tc.tier); got != tc.want {
			t.Errorf("%s (%q) admitted %d, want %d", tc.tenant, tc.tier, got, tc.want)
		}
	}
}

func TestTierErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{strings.Replace(tiered, `"default": "free"`, `"default": "gold"`, 1), "tiers.json:3: tiers.default: must be one of"},
		{strings.Replace(tiered, `"pro": {"limit": 10}`, `"platinum": {"limit": 10}`, 1), "tiers.json:6: rules[0].tiers.platinum: \"platinum\" is not a declared tier"},
		{strings.Replace(tiered, `"pro": {"limit": 10}`, `"pro": {"limit": -1}`, 1), "tiers.json:6: rules[0].tiers.pro.limit: must be positive"},
		{strings.Replace(tiered, `"rule": "daily"`, `"rule": "weekly"`, 1), "tiers.json:8: overrides[0].rule: \"weekly\" is not a rule"},
		{strings.Replace(tiered, `"2999-01-01T00:00:00Z"`, `"next week"`, 1), "tiers.json:8: overrides[0].until: must be an RFC 3339"},
		{strings.Replace(tiered, `"factor": 2`, `"factor": 0`, 1), "tiers.json:8: overrides[0].factor: must be in (0, 1e6]"},
	} {
		_, err := policy.Parse("tiers.json", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// TestIPOverrideKeyMustBeAnAddress: the key of an override of an IP rule
// is checked at Parse, with its line, not first at New.
func TestIPOverrideKeyMustBeAnAddress(t *testing.T) {
	doc := `{"version": 1,
 "rules": [{"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m"}],
 "overrides": [{"rule": "r", "factor": 2, "until": "2099-01-01T00:00:00Z",
   "key": %q}]}`
	for _, key := range []string{"192.0.2.1:80", "2001:db8::/64", "host.example", "[::1]"} {
		_, err := policy.Parse("t.json", []byte(fmt.Sprintf(doc, key)))
		if err == nil || !strings.Contains(err.Error(), "t.json:4: overrides[0].key: is not an IP address") {
			t.Errorf("key %q: %v", key, err)
		}
	}
	for _, key := range []string{"192.0.2.1", "2001:db8::1", "::ffff:192.0.2.1", "fe80::1%eth0"} {
		p, err := policy.Parse("t.json", []byte(fmt.Sprintf(doc, key)))
		if err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		c, err := p.New()
		if err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		_ = c.Close()
	}
}

// TestOverrideErrorNamesTheOverrideLine: an override that shed rejects (two
// addresses of one IPv6 /64, which only shed's grouping sees as one key)
// is reported at the line of that override of the file, at New, NewLive
// and Apply alike, though a tiered rule's override is one shed override
// per tier.
func TestOverrideErrorNamesTheOverrideLine(t *testing.T) {
	const doc = `{"version": 1,
 "tiers": {"names": ["free", "pro"], "default": "free"},
 "rules": [
  {"name": "t", "identity": "tenant", "algorithm": "fixed_window", "limit": 5, "window": "1h",
   "tiers": {"pro": {"limit": 50}}},
  {"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m"}],
 "overrides": [
  {"rule": "t", "key": "acme", "factor": 2, "until": "2099-01-01T00:00:00Z"},
  {"rule": "r", "key": "2001:db8::1", "factor": 2, "until": "2099-01-01T00:00:00Z"}%s]}`
	const want = `t.json:10: overrides[2]: shed: the key of overrides[1] is given again (rule "r" sees one client in both)`
	good, err := policy.Parse("t.json", []byte(strings.Replace(doc, "%s", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("t.json", []byte(strings.Replace(doc, "%s",
		`,
  {"rule": "r", "key": "2001:db8::2", "factor": 3, "until": "2099-01-01T00:00:00Z"}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.New()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("New: %v, want %q", err, want)
	}
	var oe *shed.OverrideError
	if !errors.As(err, &oe) || !errors.Is(err, shed.ErrRepeatedKey) {
		t.Errorf("New: %v does not unwrap to shed's error", err)
	}
	if _, err := policy.NewLive(p); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewLive: %v, want %q", err, want)
	}
	live, err := policy.NewLive(good)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Controller().Close()
	if err := live.Apply(p); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Apply: %v, want %q", err, want)
	}
}
