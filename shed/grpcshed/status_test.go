package grpcshed

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

func TestRejectionPushbackNeverEarlierThanRetryInfo(t *testing.T) {
	for _, tc := range []struct {
		d        shed.Decision
		code     codes.Code
		pushback string
		retry    time.Duration // 0: no RetryInfo
	}{
		{shed.Decision{Kind: shed.OverLimit, RetryAfter: 1500 * time.Microsecond}, codes.ResourceExhausted, "2", 1500 * time.Microsecond},
		{shed.Decision{Kind: shed.OverLimit, RetryAfter: time.Nanosecond}, codes.ResourceExhausted, "1", time.Nanosecond},
		{shed.Decision{Kind: shed.Penalized, RetryAfter: 5 * time.Minute}, codes.ResourceExhausted, "300000", 5 * time.Minute},
		{shed.Decision{Kind: shed.Shedding, RetryAfter: time.Second}, codes.Unavailable, "1000", time.Second},
		{shed.Decision{Kind: shed.OverLimit, RetryAfter: ratelimit.Never}, codes.ResourceExhausted, "-1", 0},
		{shed.Decision{Kind: shed.Shedding, RetryAfter: ratelimit.Never}, codes.Unavailable, "-1", 0},
	} {
		st, trailer := Rejection(tc.d)
		if st.Code() != tc.code {
			t.Errorf("%v: code %v, want %v", tc.d.Kind, st.Code(), tc.code)
		}
		if got := pushback(t, trailer); got != tc.pushback {
			t.Errorf("%v after %v: pushback %q, want %q", tc.d.Kind, tc.d.RetryAfter, got, tc.pushback)
		}
		got, ok := retryInfo(st.Err())
		if ok != (tc.retry > 0) || got != tc.retry {
			t.Errorf("%v after %v: RetryInfo %v (present %v), want %v", tc.d.Kind, tc.d.RetryAfter, got, ok, tc.retry)
		}
	}
}
