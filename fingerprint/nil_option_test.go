package fingerprint

import "testing"

// TestNilOptionIsAnError: a nil option is a constructor error naming it,
// never a panic.
func TestNilOptionIsAnError(t *testing.T) {
	if _, err := NewHasher(nil); err == nil {
		t.Error("NewHasher(nil): no error")
	}
	if _, err := NewResolver(nil); err == nil {
		t.Error("NewResolver(nil): no error")
	}
	if _, err := NewTracker(16, nil); err == nil {
		t.Error("NewTracker(16, nil): no error")
	}
}
