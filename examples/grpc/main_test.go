package main

import (
	"io"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelfTest(t *testing.T) {
	if err := selfTest(io.Discard); err != nil {
		t.Fatal(err)
	}
}

// TestCheckFailsWhenThePointIsNotMade: a report in which the server let
// everything through, or the client never retried, is an error.
func TestCheckFailsWhenThePointIsNotMade(t *testing.T) {
	r, err := run(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	noShed := r
	noShed.plain = append([]outcome(nil), r.plain...)
	noShed.plain[5] = outcome{}
	noRetry := r
	noRetry.retries = 0
	for name, bad := range map[string]report{"no refusal": noShed, "no retry": noRetry} {
		if bad.check() == nil {
			t.Errorf("%s: check passed", name)
		}
	}
}
