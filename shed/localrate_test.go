package shed

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
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
		cal, ok := rate.(*calendarRate)
		if !ok {
			t.Fatalf("limit %d: a %T, not a calendarRate", tc.limit, rate)
		}
		if _, sharded := cal.rate.(*shardedRate); sharded != tc.sharded {
			t.Errorf("limit %d: sharded %v, want %v", tc.limit, sharded, tc.sharded)
		}
	}
}

// TestGlobalTokenBucketShardsALargeBurst: a Global TokenBucket rule whose
// burst gives every shard 64 tokens decides on a ShardedBucket; a smaller
// one keeps the single bucket, with its exact Remaining.
func TestGlobalTokenBucketShardsALargeBurst(t *testing.T) {
	for _, tc := range []struct {
		burst   int64
		sharded bool
	}{{100, false}, {1 << 30, true}} {
		c, _, _ := newTest(t, []Rule{{Name: "cap", Algorithm: TokenBucket, Limit: tc.burst, Rate: ratelimit.Per(1, time.Millisecond)}})
		rate := c.set.Load().rules[0].rate
		if _, sharded := rate.(*shardedBucketRate); sharded != tc.sharded {
			t.Errorf("burst %d: a %T, sharded %v, want %v", tc.burst, rate, sharded, tc.sharded)
		}
		// A few requests of a large burst are far from its soft limit:
		// Remaining must speak for the whole bucket, not one shard.
		for range 3 {
			if d := decide(t, c, Attempt{}); !d.Allowed || d.Warning || d.Remaining < tc.burst*3/4 {
				t.Fatalf("burst %d: %+v", tc.burst, d)
			}
		}
	}
}

// TestShardedGlobalCapIsExactUnderParallelDecisions: many goroutines
// deciding at once on a sharded Global rule (a fixed window, a token bucket
// that does not refill during the test) admit exactly its limit, and a
// later rule's rejection gives the charge back (all or nothing), so the
// limit is still reached exactly.
func TestShardedGlobalCapIsExactUnderParallelDecisions(t *testing.T) {
	for _, capRule := range []Rule{
		{Name: "cap", Algorithm: FixedWindow, Limit: 500, Window: time.Hour},
		{Name: "cap", Algorithm: TokenBucket, Limit: 1000, Rate: ratelimit.Per(1, 24*time.Hour)},
	} {
		t.Run(capRule.Algorithm.String(), func(t *testing.T) { shardedCapIsExact(t, capRule) })
	}
}

func shardedCapIsExact(t *testing.T, capRule Rule) {
	limit := capRule.Limit
	const workers = 8
	tries := int(limit) * 2 / workers
	c, _, _ := newTest(t, []Rule{
		capRule,
		// Every third attempt is rejected after the cap charged it.
		{Name: "gate", Category: "gated", Algorithm: Concurrency, Limit: 1},
	})
	hold, _, err := c.Decide(context.Background(), Attempt{Category: "gated", Now: int64(time.Hour)})
	if err != nil || !hold.Allowed {
		t.Fatalf("the gate's one permit: %+v, %v", hold, err)
	}
	switch r := c.set.Load().rules[0].rate.(type) {
	case *shardedBucketRate:
	case *calendarRate:
		if _, ok := r.rate.(*shardedRate); !ok {
			t.Fatalf("the cap decides on a %T", r.rate)
		}
	default:
		t.Fatalf("the cap decides on a %T", r)
	}
	var admitted, gated atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range tries {
				// One now for all: with now values arriving out of order, a
				// bucket can admit less than its limit (a take at a later now
				// moves a shard's full point forward, and a refund at an
				// earlier one cannot move it back), never more; the exact
				// count is what this test holds.
				a := Attempt{Now: int64(time.Hour)}
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
	c, _, clk := newTest(t, rules(10))
	now := clk.now() // Reload reads the Controller's clock
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

// TestReloadCarriesTheDebtOfAShardedTokenBucket: a Global TokenBucket rule
// keeps the tokens it owes across Reloads that change its burst, between
// sharded bursts and to one too small to shard and back.
func TestReloadCarriesTheDebtOfAShardedTokenBucket(t *testing.T) {
	perDay := ratelimit.Per(1, 24*time.Hour) // no refill during the test
	rules := func(burst int64) []Rule {
		return []Rule{{Name: "cap", Algorithm: TokenBucket, Limit: burst, Rate: perDay}}
	}
	c, _, clk := newTest(t, rules(1000))
	now := clk.now() // Reload reads the Controller's clock
	for range 600 {
		if d := decideAt(t, c, Attempt{Now: now}); !d.Allowed {
			t.Fatalf("the first 600 of 1000: %+v", d)
		}
	}
	available := func() int64 {
		switch r := c.set.Load().rules[0].rate.(type) {
		case *shardedBucketRate:
			return r.b.Available(now)
		default:
			return r.AllowN(now, 0).Remaining
		}
	}
	for _, step := range []struct{ burst, want int64 }{
		{1200, 600}, // 600 owed carry over
		{100, 0},    // one bucket: the debt beyond its burst is forgiven
		{1000, 900}, // sharded again: owes the 100 of the single bucket
	} {
		if err := c.Reload(Config{Rules: rules(step.burst)}); err != nil {
			t.Fatal(err)
		}
		if got := available(); got != step.want {
			t.Fatalf("burst %d: %d tokens available, want %d", step.burst, got, step.want)
		}
	}
}
