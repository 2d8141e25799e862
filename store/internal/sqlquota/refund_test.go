package sqlquota

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// TestPaidOff: an admission's bucket is full again ResetAfter after the
// decision's instant, hit by hit.
func TestPaidOff(t *testing.T) {
	res := &store.Result{Now: 1_700_000_000_000_000_000, N: 2, Allowed: true}
	res.Hits[0].Decision = ratelimit.Decision{ResetAfter: 1500 * time.Millisecond}
	res.Hits[1].Decision = ratelimit.Decision{}
	if got, want := PaidOff(res, 0), res.Now+int64(1500*time.Millisecond); got != want {
		t.Errorf("PaidOff(hit 0) = %d, want %d", got, want)
	}
	if got := PaidOff(res, 1); got != res.Now {
		t.Errorf("PaidOff(hit 1, a full bucket) = %d, want now, %d", got, res.Now)
	}
}
