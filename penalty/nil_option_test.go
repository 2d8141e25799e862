package penalty

import "testing"

// TestNilOptionIsAnError: a nil option is a constructor error, never a
// panic.
func TestNilOptionIsAnError(t *testing.T) {
	if _, err := NewBox(16, nil); err == nil {
		t.Error("NewBox with a nil option: no error")
	}
}
