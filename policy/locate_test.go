package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/policy"
)

// TestParseRejectsDuplicateKeys: a key given twice in any object of a
// policy file is an error at the line of its second occurrence, never the
// silent last-one-wins of encoding/json (which would enforce "limit": 5000
// where a reader of the file sees "limit": 5).
func TestParseRejectsDuplicateKeys(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"rule limit", `{"version": 1, "rules": [
  {"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5,
   "window": "1m",
   "limit": 5000}]}`, `t.json:4: rules[0].limit: key "limit" is given twice (first on line 2)`},
		{"top level", `{"version": 1,
 "rules": [{"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m"}],
 "version": 1}`, `t.json:3: version: key "version" is given twice (first on line 1)`},
		{"nested rate", `{"version": 1, "rules": [
  {"name": "r", "identity": "ip", "algorithm": "token_bucket", "limit": 5,
   "rate": {"count": 1, "per": "1s",
            "count": 100}}]}`, `t.json:4: rules[0].rate.count: key "count" is given twice (first on line 3)`},
		{"tiers", `{"version": 1,
 "tiers": {"names": ["free", "pro"], "default": "free",
   "default": "pro"},
 "rules": [{"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m"}]}`,
			`t.json:3: tiers.default: key "default" is given twice (first on line 2)`},
		{"tier of a rule", `{"version": 1,
 "tiers": {"names": ["free", "pro"], "default": "free"},
 "rules": [{"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m",
   "tiers": {"pro": {"limit": 50},
             "pro": {"limit": 50000}}}]}`, `t.json:5: rules[0].tiers.pro: key "pro" is given twice (first on line 4)`},
		{"override", `{"version": 1,
 "rules": [{"name": "r", "identity": "tenant", "algorithm": "sliding_log", "limit": 5, "window": "1m"}],
 "overrides": [{"rule": "r", "key": "acme", "factor": 2, "until": "2026-12-07T00:00:00Z",
   "factor": 2000}]}`, `t.json:4: overrides[0].factor: key "factor" is given twice (first on line 3)`},
		{"penalties", `{"version": 1,
 "rules": [{"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m"}],
 "penalties": {"identity": "ip", "capacity": 10, "timeouts": ["1m"],
   "timeouts": ["1s"]}}`, `t.json:4: penalties.timeouts: key "timeouts" is given twice (first on line 3)`},
		{"escaped spelling", `{"version": 1, "rules": [
  {"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m",
   "li\u006dit": 5000}]}`, `t.json:3: rules[0].limit: key "limit" is given twice (first on line 2)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.Parse("t.json", []byte(tc.doc))
			var pe *policy.Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v (%T), want a *policy.Error", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}
