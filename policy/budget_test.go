package policy_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/policy"
)

// TestMaxBytesField: a file's max_bytes reaches the rule's byte budget;
// without it, a rule whose worst case exceeds the default budget is an
// error at its line naming the figures; a negative budget is refused.
func TestMaxBytesField(t *testing.T) {
	const doc = `{"version": 1, "rules": [
  {"name": "login-ip", "identity": "ip", "algorithm": "sliding_log", "limit": 1000, "window": "1h"%s}
]}`
	p, err := policy.Parse("t.json", []byte(strings.Replace(doc, "%s", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.New(); err == nil || !strings.Contains(err.Error(), "byte budget") || !strings.Contains(err.Error(), "t.json:2") {
		t.Errorf("a 1 GiB sliding log under the default budget: %v", err)
	}
	c := controllerOf(t, strings.Replace(doc, "%s", `, "max_bytes": 2147483648`, 1))
	if len(c.Stats().Rules) != 1 {
		t.Error("the rule is missing")
	}
	if r := rulesOf(t, strings.Replace(doc, "%s", `, "max_bytes": 2147483648`, 1)); r[0].MaxBytes != 2<<30 {
		t.Errorf("max_bytes read as %d", r[0].MaxBytes)
	}
	if _, err := policy.Parse("t.json", []byte(strings.Replace(doc, "%s", `, "max_bytes": -1`, 1))); err == nil ||
		!strings.Contains(err.Error(), "max_bytes") {
		t.Errorf("a negative budget: %v", err)
	}
}
