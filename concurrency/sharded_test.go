package concurrency

import "testing"

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
