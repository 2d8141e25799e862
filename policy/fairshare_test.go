package policy_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/shed"
)

// TestFairShareField: a global concurrency rule and an adaptive rule share
// their limits by tenant from a file; the adaptive rule's limiter gets a
// fair-share queue. A fair share by nobody, or beside another discipline
// on an adaptive rule, is an error at its line.
func TestFairShareField(t *testing.T) {
	doc := `{
  "version": 1,
  "rules": [
    {"name": "inflight", "identity": "global", "algorithm": "concurrency", "limit": 8, "max_wait": "1s",
     "queue": {"fair_share": "tenant", "reserve": 0.2}},
    {"name": "model", "identity": "global", "algorithm": "adaptive", "max_wait": "1s",
     "adaptive": {"algorithm": "aimd", "initial_limit": 8, "min_limit": 4, "max_limit": 32},
     "queue": {"fair_share": "api_key"}}
  ]
}`
	rules := rulesOf(t, doc)
	if q := rules[0].Queue; q.FairShare != shed.Tenant || q.Reserve != 0.2 {
		t.Fatalf("concurrency queue %+v", q)
	}
	if q := rules[1].Queue; q.FairShare != shed.APIKey || rules[1].Limiter == nil || !rules[1].Limiter.FairShare() {
		t.Fatalf("adaptive queue %+v, limiter fair share %v", q, rules[1].Limiter != nil && rules[1].Limiter.FairShare())
	}
	if _, err := shed.New(rules); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"fair_share": "tenant"`, `"fair_share": "global"`, "t.json:5: rules[0].queue.fair_share: must be ip, user, api_key or tenant"},
		{`"fair_share": "api_key"}`, `"fair_share": "api_key", "codel": true}`, "t.json:8: rules[1].queue: on an adaptive rule only fair_share applies"},
		{`"max_wait": "1s",
     "adaptive"`, `"adaptive"`, "t.json:7: rules[1].queue: applies only"},
	} {
		bad := strings.Replace(doc, tc.from, tc.to, 1)
		if _, err := policy.Parse("t.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %q", tc.to, err, tc.want)
		}
	}
}

// TestTierWeightsField: tiers.weights weighs the tenants of a tier in a
// fair-share rule; a live reload that drops them makes every tier weigh
// the same. Unknown tiers and weights out of range are errors at their
// line.
func TestTierWeightsField(t *testing.T) {
	doc := `{
  "version": 1,
  "tiers": {"names": ["free", "pro"], "default": "free", "weights": {"pro": 3}},
  "rules": [
    {"name": "inflight", "identity": "global", "algorithm": "concurrency", "limit": 4, "max_wait": "1h",
     "queue": {"fair_share": "tenant"}},
    {"name": "daily", "identity": "tenant", "algorithm": "fixed_window", "limit": 1000000, "window": "1d",
     "tiers": {"pro": {"limit": 10000000}}}
  ]
}`
	plain := strings.Replace(doc, `, "weights": {"pro": 3}`, "", 1)
	synctest.Test(t, func(t *testing.T) {
		p, err := policy.Parse("t.json", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		live, err := policy.NewLive(p)
		if err != nil {
			t.Fatal(err)
		}
		defer live.Controller().Close()
		if pro, free := splitRunning(live.Controller()); pro != 3 || free != 1 {
			t.Fatalf("running pro %d free %d, want 3 and 1", pro, free)
		}
		p2, err := policy.Parse("t.json", []byte(plain))
		if err != nil {
			t.Fatal(err)
		}
		if err := live.Apply(p2); err != nil {
			t.Fatal(err)
		}
		if pro, free := splitRunning(live.Controller()); pro != 2 || free != 2 {
			t.Fatalf("without weights: running pro %d free %d, want 2 and 2", pro, free)
		}
	})
	for _, tc := range []struct{ to, want string }{
		{`{"gold": 3}`, `t.json:3: tiers.weights: "gold" is not a declared tier`},
		{`{"pro": 0}`, `t.json:3: tiers.weights: tier "pro" weight must be in [1, 1048576], got 0`},
	} {
		bad := strings.Replace(doc, `{"pro": 3}`, tc.to, 1)
		if _, err := policy.Parse("t.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %q", tc.to, err, tc.want)
		}
	}
}

// splitRunning runs four clients of a pro tenant and four of a free one
// back to back on c for a second, each holding its permit 10 ms (and g µs
// for client g), and returns how many of each run at 90 or more of 100
// instants between releases (-1 and -1 when no split held that often). It
// runs in a synctest bubble.
func splitRunning(c *shed.Controller) (pro, free int) {
	var mu sync.Mutex
	running := map[string]int{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 8 {
		a := shed.Attempt{Tenant: "acme", Tier: "pro"}
		if g%2 == 1 {
			a = shed.Attempt{Tenant: "tiny", Tier: "free"}
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				d, tok, err := c.Decide(ctx, a)
				if err != nil || !d.Allowed {
					return
				}
				mu.Lock()
				running[a.Tier]++
				mu.Unlock()
				// Virtual time; holds differ by g µs so that no two clients
				// release at one instant (see shed's splitRunning).
				time.Sleep(10*time.Millisecond + time.Duration(g)*time.Microsecond)
				mu.Lock()
				running[a.Tier]--
				mu.Unlock()
				tok.Done(shed.Success)
			}
		})
	}
	// The split seen at most of 100 instants between releases.
	type split struct{ pro, free int }
	seen := map[split]int{}
	time.Sleep(5 * time.Millisecond)
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		seen[split{running["pro"], running["free"]}]++
		mu.Unlock()
	}
	cancel()
	wg.Wait()
	var most split
	for sp, n := range seen {
		if n > seen[most] {
			most = sp
		}
	}
	if seen[most] < 90 {
		return -1, -1 // no split held: the caller's check fails
	}
	return most.pro, most.free
}
