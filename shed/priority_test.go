package shed

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// TestCriticalWorkSurvivesOverload: at 3x a Global Concurrency rule's
// capacity with 30% critical traffic, a priority queue serves critical
// attempts first: >= 99% of them are admitted, and the work shed is
// sheddable. (Virtual time: each admitted attempt holds its permit 10 ms.)
func TestCriticalWorkSurvivesOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New([]Rule{{Name: "inflight", Algorithm: Concurrency, Limit: 4, MaxWait: 50 * time.Millisecond,
			QueueLength: 32, Queue: Queue{Reserve: 0.25}}}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		const service = 10 * time.Millisecond // capacity 400/s
		rng := rand.New(rand.NewPCG(1, 2))
		var mu sync.Mutex
		asked, admitted := map[Priority]int{}, map[Priority]int{}
		var wg sync.WaitGroup
		for range 1200 { // 1 s at 1200/s: 3x
			p := Sheddable
			if rng.Float64() < 0.3 {
				p = Critical
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				d, tok, err := c.Decide(ctx, Attempt{Priority: p})
				mu.Lock()
				asked[p]++
				if err == nil && d.Allowed {
					admitted[p]++
				}
				mu.Unlock()
				if err == nil && d.Allowed {
					time.Sleep(service)
					tok.Done(Success)
				}
			})
			time.Sleep(time.Second / 1200)
		}
		wg.Wait()
		crit := float64(admitted[Critical]) / float64(asked[Critical])
		shed := float64(admitted[Sheddable]) / float64(asked[Sheddable])
		t.Logf("critical %d/%d, sheddable %d/%d", admitted[Critical], asked[Critical], admitted[Sheddable], asked[Sheddable])
		if crit < 0.99 {
			t.Fatalf("critical goodput %.3f, want >= 0.99", crit)
		}
		if shed > 0.5 {
			t.Fatalf("sheddable admitted %.3f at 3x: not shed first", shed)
		}
		if s := c.Stats(); s.Inflight != 0 {
			t.Fatalf("inflight %d at the end", s.Inflight)
		}
	})
}

// TestUnknownPriorityIsAnError: a priority outside the four classes is
// the caller's mistake, never silently another class.
func TestUnknownPriorityIsAnError(t *testing.T) {
	c, _, _ := newTest(t, []Rule{{Name: "inflight", Algorithm: Concurrency, Limit: 4}})
	if _, _, err := c.Decide(context.Background(), Attempt{Priority: CriticalPlus + 1}); err == nil {
		t.Fatal("no error for an unknown priority")
	}
	if Critical.String() != "critical" || Sheddable.String() != "sheddable" || Priority(9).String() != "Priority(9)" {
		t.Fatal("names")
	}
}

// TestCriticalWorkSurvivesOverloadOnAnAdaptiveRule: the same for an
// Adaptive rule, whose waiters wait in its Limiter's queue.
func TestCriticalWorkSurvivesOverloadOnAnAdaptiveRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		alg, err := adaptive.NewAIMD(adaptive.WithInitialLimit(4), adaptive.WithLimits(4, 4))
		if err != nil {
			t.Fatal(err)
		}
		lim, err := adaptive.NewLimiter(alg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := New([]Rule{{Name: "adaptive", Algorithm: Adaptive, Limiter: lim, MaxWait: 50 * time.Millisecond}}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rng := rand.New(rand.NewPCG(1, 2))
		var mu sync.Mutex
		asked, admitted := map[Priority]int{}, map[Priority]int{}
		var wg sync.WaitGroup
		for range 1200 { // 1 s at 1200/s against 4 x 10 ms: 3x
			p := Sheddable
			if rng.Float64() < 0.3 {
				p = Critical
			}
			wg.Go(func() {
				d, tok, err := c.Decide(context.Background(), Attempt{Priority: p})
				mu.Lock()
				asked[p]++
				if err == nil && d.Allowed {
					admitted[p]++
				}
				mu.Unlock()
				if err == nil && d.Allowed {
					time.Sleep(10 * time.Millisecond)
					tok.Done(Success)
				}
			})
			time.Sleep(time.Second / 1200)
		}
		wg.Wait()
		t.Logf("critical %d/%d, sheddable %d/%d", admitted[Critical], asked[Critical], admitted[Sheddable], asked[Sheddable])
		if crit := float64(admitted[Critical]) / float64(asked[Critical]); crit < 0.99 {
			t.Fatalf("critical goodput %.3f, want >= 0.99", crit)
		}
	})
}
