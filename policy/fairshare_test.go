package policy_test

import (
	"strings"
	"testing"

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
