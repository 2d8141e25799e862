package promshed_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// TestTightenedWouldRejectCounted: what tightening in dry-run would have
// rejected is a counter.
func TestTightenedWouldRejectCounted(t *testing.T) {
	tracker, err := fingerprint.NewTracker(16)
	if err != nil {
		t.Fatal(err)
	}
	scale, err := penalty.NewSuspicionScale(0.5, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	c, err := shed.New([]shed.Rule{
		{Name: "per-user", Identity: shed.User, Algorithm: shed.TokenBucket, Limit: 4, Rate: ratelimit.Per(1, time.Hour)},
	}, shed.WithClock(fixedClock), shed.WithLogger(discardLogger()),
		shed.WithSuspicion(shed.Suspicion{Tracker: tracker, Scale: scale, DryRun: true}))
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t, c)
	for range 4 { // the tightened burst is 1: three would be rejected
		d, tok, err := c.Decide(context.Background(), shed.Attempt{User: "u", Tightened: true})
		if err != nil || !d.Allowed {
			t.Fatalf("decide: %+v, %v", d, err)
		}
		tok.Done(shed.Success)
	}
	want := `
# HELP sluice_tightened_would_reject_total Admitted decisions that tightening in dry-run would have rejected.
# TYPE sluice_tightened_would_reject_total counter
sluice_tightened_would_reject_total 3
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "sluice_tightened_would_reject_total"); err != nil {
		t.Error(err)
	}
}
