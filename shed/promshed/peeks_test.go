package promshed_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// TestPeeksCounted: peeks are a counter of their own, and no decision.
func TestPeeksCounted(t *testing.T) {
	c, err := shed.New([]shed.Rule{
		{Name: "per-user", Identity: shed.User, Algorithm: shed.TokenBucket, Limit: 4, Rate: ratelimit.Per(1, time.Hour)},
	}, shed.WithClock(fixedClock), shed.WithLogger(discardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t, c)
	for range 3 {
		if _, err := c.Peek(context.Background(), shed.Attempt{User: "u"}); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP sluice_peeks_total Reads of rule state without a decision (Controller.Peek, PeekRequest): nothing charged, not counted as decisions.
# TYPE sluice_peeks_total counter
sluice_peeks_total 3
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "sluice_peeks_total"); err != nil {
		t.Error(err)
	}
	if s := c.Stats(); s.Admitted != 0 {
		t.Errorf("peeks counted as admissions: %+v", s)
	}
}
