package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/policy"
)

// TestMaxWaitOnARateRule: a token bucket may let requests wait for
// their reserved turn, bounded in waiters; a max_wait on a rule that cannot
// wait, or a queue_length without one, is an error at its line.
func TestMaxWaitOnARateRule(t *testing.T) {
	doc := `{
  "version": 1,
  "rules": [
    {"name": "internal", "identity": "global", "algorithm": "token_bucket", "limit": 1,
     "rate": {"count": 10, "per": "1s"}, "max_wait": "200ms", "queue_length": 64},
    {"name": "per-tenant", "identity": "tenant", "algorithm": "token_bucket", "limit": 5,
     "rate": {"count": 50, "per": "1s"}, "max_wait": "100ms"},
    {"name": "per-second", "identity": "ip", "algorithm": "fixed_window", "limit": 20,
     "window": "1s", "max_wait": "200ms"}
  ]
}`
	rules := rulesOf(t, doc)
	if r := rules[0]; r.MaxWait != 200*time.Millisecond || r.QueueLength != 64 {
		t.Fatalf("%+v", r)
	}
	if r := rules[1]; r.MaxWait != 100*time.Millisecond || r.QueueLength != 0 {
		t.Fatalf("%+v", r)
	}
	if r := rules[2]; r.MaxWait != 200*time.Millisecond {
		t.Fatalf("%+v", r)
	}
	for name, c := range map[string]struct{ from, to, want string }{
		"sliding window": {`"algorithm": "token_bucket", "limit": 1,
     "rate": {"count": 10, "per": "1s"}`, `"algorithm": "sliding_window", "limit": 1,
     "window": "1s"`, "t.json:5: rules[0].max_wait: applies only"},
		"months": {`"algorithm": "token_bucket", "limit": 1,
     "rate": {"count": 10, "per": "1s"}`, `"algorithm": "fixed_window", "limit": 1,
     "calendar": {"months": 1}`, "t.json:5: rules[0].max_wait: applies only"},
		"queue without wait": {`"max_wait": "200ms", `, ``, "t.json:5: rules[0].queue_length: applies only"},
		"too long":           {`"200ms"`, `"7000d"`, "t.json:5: rules[0].max_wait: must be at most"},
	} {
		bad := strings.Replace(doc, c.from, c.to, 1)
		if _, err := policy.Parse("t.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}
