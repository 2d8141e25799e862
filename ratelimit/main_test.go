package ratelimit

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test of the package leaves a goroutine behind: the
// rate algorithms start none, and the concurrent tests must join all of theirs.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
