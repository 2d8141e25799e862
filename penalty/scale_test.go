package penalty

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

func TestSuspicionScale(t *testing.T) {
	s, err := NewSuspicionScale(0.2, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want float64 }{{0, 1}, {0.2, 1}, {0.6, 0.625}, {1, 0.25}} {
		if got, err := s.Multiplier(c.in); err != nil || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Multiplier(%v) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []float64{-0.1, 1.1, math.NaN()} {
		if _, err := s.Multiplier(bad); err == nil {
			t.Errorf("Multiplier(%v) accepted", bad)
		}
	}
	if _, err := (SuspicionScale{}).Multiplier(0.5); err == nil {
		t.Error("zero scale accepted")
	}
	for _, p := range [][2]float64{{-0.1, 0.5}, {1, 0.5}, {0.5, 0}, {0.5, 1.1}, {math.NaN(), 0.5}} {
		if _, err := NewSuspicionScale(p[0], p[1]); err == nil {
			t.Errorf("NewSuspicionScale(%v, %v) accepted", p[0], p[1])
		}
	}
}

// TestSuspicionScaleMonotone: the multiplier stays in [floor, 1] and never
// rises as suspicion grows.
func TestSuspicionScaleMonotone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, err := NewSuspicionScale(rapid.Float64Range(0, 0.99).Draw(t, "threshold"), rapid.Float64Range(0.01, 1).Draw(t, "floor"))
		if err != nil {
			t.Fatal(err)
		}
		a, b := rapid.Float64Range(0, 1).Draw(t, "a"), rapid.Float64Range(0, 1).Draw(t, "b")
		ma, _ := s.Multiplier(min(a, b))
		mb, _ := s.Multiplier(max(a, b))
		if mb > ma || mb < s.floor-1e-12 || ma > 1 {
			t.Fatalf("m(%v)=%v, m(%v)=%v", min(a, b), ma, max(a, b), mb)
		}
	})
}
