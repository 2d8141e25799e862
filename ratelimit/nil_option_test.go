package ratelimit

import "testing"

// TestNilOptionIsAnError: a nil option is a constructor error, never a
// panic.
func TestNilOptionIsAnError(t *testing.T) {
	if _, err := NewShardedWindow(16, MinWindow, nil); err == nil {
		t.Error("NewShardedWindow with a nil option: no error")
	}
	if _, err := NewShardedBucket(Per(16, MinWindow), 16, nil); err == nil {
		t.Error("NewShardedBucket with a nil option: no error")
	}
}
