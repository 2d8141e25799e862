package promshed_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// A request waiting for a permit shows in the waiting gauge, and its wait
// in the queue counters once it is served (in a synctest bubble: the wait
// is on the fake clock).
func TestQueueMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := shed.New([]shed.Rule{{Name: "workers", Algorithm: shed.Concurrency, Limit: 1, MaxWait: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		col := newCollector(t, c)
		_, first, err := c.Decide(context.Background(), shed.Attempt{})
		if err != nil {
			t.Fatal(err)
		}
		served := decideAside(c)
		synctest.Wait() // the second is waiting
		if err := testutil.CollectAndCompare(col, strings.NewReader(`
# HELP sluice_rule_queue_waiting Attempts waiting for a permit of a Global concurrency or adaptive rule.
# TYPE sluice_rule_queue_waiting gauge
sluice_rule_queue_waiting{rule="workers"} 1
`), "sluice_rule_queue_waiting"); err != nil {
			t.Error(err)
		}
		time.Sleep(3 * time.Second) // fake time, in the bubble
		first.Done(shed.Success)
		if d := <-served; !d.Allowed {
			t.Fatalf("the waiting request: %+v", d)
		}
		if err := testutil.CollectAndCompare(col, strings.NewReader(`
# HELP sluice_queue_wait_seconds_total Total time attempts spent waiting for a concurrency permit.
# TYPE sluice_queue_wait_seconds_total counter
sluice_queue_wait_seconds_total 3
# HELP sluice_queue_waits_total Attempts that waited for a concurrency permit.
# TYPE sluice_queue_waits_total counter
sluice_queue_waits_total 1
# HELP sluice_rule_queue_waiting Attempts waiting for a permit of a Global concurrency or adaptive rule.
# TYPE sluice_rule_queue_waiting gauge
sluice_rule_queue_waiting{rule="workers"} 0
`), "sluice_queue_wait_seconds_total", "sluice_queue_waits_total", "sluice_rule_queue_waiting"); err != nil {
			t.Error(err)
		}
	})
}

// A request waiting for its reserved slot on a token-bucket rule shows in
// the rate waiting gauge, and its wait in the rule's rate wait counters.
func TestRateWaitMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := shed.New([]shed.Rule{{Name: "calls", Algorithm: shed.TokenBucket, Limit: 1,
			Rate: ratelimit.Per(1, time.Second), MaxWait: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		col := newCollector(t, c)
		_, first, _ := c.Decide(context.Background(), shed.Attempt{})
		first.Done(shed.Success)
		served := decideAside(c)
		synctest.Wait() // waiting for its slot, a second on
		if err := testutil.CollectAndCompare(col, strings.NewReader(`
# HELP sluice_rule_rate_waiting Attempts waiting for the slot a token-bucket rule with a max wait reserved.
# TYPE sluice_rule_rate_waiting gauge
sluice_rule_rate_waiting{rule="calls"} 1
`), "sluice_rule_rate_waiting"); err != nil {
			t.Error(err)
		}
		if d := <-served; !d.Allowed {
			t.Fatalf("the waiting request: %+v", d)
		}
		if err := testutil.CollectAndCompare(col, strings.NewReader(`
# HELP sluice_rule_rate_wait_seconds_total Total time attempts waited for the slots a token-bucket rule with a max wait reserved.
# TYPE sluice_rule_rate_wait_seconds_total counter
sluice_rule_rate_wait_seconds_total{rule="calls"} 1
# HELP sluice_rule_rate_waits_total Attempts that waited for the slot a token-bucket rule with a max wait reserved: waited (and ran), or cancelled (the context ended first).
# TYPE sluice_rule_rate_waits_total counter
sluice_rule_rate_waits_total{outcome="cancelled",rule="calls"} 0
sluice_rule_rate_waits_total{outcome="waited",rule="calls"} 1
`), "sluice_rule_rate_waits_total", "sluice_rule_rate_wait_seconds_total"); err != nil {
			t.Error(err)
		}
	})
}

// decideAside decides an empty Attempt on c in a goroutine of its own,
// finishing its token at once when admitted, and sends the decision on
// the channel it returns.
func decideAside(c *shed.Controller) <-chan shed.Decision {
	served := make(chan shed.Decision)
	go func() {
		d, tok, err := c.Decide(context.Background(), shed.Attempt{})
		if err == nil && d.Allowed {
			tok.Done(shed.Success)
		}
		served <- d
	}()
	return served
}
