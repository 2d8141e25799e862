package adaptive

import (
	"math"
	"testing"
)

// TestLimitAboveTheSemaphoreIsAnError: a max limit the Limiter's
// semaphore cannot hold is refused, not silently kept lower.
func TestLimitAboveTheSemaphoreIsAnError(t *testing.T) {
	if _, err := NewAIMD(WithLimits(1, math.MaxInt)); err == nil {
		t.Error("WithLimits(1, MaxInt): no error")
	}
}
