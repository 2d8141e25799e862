package concurrency

import (
	"testing"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestNilOptionIsAnError: a nil option is a constructor error, never a
// panic.
func TestNilOptionIsAnError(t *testing.T) {
	if _, err := NewTable[ratelimit.GCRAState](16, func(*ratelimit.GCRAState, int64) bool { return true }, nil); err == nil {
		t.Error("NewTable with a nil option: no error")
	}
	if _, err := NewShardedSemaphore(16, nil); err == nil {
		t.Error("NewShardedSemaphore with a nil option: no error")
	}
}
