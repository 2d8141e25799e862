package main

import (
	"io"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelfTest(t *testing.T) {
	got, err := selfTest(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("%d answers, want 10", len(got))
	}
	retryAfter := func(a answer) int {
		t.Helper()
		n, err := strconv.Atoi(a.retryAfter)
		if err != nil || n <= 0 {
			t.Errorf("%s: Retry-After %q, want positive delta-seconds", a.label, a.retryAfter)
		}
		return n
	}
	// Store down: fail closed.
	if a := got[0]; a.status != 503 || a.kind != "temporary-reduced-capacity" {
		t.Errorf("store down: %d %s, want 503 temporary-reduced-capacity", a.status, a.kind)
	} else {
		retryAfter(a)
	}
	// Five guesses per account reach the handler; the 6th is over the limit.
	for _, a := range got[1:6] {
		if a.status != 401 {
			t.Errorf("%s: %d, want 401 (reaches the password check)", a.label, a.status)
		}
	}
	if a := got[6]; a.status != 429 || a.kind != "quota-exceeded" {
		t.Errorf("%s: %d %s, want 429 quota-exceeded", a.label, a.status, a.kind)
	} else if n := retryAfter(a); n > 15*60 {
		t.Errorf("%s: Retry-After %d beyond the 15 minute window", a.label, n)
	}
	// Three over-limit rejections: the IP is in a timeout, whatever the account.
	if a := got[9]; a.status != 429 || a.kind != "abnormal-usage-detected" {
		t.Errorf("%s: %d %s, want 429 abnormal-usage-detected", a.label, a.status, a.kind)
	} else if n := retryAfter(a); n != 300 {
		t.Errorf("%s: Retry-After %d, want the first timeout, 300", a.label, n)
	}
}
