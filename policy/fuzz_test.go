package policy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/policy"
)

// FuzzParse feeds arbitrary documents to Parse: it must return a policy or
// an *Error, never panic, and a policy it accepts must marshal and parse
// back to the same rules.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "examples", "policies", "*.json"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"version": 1, "rules": [{"name": "r", "identity": "ip", "algorithm": "token_bucket", "limit": 3, "rate": {"count": 1, "per": "1s"}}]}`))
	f.Add([]byte(`{"version": 1, "rules": [{"name": "c", "identity": "global", "algorithm": "concurrency", "limit": 3, "max_wait": "1d"}]}`))
	f.Add([]byte(`{"version": 1, "rules": [[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}`))
	f.Add([]byte(`{"version": 1, "rules": [{"name": "r", "limit": 1e400}]}`))
	f.Add([]byte(`{"version": 1, "rules": [{"name": "c", "identity": "global", "algorithm": "concurrency", "limit": 3, "max_wait": "2562048h"}]}`))
	f.Add([]byte(`{"version": 1, "rules": [{"name": "w", "identity": "ip", "algorithm": "fixed_window", "limit": 3, "window": "106751d"}]}`))
	f.Add([]byte(`{"version": 1, "rules": [{"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m", "limit": 5000}]}`))
	f.Add([]byte(`{"version": 1, "tiers": {"names": ["a"], "default": "a"}, "rules": [{"name": "r", "identity": "ip", "algorithm": "sliding_log", "limit": 5, "window": "1m", "tiers": {"a": {"limit": 1}, "a": {"limit": 9}}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.Parse("f.json", data)
		if err != nil {
			if _, ok := err.(*policy.Error); !ok {
				t.Fatalf("error %T is not a *policy.Error", err)
			}
			return
		}
		doc, err := policy.Marshal(p.File())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := policy.Parse("f2.json", doc); err != nil {
			t.Fatalf("a parsed policy does not parse back: %v\n%s", err, doc)
		}
	})
}
