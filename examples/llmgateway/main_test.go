package main

import (
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/policy"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSelfTest runs the self-test, which fails when a target is missed,
// and checks what it measured beyond its one line.
func TestSelfTest(t *testing.T) {
	res, err := selfTest(io.Discard)
	t.Logf("%+v", res)
	if err != nil {
		t.Fatal(err)
	}
	// The budget was spent, not refused early: the refunds of the requests
	// in flight when the first was refused leave at most an estimate and
	// what they overestimated unspent.
	if low := int64(testBudget - estimate - upstreamTokens/estimate*(estimate-usedMin)); res.used < low {
		t.Errorf("the metered tenant used %d tokens of its %d, less than %d", res.used, testBudget, low)
	}
	if res.batchServed == 0 {
		t.Errorf("no batch request served under the overload (%d asked): critical work took the reserve and more", res.batchAsked)
	}
	if res.batchServed == res.batchAsked {
		t.Errorf("all %d batch requests served: the scene did not overload the model", res.batchAsked)
	}
}

// TestPolicyFileSaysTheSame: the policy file of the gateway holds the
// rules of this example.
func TestPolicyFileSaysTheSame(t *testing.T) {
	p, err := policy.Load(filepath.Join("..", "policies", "llm-gateway.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Rules()
	if err != nil {
		t.Fatal(err)
	}
	if want := rules(dailyBudget); !slices.Equal(got, want) {
		t.Fatalf("the policy file's rules\n%+v\nthe example's\n%+v", got, want)
	}
}
