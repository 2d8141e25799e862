package main

import (
	"io"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelfTest(t *testing.T) {
	res, err := selfTest(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if n := res.burst[200] + res.burst[503]; n != 150 {
		t.Errorf("burst: %v, want 150 answers, each 200 or 503", res.burst)
	}
	if res.burstAllowed > perWindow {
		t.Errorf("burst admitted %d, over the cap %d", res.burstAllowed, perWindow)
	}
	if got := res.burstAllowed + res.topUp; got != perWindow {
		t.Errorf("admitted in one window: %d, want exactly %d", got, perWindow)
	}
	if res.retryAfter != "1" {
		t.Errorf("Retry-After %q at the start of a 1 s window, want 1", res.retryAfter)
	}
	if res.nextWindow != 200 {
		t.Errorf("next window: %d, want 200", res.nextWindow)
	}
}
