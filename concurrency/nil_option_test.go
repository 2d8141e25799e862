package concurrency

import "testing"

// TestNilOptionIsAnError: a nil option is a constructor error, never a
// panic.
func TestNilOptionIsAnError(t *testing.T) {
	if _, err := NewTable[GCRAState](16, func(*GCRAState, int64) bool { return true }, nil); err == nil {
		t.Error("NewTable with a nil option: no error")
	}
	if _, err := NewShardedSemaphore(16, nil); err == nil {
		t.Error("NewShardedSemaphore with a nil option: no error")
	}
	if _, err := NewShardedWindow(16, MinWindow, nil); err == nil {
		t.Error("NewShardedWindow with a nil option: no error")
	}
}
