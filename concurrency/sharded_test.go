package concurrency

import (
	"math/rand/v2"
	"testing"
)

// TestShardOfSpreadsAdjacentStacks: any shards/4 goroutines on adjacent
// 2 KiB stacks (goroutines started together often get such stacks) land on
// distinct shards, for every shard count, wherever the run starts. The hash
// it replaced put the four 2 KiB stacks of an 8 KiB block on one shard.
func TestShardOfSpreadsAdjacentStacks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for shards := 4; shards <= 1<<16; shards *= 2 {
		run := shards / 4
		mask := uint64(shards - 1)
		seen := make(map[uint64]uintptr, run)
		for range 20 {
			base := uintptr(rng.Uint64N(1<<46)) &^ (2<<10 - 1)
			clear(seen)
			for i := range run {
				sp := base + uintptr(i)<<11 + 2<<10 - 200 // near the top of its stack
				s := shardOf(sp, mask)
				if other, ok := seen[s]; ok {
					t.Fatalf("%d shards: stacks at %#x and %#x, %d apart in a run of %d, both on shard %d",
						shards, other, sp, (sp-other)>>11, run, s)
				}
				seen[s] = sp
			}
		}
	}
}

// TestShardedSemaphoreRoundTripStaysOnOneShard: a goroutine's TryAcquire and
// Release from one frame meet on one shard, so a steady stream of round
// trips never touches the pool after the first. Tried at four stack depths;
// a depth whose two calls straddle a 2 KiB boundary of the stack splits
// them (a few in a thousand depths), so three of four must stay.
func TestShardedSemaphoreRoundTripStaysOnOneShard(t *testing.T) {
	const limit, rounds = 1 << 20, 1000
	stayed := 0
	for d := range 4 {
		s, _ := NewShardedSemaphore(limit, WithShardCount(8))
		atDepth(d, func() {
			for range rounds {
				if !s.TryAcquire(1) {
					t.Fatal("rejected below the limit")
				}
				s.Release(1)
			}
		})
		if p := s.pool.Load(); p >= limit-1 {
			stayed++
		} else {
			t.Logf("depth %d: the pool lent %d units, the round trips were split", d, limit-p)
		}
	}
	if stayed < 3 {
		t.Fatalf("round trips stayed on one shard at %d of 4 depths", stayed)
	}
}
