package otelshed_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/otelshed"
)

// A waiting attempt shows in the waiting gauge; once its wait ends, in
// the queue counters, its wait in seconds (in a synctest bubble: waits
// are on the fake clock). One attempt is served after 3s; another is shed
// after the rule's 10s.
func TestQueueWaitsInSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, mp := newReader(t)
		c, err := shed.New([]shed.Rule{{Name: "workers", Algorithm: shed.Concurrency, Limit: 1, MaxWait: 10 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		m, err := otelshed.New(mp, c)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Unregister()
		queue := []string{"sluice.queue.waits", "sluice.queue.wait.time", "sluice.queue.shed", "sluice.rule.queue.waiting"}

		_, first, err := c.Decide(context.Background(), shed.Attempt{})
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan shed.Decision)
		go func() {
			d, tok, err := c.Decide(context.Background(), shed.Attempt{})
			if err == nil && d.Allowed {
				tok.Done(shed.Success)
			}
			served <- d
		}()
		synctest.Wait() // the second is waiting
		expect(t, gather(t, r), "while one waits", `
			sluice.queue.waits{} 0
			sluice.queue.wait.time{} 0
			sluice.queue.shed{} 0
			sluice.rule.queue.waiting{sluice.rule.name=workers} 1
		`, queue...)
		time.Sleep(3 * time.Second)
		first.Done(shed.Success)
		if d := <-served; !d.Allowed {
			t.Fatalf("the waiting attempt: %+v", d)
		}

		_, held, err := c.Decide(context.Background(), shed.Attempt{})
		if err != nil {
			t.Fatal(err)
		}
		if d, _, err := c.Decide(context.Background(), shed.Attempt{}); err != nil || d.Kind != shed.Shedding {
			t.Fatalf("an attempt that waits past MaxWait: %+v, %v", d, err)
		}
		held.Done(shed.Success)
		expect(t, gather(t, r), "after both waits", `
			sluice.queue.waits{} 2
			sluice.queue.wait.time{} 13
			sluice.queue.shed{} 1
			sluice.rule.queue.waiting{sluice.rule.name=workers} 0
		`, queue...)
	})
}
