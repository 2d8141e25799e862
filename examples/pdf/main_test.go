package main

import (
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSelfTest(t *testing.T) {
	res, err := selfTest(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	all := func(name string, calls []call, n, status int) {
		t.Helper()
		if len(calls) != n {
			t.Errorf("%s: %d answers, want %d", name, len(calls), n)
		}
		for _, c := range calls {
			if c.status != status {
				t.Errorf("%s: status %d, want %d", name, c.status, status)
			}
			if status == 503 && c.retryAfter != "1" {
				t.Errorf("%s: Retry-After %q, want 1", name, c.retryAfter)
			}
		}
	}
	// 2 render, 4 wait: the queue is full for the other 2; the 4 waiting
	// are served when the renders finish.
	all("burst, while renders are busy", res.burstShed, 2, 503)
	all("burst, after", res.burstServed, 6, 200)
	// The pacer lets the uploads out no faster than 5 a second: the i-th
	// cannot start before i slots of 200 ms have passed since the renders
	// were let go (a lower bound that holds however slow the machine).
	if len(res.uploads) != 6 {
		t.Fatalf("%d uploads, want 6", len(res.uploads))
	}
	for i, u := range res.uploads {
		if slot := time.Duration(i) * time.Second / uploads; u < slot {
			t.Errorf("upload %d at +%v, before its slot at +%v", i, u, slot)
		}
	}
	// A wait longer than the max wait ends in a 503, after the max wait.
	all("max wait", res.waitShed, 1, 503)
	if len(res.waitShed) == 1 && res.waitShed[0].took < maxWait {
		t.Errorf("shed after %v in the queue, before the max wait %v", res.waitShed[0].took, maxWait)
	}
	all("max wait, the renders", res.waitServed, 2, 200)
	// shed counts both: 2 refused with the queue full, 1 at the max wait.
	if res.queueShed != 3 {
		t.Errorf("Stats.QueueShed = %d, want 3", res.queueShed)
	}
}
