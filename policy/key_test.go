package policy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/shed"
)

// TestKeyField: a rule's "key" makes it a composite rule counting per
// tenant and model; a key with an identity other than composite, too many
// parts or an unknown part is an error at the rule's line.
func TestKeyField(t *testing.T) {
	const doc = `{"version": 1, "rules": [
  {"name": "tm", "key": ["tenant", "attr:model"], "algorithm": "fixed_window", "limit": 1, "window": "1h"}
]}`
	rules := rulesOf(t, doc)
	if rules[0].Identity != shed.Composite || rules[0].Key != (shed.Key{"tenant", "attr:model"}) {
		t.Fatalf("rule %+v", rules[0])
	}
	c := controllerOf(t, doc)
	ask := func(model string) bool {
		d, tok, err := c.Decide(context.Background(), shed.Attempt{Tenant: "acme", Attributes: []shed.Attribute{{Name: "model", Value: model}}})
		if err != nil {
			t.Fatal(err)
		}
		tok.Done(shed.Success)
		return d.Allowed
	}
	if !ask("large") || ask("large") || !ask("small") {
		t.Error("tenant + model is not one key per pair")
	}
	for _, tc := range []struct{ key, want string }{
		{`"identity": "ip", "key": ["route"]`, "t.json:2: rules[0].key"},
		{`"key": ["ip", "route", "ja4", "user", "tenant"]`, "at most 4 parts"},
		{`"key": ["route", ""]`, "rules[0].key[1]"},
		{`"identity": "composite"`, "rules[0].key: is required"},
	} {
		bad := strings.Replace(doc, `"key": ["tenant", "attr:model"]`, tc.key, 1)
		if _, err := policy.Parse("t.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.key, err, tc.want)
		}
	}
	p, err := policy.Parse("t.json", []byte(strings.Replace(doc, `"attr:model"`, `"model"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.New(); err == nil || !strings.Contains(err.Error(), "unknown key part") || !strings.Contains(err.Error(), "t.json:2") {
		t.Errorf("an unknown part: %v", err)
	}
}
