package concurrency

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test of the package leaves a goroutine behind: the
// primitives start none, and the concurrency tests must join all of theirs.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mustPanic fails t unless f panics; what names the call.
func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatal(what + " did not panic")
		}
	}()
	f()
}
