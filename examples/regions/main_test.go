package main

import (
	"bytes"
	"regexp"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSelfTest: the self-test prints its one line and stays within the
// bound: the two regions admit the quota, less the headroom at most, and
// no more than the bound over it.
func TestSelfTest(t *testing.T) {
	var out bytes.Buffer
	o, err := selfTest(&out, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !regexp.MustCompile(`^regions: limit=500 admitted_total=\d+ overshoot=\d+ sync_lag_ms=\d+\n$`).Match(out.Bytes()) {
		t.Errorf("output %q", out.String())
	}
	if o.admitted < dailyLimit-dailyLimit/10 {
		t.Errorf("%d admitted, fewer than the limit less the headroom (%d)", o.admitted, dailyLimit-dailyLimit/10)
	}
	t.Log(out.String())
}
