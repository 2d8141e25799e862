package policy_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/shed"
)

// TestPrefixOverflowField: an ip rule's prefix overflow and its prefix
// are expressible in a file; their mistakes are errors at their line.
func TestPrefixOverflowField(t *testing.T) {
	doc := `{
  "version": 1,
  "rules": [
    {"name": "api-ip", "identity": "ip", "algorithm": "sliding_window", "limit": 300, "window": "5m",
     "overflow": "prefix", "prefix": {"ipv4": 20, "factor": 2}},
    {"name": "login-ip", "identity": "ip", "algorithm": "sliding_log", "limit": 10, "window": "15m",
     "overflow": "prefix"}
  ]
}`
	rules := rulesOf(t, doc)
	if r := rules[0]; r.Overflow != shed.OverflowPrefix || r.Prefix != (shed.Prefix{IPv4: 20, Factor: 2}) {
		t.Fatalf("api-ip: overflow %v, prefix %+v", r.Overflow, r.Prefix)
	}
	if r := rules[1]; r.Overflow != shed.OverflowPrefix || r.Prefix != (shed.Prefix{}) {
		t.Fatalf("login-ip: overflow %v, prefix %+v (want the defaults)", r.Overflow, r.Prefix)
	}
	controllerOf(t, doc) // the rules build

	rule := func(identity, body string) string {
		return "{\n  \"version\": 1,\n  \"rules\": [\n    {\"name\": \"r\", \"identity\": \"" + identity +
			"\", \"limit\": 5, \"algorithm\": \"sliding_log\", \"window\": \"1h\",\n" + body + "}\n  ]\n}\n"
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"user rule", rule("user", "     \"overflow\": \"prefix\"\n"),
			"t.json:5: rules[0].overflow: prefix applies only to ip rules"},
		{"prefix without it", rule("ip", "     \"overflow\": \"share\", \"prefix\": {\"ipv4\": 24}\n"),
			"t.json:5: rules[0].prefix: applies only to \"overflow\": \"prefix\""},
		{"ipv4", rule("ip", "     \"overflow\": \"prefix\", \"prefix\": {\"ipv4\": 33}\n"),
			"t.json:5: rules[0].prefix.ipv4: must be 1 to 32 bits"},
		{"ipv6", rule("ip", "     \"overflow\": \"prefix\", \"prefix\": {\"ipv6\": -1}\n"),
			"t.json:5: rules[0].prefix.ipv6: must be 1 to 128 bits"},
		{"factor", rule("ip", "     \"overflow\": \"prefix\", \"prefix\": {\"factor\": -1}\n"),
			"t.json:5: rules[0].prefix.factor: must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.Parse("t.json", []byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v\nwant %q", err, tc.want)
			}
		})
	}
}
