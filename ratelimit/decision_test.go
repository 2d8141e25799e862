package ratelimit

import (
	"testing"
	"time"
	"unsafe"
)

func TestDecisionEncoding(t *testing.T) {
	for _, tc := range []struct {
		retry   time.Duration
		allowed bool
		reason  Reason
	}{
		{0, true, ReasonAllowed},
		{1, false, ReasonLimited},
		{time.Second, false, ReasonLimited},
		{Never - 1, false, ReasonLimited},
		{Never, false, ReasonExceedsCapacity},
	} {
		d := Decision{Limit: 3, Remaining: 1, RetryAfter: tc.retry, ResetAfter: time.Second}
		if d.Allowed() != tc.allowed || d.Reason() != tc.reason {
			t.Errorf("RetryAfter %v: Allowed %v Reason %v, want %v %v", tc.retry, d.Allowed(), d.Reason(), tc.allowed, tc.reason)
		}
	}
	// Four words: the size that the compiler keeps in registers.
	if got := unsafe.Sizeof(Decision{}); got != 32 {
		t.Errorf("Decision is %d bytes, want 32", got)
	}
}
