package penalty

import "fmt"

// SuspicionScale lowers a client's limits as its suspicion grows, before it
// earns a timeout. Up to Threshold the multiplier is 1; above it, it falls
// linearly to Floor at suspicion 1. The caller multiplies the client's limit
// by it, typically through the adaptive limiter's hook, and feeds it the
// suspicion score of fingerprint.Tracker.
//
// A SuspicionScale is a plain value; NewSuspicionScale validates it.
type SuspicionScale struct {
	threshold, floor float64
}

// NewSuspicionScale returns a scale that keeps limits whole up to threshold
// (in [0, 1)) and scales them down to floor (in (0, 1]) at suspicion 1.
// It returns an error for values outside those ranges.
func NewSuspicionScale(threshold, floor float64) (SuspicionScale, error) {
	if !(threshold >= 0 && threshold < 1) {
		return SuspicionScale{}, fmt.Errorf("penalty: suspicion threshold must be in [0, 1), got %v", threshold)
	}
	if !(floor > 0 && floor <= 1) {
		return SuspicionScale{}, fmt.Errorf("penalty: limit floor must be in (0, 1], got %v", floor)
	}
	return SuspicionScale{threshold: threshold, floor: floor}, nil
}

// Threshold returns the suspicion up to which limits stay whole, and Floor
// the multiplier at suspicion 1 (0 for the zero SuspicionScale).
func (s SuspicionScale) Threshold() float64 { return s.threshold }

// Floor returns the multiplier at suspicion 1; see Threshold.
func (s SuspicionScale) Floor() float64 { return s.floor }

// Multiplier returns the limit multiplier in [floor, 1] for a suspicion
// score in [0, 1]. It returns an error for a score outside [0, 1] or NaN
// and for the zero SuspicionScale; it allocates nothing on success.
func (s SuspicionScale) Multiplier(suspicion float64) (float64, error) {
	if s.floor == 0 {
		return 0, fmt.Errorf("penalty: zero SuspicionScale; use NewSuspicionScale")
	}
	if !(suspicion >= 0 && suspicion <= 1) {
		return 0, fmt.Errorf("penalty: suspicion must be in [0, 1], got %v", suspicion)
	}
	if suspicion <= s.threshold {
		return 1, nil
	}
	frac := (suspicion - s.threshold) / (1 - s.threshold)
	return 1 - frac*(1-s.floor), nil
}
