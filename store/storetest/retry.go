package storetest

import (
	"testing"
	"time"
)

// RetryDoubling runs try, one try of a fault test's scenario, until it
// shows the case: try number n (from 1) gets timeout, doubled for each
// try before it, as the store's deadline, and returns why it could not
// show the case (a loaded machine missed the deadline on the live server
// too, or took longer than the slack to give up on a failed one), or ""
// when it showed it. Each such why is logged, and the tries-th fails t.
// It returns the deadline of the try that showed the case. try fails t
// itself where the store is wrong.
func RetryDoubling(t testing.TB, tries int, timeout time.Duration, try func(n int, timeout time.Duration) string) time.Duration {
	t.Helper()
	for n := 1; ; n, timeout = n+1, 2*timeout {
		why := try(n, timeout)
		if why == "" {
			return timeout
		}
		if n >= tries {
			t.Fatalf("%d tries, the last with a deadline of %v: %s", tries, timeout, why)
		}
		t.Logf("with a deadline of %v: %s; trying again with twice that", timeout, why)
	}
}
