package main

import (
	"io"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelfTest(t *testing.T) {
	res, err := selfTest(io.Discard, 400*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// With the accelerators held: a's 5th and 6th are over its per-key
	// limit (429); b, c and d fill the adaptive limit's initial 16; e is
	// shed (503). Every rejection says when to retry.
	if res.admitted != 16 {
		t.Errorf("admitted while held: %d, want 16", res.admitted)
	}
	want := []struct {
		key    string
		status int
	}{{"a", 429}, {"a", 429}, {"e", 503}, {"e", 503}, {"e", 503}, {"e", 503}}
	if len(res.burst) != len(want) {
		t.Fatalf("rejections while held: %+v, want %v", res.burst, want)
	}
	for i, c := range res.burst {
		if c.key != want[i].key || c.status != want[i].status {
			t.Errorf("rejection %d: key %s %d, want key %s %d", i, c.key, c.status, want[i].key, want[i].status)
		}
		if n, err := strconv.Atoi(c.retryAfter); err != nil || n <= 0 {
			t.Errorf("rejection %d: Retry-After %q", i, c.retryAfter)
		}
	}

	// Under the load: only 200s and 503s, and the limit within its bounds.
	if res.load[200] == 0 {
		t.Errorf("no request served under the load: %v", res.load)
	}
	for status, n := range res.load {
		if status != 200 && status != 503 {
			t.Errorf("%d answers with status %d under the load", n, status)
		}
	}
	if len(res.limit) != 10 {
		t.Errorf("%d limit samples, want 10", len(res.limit))
	}
	for _, l := range res.limit {
		if l < accelerators || l > 64 {
			t.Errorf("adaptive limit %d outside [%d, 64]", l, accelerators)
		}
	}
}
