package shed

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestShardedGlobalBucketRefundNeverOverAdmits: a Global TokenBucket rule
// whose burst shards (ratelimit.ShardedBucket) gives what it charged back
// to the shard it took it from, whichever stack (and so shard) the refund
// is made from. Attempts decided at instants that go back and forth
// (callers whose clock reads arrive out of order) from stacks of random
// depth; some of those at the latest instant so far given back later, after
// attempts at earlier instants: by Rule.Count at Done, by a Recost down, or
// by a later rule's rejection. In every span the tokens admitted net of
// refunds never exceed the burst plus what the rate refills in it, as on
// one bucket. Refunds to the refunding caller's own shard broke it.
func TestShardedGlobalBucketRefundNeverOverAdmits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const interval = int64(time.Millisecond)
		// Shards of at least 64 tokens (the default count's floor): a
		// burst of k·64 to k·192 for k shards.
		probe, err := ratelimit.NewShardedBucket(ratelimit.Per(1, time.Duration(interval)), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		shards := int64(probe.Shards())
		burst := rapid.Int64Range(64*shards, 192*shards).Draw(t, "burst")
		c, err := New([]Rule{
			{Name: "cap", Algorithm: TokenBucket, Limit: burst, Rate: ratelimit.Per(1, time.Duration(interval)), Count: CountFailures},
			// A rule after it that rejects while the test holds its one
			// permit (gate), so that the cap's charge is rolled back.
			{Name: "gate", Category: "gated", Algorithm: Concurrency, Limit: 1},
		}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, ok := c.set.Load().rules[0].rate.(*shardedBucketRate); !ok {
			t.Fatalf("burst %d over %d shards: the cap is a %T, not sharded", burst, shards, c.set.Load().rules[0].rate)
		}
		ctx := context.Background()
		type held struct {
			at, n int64
			tok   Token
		}
		var (
			admitted []held // net of refunds
			open     []int  // indexes into admitted of tokens not done yet
			latest   int64  // the latest instant admitted at
		)
		base := int64(1 << 40)
		shardStep := interval * shards // a shard's refill
		decideAt := func(t *rapid.T, a Attempt) (Decision, Token) {
			var d Decision
			var tok Token
			atDepth(rapid.IntRange(0, 24).Draw(t, "decide depth"), func() {
				d, tok, err = c.Decide(ctx, a)
			})
			if err != nil {
				t.Fatal(err)
			}
			return d, tok
		}
		for range rapid.IntRange(1, 120).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 6).Draw(t, "op"); {
			case op <= 1 && len(open) > 0:
				// Done: a success does not count, a failure does. Only an
				// attempt at the latest instant is given back (a refund
				// at an earlier now frees a later admission's slot, on
				// one bucket as here).
				k := rapid.IntRange(0, len(open)-1).Draw(t, "which")
				h := &admitted[open[k]]
				status := http.StatusInternalServerError
				if h.at == latest && rapid.Bool().Draw(t, "refund") {
					status = http.StatusOK
				}
				if status == http.StatusOK && rapid.Bool().Draw(t, "recost first") {
					// Recost down to part of the charge, then the rest
					// at Done.
					part := rapid.Int64Range(0, h.n).Draw(t, "actual")
					atDepth(rapid.IntRange(0, 24).Draw(t, "recost depth"), func() {
						if err := h.tok.Recost(part); err != nil {
							t.Fatal(err)
						}
					})
				}
				atDepth(rapid.IntRange(0, 24).Draw(t, "done depth"), func() { h.tok.DoneStatus(status) })
				if status == http.StatusOK {
					h.n = 0
				}
				open = slices.Delete(open, k, k+1)
			case op == 2:
				// The gate held: the cap charges, the gate rejects, the
				// charge is rolled back, at the latest instant.
				if latest == 0 {
					continue
				}
				g, gtok := decideAt(t, Attempt{Category: "gated", Now: latest, Cost: 1})
				if !g.Allowed {
					continue
				}
				n := rapid.Int64Range(1, 192).Draw(t, "n")
				if d, tok := decideAt(t, Attempt{Category: "gated", Now: latest, Cost: n}); d.Allowed {
					tok.Done(Success)
					t.Fatalf("the gate admitted a second attempt: %+v", d)
				}
				gtok.DoneStatus(http.StatusInternalServerError)
				admitted = append(admitted, held{at: latest, n: 1})
			case op == 3:
				// Every shard drained at one instant: what a refund puts
				// in the wrong shard is then taken there once more.
				now := base + rapid.Int64Range(0, 3).Draw(t, "drain step")*shardStep
				n := rapid.Int64Range(1, 64).Draw(t, "drain n")
				for range burst + 1 {
					d, tok := decideAt(t, Attempt{Now: now, Cost: n})
					if !d.Allowed {
						break
					}
					tok.DoneStatus(http.StatusInternalServerError)
					latest = max(latest, now)
					admitted = append(admitted, held{at: now, n: n})
				}
			default:
				// Instants a few shard refills apart, so that admissions
				// at different ones meet.
				now := base + rapid.Int64Range(0, 3).Draw(t, "step")*shardStep
				n := rapid.Int64Range(1, 192).Draw(t, "n")
				d, tok := decideAt(t, Attempt{Now: now, Cost: n})
				if d.Allowed {
					latest = max(latest, now)
					admitted = append(admitted, held{at: now, n: n, tok: tok})
					open = append(open, len(admitted)-1)
				}
			}
		}
		for _, k := range open {
			admitted[k].tok.DoneStatus(http.StatusInternalServerError)
		}
		// The bound, over every span between two instants admitted at.
		at := map[int64]int64{}
		for _, h := range admitted {
			at[h.at] += h.n
		}
		for from := range at {
			for to := range at {
				if to < from {
					continue
				}
				var sum int64
				for t, n := range at {
					if t >= from && t <= to {
						sum += n
					}
				}
				if bound := burst + (to-from)/interval; sum > bound {
					t.Fatalf("%d tokens admitted net of refunds in [%d, %d] ns after the start, bound %d (burst %d over %d shards)",
						sum, from-base, to-base, bound, burst, shards)
				}
			}
		}
	})
}

// atDepth calls f from a frame depth frames of 256 bytes below this one,
// so that callers reach the sharded rules from different stacks (a
// goroutine's shard is picked from its stack address).
//
//go:noinline
func atDepth(depth int, f func()) {
	var pad [256]byte
	pad[depth%len(pad)] = byte(depth)
	if depth <= 0 {
		f()
		return
	}
	atDepth(depth-1, f)
	if pad[depth%len(pad)] != byte(depth) {
		panic("atDepth: the frame was overwritten")
	}
}
