package penalty

import "testing"

// TestNilOptionIsAnError: a nil option is a constructor error, never a
// panic.
func TestNilOptionIsAnError(t *testing.T) {
	if _, err := NewBox(16, nil); err == nil {
		t.Error("NewBox with a nil option: no error")
	}
}

// TestSuspicionScaleSaysItsBounds: a scale reports the threshold and floor
// it was made with, and the zero scale a floor of 0.
func TestSuspicionScaleSaysItsBounds(t *testing.T) {
	s, err := NewSuspicionScale(0.5, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	if s.Threshold() != 0.5 || s.Floor() != 0.25 || (SuspicionScale{}).Floor() != 0 {
		t.Fatalf("threshold %v floor %v", s.Threshold(), s.Floor())
	}
}
