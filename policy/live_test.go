package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/shed"
)

// A policy file replaced on a running controller: unchanged rules keep
// their state, new ones take effect, a bad file is rejected whole.
func TestLiveReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.json")
	write := func(doc string) {
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const base = `{"version": 1,
 "categories": [{"name": "search", "routes": ["/search"]}],
 "rules": [
  {"name": "per-user", "identity": "user", "algorithm": "fixed_window", "limit": 5, "window": "1h"},
  {"name": "cap", "identity": "global", "algorithm": "concurrency", "limit": 100,
   "max_wait": "10ms"},
  {"name": "adaptive", "identity": "global", "algorithm": "adaptive",
   "adaptive": {"algorithm": "aimd", "initial_limit": 50, "min_limit": 10, "max_limit": 100}}%s
 ]}`
	write(strings.Replace(base, "%s", "", 1))
	p, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	live, err := policy.NewLive(p)
	if err != nil {
		t.Fatal(err)
	}
	c := live.Controller()
	defer c.Close()
	now := int64(time.Hour)
	decide := func(cat string) shed.Decision {
		d, tok, err := c.Decide(context.Background(), shed.Attempt{Category: cat, User: "u", Now: now})
		if err != nil {
			t.Fatal(err)
		}
		tok.DoneAt(now, shed.Ignore)
		return d
	}
	for range 3 {
		decide("read")
	}
	// Add a rule for the search category.
	write(strings.Replace(base, "%s", `,
  {"name": "search", "category": "search", "identity": "user", "algorithm": "sliding_log", "limit": 1, "window": "1m"}`, 1))
	if err := live.Reload(path); err != nil {
		t.Fatal(err)
	}
	if d := decide(live.Policy().Category("GET", "/search")); !d.Allowed {
		t.Fatalf("first search rejected: %+v", d)
	}
	if d := decide("search"); d.Allowed || d.Rule != "search" {
		t.Fatalf("second search: %+v", d)
	}
	// per-user kept its state: 3 + 1 used (the rejected search charged
	// nothing), so one is left.
	if d := decide("read"); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("per-user lost its state: %+v", d)
	}
	if d := decide("read"); d.Allowed || d.Rule != "per-user" {
		t.Fatalf("per-user over its limit: %+v", d)
	}
	st := c.Stats()
	if st.Rules[0].Name != "per-user" || st.Rules[0].Allowed != 5 || st.Rules[0].Rejected != 1 {
		t.Fatalf("per-user counters %+v", st.Rules[0])
	}
	// A bad file is rejected with its line, and the policy stays.
	write(strings.Replace(strings.Replace(base, "%s", "", 1), `"limit": 5`, `"limit": -5`, 1))
	err = live.Reload(path)
	if err == nil || !strings.Contains(err.Error(), "api.json:4: rules[0].limit: must be positive") {
		t.Fatalf("bad file: %v", err)
	}
	if len(c.Stats().Rules) != 4 || live.Policy().Category("GET", "/search") != "search" {
		t.Fatal("the rejected file changed the policy in force")
	}
	// A change a running controller cannot take.
	write(`{"version": 1, "dry_run": true, "rules": [{"name": "x", "identity": "ip", "algorithm": "sliding_log", "limit": 1, "window": "1m"}]}`)
	if err := live.Reload(path); err == nil || !strings.Contains(err.Error(), "dry_run: cannot change") {
		t.Fatalf("dry_run change: %v", err)
	}
}
