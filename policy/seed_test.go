package policy_test

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/policy"
)

// The seed files shipped in examples/policies load, validate and build a
// controller.
func TestSeedPolicies(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "policies", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("want the 4 seed policies, found %v", files)
	}
	for _, f := range files {
		p, err := policy.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		c, err := p.New()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		_ = c.Close()
	}
}
