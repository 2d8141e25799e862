package shed

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// shardedLimit returns the smallest limit of a Global Concurrency rule that
// decides on the sharded semaphore, skipping the test where none does (one
// P).
func shardedLimit(t testing.TB) int64 {
	t.Helper()
	from := shardedFrom()
	if from == 0 {
		t.Skipf("GOMAXPROCS %d: no Global Concurrency rule is sharded", runtime.GOMAXPROCS(0))
	}
	return from
}

// TestLargeGlobalConcurrencyRuleDecidesSharded: a Global Concurrency rule
// without a queue decides on the sharded semaphore from shardedFrom on;
// below it, or with a queue, on the single word.
func TestLargeGlobalConcurrencyRuleDecidesSharded(t *testing.T) {
	from := shardedLimit(t)
	for _, c := range []struct {
		rule    Rule
		sharded bool
	}{
		{Rule{Name: "big", Algorithm: Concurrency, Limit: from}, true},
		{Rule{Name: "big-dry", Algorithm: Concurrency, Limit: 1 << 20, DryRun: true}, true},
		{Rule{Name: "small", Algorithm: Concurrency, Limit: from - 1}, false},
		{Rule{Name: "queued", Algorithm: Concurrency, Limit: from, MaxWait: time.Second}, false},
	} {
		ctl, err := New([]Rule{c.rule}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		r := &ctl.set.Load().rules[0]
		if got := r.sem.sharded != nil; got != c.sharded || !r.sem.ok() {
			t.Errorf("%s (limit %d): sharded %v, want %v", c.rule.Name, c.rule.Limit, got, c.sharded)
		}
		_ = ctl.Close()
	}
}

// TestShardedConcurrencyRuleNeverHoldsMoreThanLimit: goroutines deciding
// at once, each holding several attempts of random cost, never hold more
// than a sharded rule's limit together, while a per-key rule after it
// rejects often (so its permits are given back by the rollback); once every
// token is done, the whole limit is free. Whether the goroutines overlap
// enough for the global rule to reject is the scheduler's call, so that
// its limit is reached is checked after them, by two clients that hold it
// whole.
func TestShardedConcurrencyRuleNeverHoldsMoreThanLimit(t *testing.T) {
	limit := shardedLimit(t)
	c, err := New([]Rule{
		{Name: "global", Algorithm: Concurrency, Limit: limit},
		{Name: "per-ip", Identity: IP, Algorithm: Concurrency, Limit: limit / 2, LeaseTTL: time.Hour, Capacity: 16},
	}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.set.Load().rules[0].sem.sharded == nil {
		t.Fatal("the global rule is not sharded")
	}
	const workers, each = 8, 1500
	var held, most, admitted, byGlobal, byKey atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			ip := netip.AddrFrom4([4]byte{192, 0, 2, byte(w % 3)})
			type live struct {
				tok  Token
				cost int64
			}
			var mine []live
			for range each {
				if len(mine) > 0 && (len(mine) > 4 || rng.IntN(2) == 0) {
					i := rng.IntN(len(mine))
					held.Add(-mine[i].cost)
					mine[i].tok.Done(Success)
					mine = append(mine[:i], mine[i+1:]...)
					continue
				}
				cost := 1 + rng.Int64N(limit/4)
				d, tok, err := c.Decide(context.Background(), Attempt{IP: ip, Cost: cost})
				if err != nil {
					t.Error(err)
					return
				}
				if !d.Allowed {
					if d.Rule == "global" {
						byGlobal.Add(1)
					} else {
						byKey.Add(1)
					}
					continue
				}
				admitted.Add(1)
				h := held.Add(cost)
				for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
				}
				mine = append(mine, live{tok, cost})
			}
			for _, l := range mine {
				held.Add(-l.cost)
				l.tok.Done(Success)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Fatalf("%d units held at once under a limit of %d", m, limit)
	}
	if admitted.Load() == 0 || byKey.Load() == 0 {
		t.Fatalf("admitted %d, rejected %d by the per-key rule: its limit was not reached", admitted.Load(), byKey.Load())
	}
	var whole []Token
	for _, last := range []byte{10, 11} { // limit/2 each: the per-key limit, the global one together
		d, tok, err := c.Decide(context.Background(), Attempt{IP: netip.AddrFrom4([4]byte{192, 0, 2, last}), Cost: limit / 2})
		if err != nil || !d.Allowed {
			t.Fatalf("half the limit from a fresh client: %+v, %v", d, err)
		}
		whole = append(whole, tok)
	}
	if d, _, err := c.Decide(context.Background(), Attempt{IP: netip.AddrFrom4([4]byte{192, 0, 2, 12})}); err != nil || d.Allowed || d.Rule != "global" {
		t.Fatalf("one more with the whole limit held: %+v, %v; want a rejection by the global rule", d, err)
	}
	for _, tok := range whole {
		tok.Done(Success)
	}
	s := c.Stats()
	if s.Inflight != 0 || s.Rules[0].Inflight != 0 {
		t.Fatalf("inflight %d, global rule %d after every token is done", s.Inflight, s.Rules[0].Inflight)
	}
	if got := c.set.Load().rules[0].sem.sharded.Available(); got != limit {
		t.Fatalf("%d of %d units free after every token is done", got, limit)
	}
	t.Logf("admitted %d, rejected %d by the global rule and %d by the per-key one, at most %d of %d held",
		admitted.Load(), byGlobal.Load(), byKey.Load(), most.Load(), limit)
}

// TestShardedPermitsComeBackOnGoexitAndCancel: a handler ending its
// goroutine (runtime.Goexit) and an attempt whose context ends while a
// later rule makes it wait both give a sharded rule's permits back.
func TestShardedPermitsComeBackOnGoexitAndCancel(t *testing.T) {
	limit := shardedLimit(t)
	synctest.Test(t, func(t *testing.T) {
		c, err := New([]Rule{
			{Name: "global", Algorithm: Concurrency, Limit: limit},
			{Name: "queued", Algorithm: Concurrency, Limit: limit / 2, MaxWait: time.Second},
		}, quiet(), WithCost(func(*http.Request) int64 { return limit / 2 }))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.set.Load().rules[0].sem.sharded == nil {
			t.Fatal("the global rule is not sharded")
		}
		h := goexitServer(c)
		goexits(h, 3)
		if w := send(h, "192.0.2.1"); w.Code != http.StatusOK {
			t.Fatalf("after 3 Goexits of half the limit: %d", w.Code)
		}
		// A quarter of the limit held: an attempt of half passes the
		// sharded rule, then waits for the queued rule's units until its
		// context ends, and gives the sharded rule's units back.
		q := limit / 4
		_, hold, err := c.Decide(context.Background(), Attempt{Cost: q})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		if _, _, err := c.Decide(ctx, Attempt{Cost: limit / 2}); err == nil {
			t.Fatal("an attempt over the queued rule's free units did not wait for its context")
		}
		if s := c.Stats(); s.Rules[0].Inflight != q || s.Rules[1].Inflight != q {
			t.Fatalf("after a cancelled wait: inflight %d and %d, want %d each", s.Rules[0].Inflight, s.Rules[1].Inflight, q)
		}
		hold.Done(Success)
		if s := c.Stats(); s.Inflight != 0 || s.Rules[0].Inflight != 0 || s.Rules[1].Inflight != 0 {
			t.Fatalf("%+v", s)
		}
	})
}
