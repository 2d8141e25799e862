package otelshed_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/otelshed"
)

// The Metrics are a Controller's Observer (WithObserver): its histograms
// fill from the Controller's decisions.
var _ shed.Observer = (*otelshed.Metrics)(nil)

// countingObserver counts what a Controller reports.
type countingObserver struct{ decisions, waits int }

func (o *countingObserver) ObserveQueueWait(string, time.Duration, bool) { o.waits++ }
func (o *countingObserver) ObserveDecision(shed.Kind, time.Duration)     { o.decisions++ }

// TestControllerReportsToItsObserver: every decision and every queue wait
// reaches the Observer of WithObserver.
func TestControllerReportsToItsObserver(t *testing.T) {
	synctest.Test(t, testControllerReportsToItsObserver)
}

func testControllerReportsToItsObserver(t *testing.T) {
	obs := &countingObserver{}
	c, err := shed.New([]shed.Rule{{Name: "inflight", Algorithm: shed.Concurrency, Limit: 1, MaxWait: time.Millisecond}},
		shed.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, held, err := c.Decide(context.Background(), shed.Attempt{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Decide(context.Background(), shed.Attempt{}); err != nil { // waits 1 ms, shed
		t.Fatal(err)
	}
	held.Done(shed.Success)
	if obs.decisions != 2 || obs.waits != 1 {
		t.Fatalf("%d decisions, %d waits observed; want 2 and 1", obs.decisions, obs.waits)
	}
	if _, err := shed.New([]shed.Rule{{Name: "inflight", Algorithm: shed.Concurrency, Limit: 1}}, shed.WithObserver(nil)); err == nil {
		t.Fatal("WithObserver(nil): no error")
	}
}
