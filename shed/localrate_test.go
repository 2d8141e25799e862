package shed

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGlobalFixedWindowSpreadsItsQuotaOverShards: a Global FixedWindow
// rule whose limit a ShardedWindow holds decides on one, so that parallel
// requests do not all write one word; a larger limit keeps the single word.
func TestGlobalFixedWindowSpreadsItsQuotaOverShards(t *testing.T) {
	for _, tc := range []struct {
		limit   int64
		sharded bool
	}{{10, true}, {math.MaxInt32, true}, {math.MaxInt32 + 1, false}} {
		c, _, _ := newTest(t, []Rule{{Name: "cap", Algorithm: FixedWindow, Limit: tc.limit, Window: time.Hour}})
		rate := c.set.Load().rules[0].rate
		cal, ok := rate.(calendarRate)
		if !ok {
			t.Fatalf("limit %d: a %T, not a calendarRate", tc.limit, rate)
		}
		if _, sharded := cal.rate.(*shardedRate); sharded != tc.sharded {
			t.Errorf("limit %d: sharded %v, want %v", tc.limit, sharded, tc.sharded)
		}
	}
}

// TestShardedGlobalCapIsExactUnderParallelDecisions: many goroutines
// deciding at once on a sharded Global FixedWindow rule admit exactly its
// limit in one window, and a later rule's rejection gives the window's
// charge back (all or nothing), so the limit is still reached exactly.
func TestShardedGlobalCapIsExactUnderParallelDecisions(t *testing.T) {
	const limit, workers, tries = 500, 8, 200
	c, _, _ := newTest(t, []Rule{
		{Name: "cap", Algorithm: FixedWindow, Limit: limit, Window: time.Hour},
		// Every third attempt is rejected after the cap charged it.
		{Name: "gate", Category: "gated", Algorithm: Concurrency, Limit: 1},
	})
	hold, _, err := c.Decide(context.Background(), Attempt{Category: "gated", Now: int64(time.Hour)})
	if err != nil || !hold.Allowed {
		t.Fatalf("the gate's one permit: %+v, %v", hold, err)
	}
	var admitted, gated atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range tries {
				a := Attempt{Now: int64(time.Hour) + int64(i)}
				if (w+i)%3 == 0 {
					a.Category = "gated" // the gate is held: rejected after the cap
				}
				d, tok, err := c.Decide(context.Background(), a)
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case d.Allowed:
					admitted.Add(1)
					tok.DoneAt(a.Now, Success)
				case d.Rule == "gate":
					gated.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != limit-1 { // the held attempt took one
		t.Fatalf("admitted %d in the window (%d gated), want exactly %d", n, gated.Load(), limit-1)
	}
	if gated.Load() == 0 {
		t.Fatal("no attempt was rejected by the later rule: the refund path was not taken")
	}
}

// TestReloadCarriesUsageAcrossTheShardedWindowBound: a Global FixedWindow
// rule keeps what it counted when a Reload moves its limit past what a
// ShardedWindow holds and back, and when it lowers a sharded limit.
func TestReloadCarriesUsageAcrossTheShardedWindowBound(t *testing.T) {
	rules := func(limit int64) []Rule {
		return []Rule{{Name: "cap", Algorithm: FixedWindow, Limit: limit, Window: 24 * time.Hour}}
	}
	now := int64(time.Hour)
	c, _, _ := newTest(t, rules(10))
	for range 6 {
		if d := decideAt(t, c, Attempt{Now: now}); !d.Allowed {
			t.Fatalf("first 6 of 10: %+v", d)
		}
	}
	remaining := func() int64 {
		return c.set.Load().rules[0].rate.AllowN(now, 0).Remaining
	}
	if err := c.Reload(Config{Rules: rules(math.MaxInt32 + 10)}); err != nil {
		t.Fatal(err)
	}
	if r := remaining(); r != math.MaxInt32+4 {
		t.Fatalf("past the sharded bound: %d remaining, want %d", r, int64(math.MaxInt32+4))
	}
	if err := c.Reload(Config{Rules: rules(8)}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if d := decideAt(t, c, Attempt{Now: now}); !d.Allowed {
			t.Fatalf("back to 8 after 6: %+v", d)
		}
	}
	if d := decideAt(t, c, Attempt{Now: now}); d.Allowed {
		t.Fatal("back to 8 after 8: admitted (the usage was lost)")
	}
	if err := c.Reload(Config{Rules: rules(9)}); err != nil {
		t.Fatal(err)
	}
	if d := decideAt(t, c, Attempt{Now: now}); !d.Allowed {
		t.Fatalf("raised to 9 after 8: %+v", d)
	}
	if d := decideAt(t, c, Attempt{Now: now}); d.Allowed {
		t.Fatal("raised to 9 after 9: admitted")
	}
}
