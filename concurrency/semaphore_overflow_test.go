package concurrency

import (
	"math"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// TestAcquireHugeCostNeverWrapsInflight: a cost the limit can never grant is
// refused, and it leaves inflight as it was, even when the sum would not fit
// an int64.
func TestAcquireHugeCostNeverWrapsInflight(t *testing.T) {
	for _, limit := range []int64{1, 10, MaxSemaphoreLimit - 1, MaxSemaphoreLimit} {
		s, _ := NewSemaphore(limit)
		if !s.TryAcquire(1) {
			t.Fatalf("limit %d: the first unit was refused", limit)
		}
		for _, n := range []int64{math.MaxInt64, math.MaxInt64 - 1, 1 << 62, MaxSemaphoreLimit + 1, limit} {
			fits := n <= limit-1
			if got := s.TryAcquire(n); got != fits {
				t.Errorf("limit %d, 1 held: TryAcquire(%d) = %v, want %v; inflight %d", limit, n, got, fits, s.Inflight())
			}
			if fits {
				s.Release(n)
			}
			if got := s.Inflight(); got != 1 {
				t.Fatalf("limit %d: TryAcquire(%d) left inflight at %d, want 1", limit, n, got)
			}
		}
		if limit > 1 && !s.TryAcquire(1) {
			t.Errorf("limit %d: a unit that fits was refused after the huge ones", limit)
		}
	}
}

// TestSemaphoreHugeCostsNeverOverAdmit is a property: whatever mix of tiny
// and huge costs is tried, inflight never goes negative and never exceeds
// the limit, and it always equals the units granted and not released.
func TestSemaphoreHugeCostsNeverOverAdmit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.OneOf(rapid.Int64Range(1, 100), rapid.Int64Range(1, MaxSemaphoreLimit)).Draw(t, "limit")
		s, _ := NewSemaphore(limit)
		var held []int64
		var sum int64
		t.Repeat(map[string]func(*rapid.T){
			"acquire": func(t *rapid.T) {
				n := rapid.OneOf(rapid.Int64Range(1, 10), rapid.Int64Range(1, math.MaxInt64),
					rapid.Int64Range(math.MaxInt64-10, math.MaxInt64)).Draw(t, "n")
				want := n <= limit-sum
				if got := s.TryAcquire(n); got != want {
					t.Fatalf("TryAcquire(%d) with %d of %d held = %v, want %v", n, sum, limit, got, want)
				}
				if want {
					held, sum = append(held, n), sum+n
				}
			},
			"release": func(t *rapid.T) {
				if len(held) == 0 {
					t.Skip("nothing held")
				}
				i := rapid.IntRange(0, len(held)-1).Draw(t, "i")
				s.Release(held[i])
				sum -= held[i]
				held = append(held[:i], held[i+1:]...)
			},
			"": func(t *rapid.T) {
				if got := s.Inflight(); got != sum || got < 0 || got > limit {
					t.Fatalf("inflight %d, want %d within [0, %d]", got, sum, limit)
				}
				if got := s.Available(); got != limit-sum {
					t.Fatalf("available %d, want %d", got, limit-sum)
				}
			},
		})
	})
}

// TestSemaphoreLimitAboveMaximumIsAnError: limits above MaxSemaphoreLimit
// are refused by the constructors and SetLimit, the maximum itself is
// accepted, and a failed SetLimit keeps the limit.
func TestSemaphoreLimitAboveMaximumIsAnError(t *testing.T) {
	for _, limit := range []int64{MaxSemaphoreLimit + 1, math.MaxInt64} {
		if _, err := NewSemaphore(limit); err == nil {
			t.Errorf("NewSemaphore(%d) returned no error", limit)
		}
		if _, err := NewShardedSemaphore(limit); err == nil {
			t.Errorf("NewShardedSemaphore(%d) returned no error", limit)
		}
	}
	s, err := NewSemaphore(MaxSemaphoreLimit)
	if err != nil {
		t.Fatalf("NewSemaphore(MaxSemaphoreLimit): %v", err)
	}
	ss, err := NewShardedSemaphore(MaxSemaphoreLimit, WithShardCount(4))
	if err != nil {
		t.Fatalf("NewShardedSemaphore(MaxSemaphoreLimit): %v", err)
	}
	if err := s.SetLimit(MaxSemaphoreLimit + 1); err == nil || s.Limit() != MaxSemaphoreLimit {
		t.Errorf("Semaphore.SetLimit above the maximum: err %v, limit %d", err, s.Limit())
	}
	if err := ss.SetLimit(math.MaxInt64); err == nil || ss.Limit() != MaxSemaphoreLimit {
		t.Errorf("ShardedSemaphore.SetLimit above the maximum: err %v, limit %d", err, ss.Limit())
	}
	if !s.TryAcquire(MaxSemaphoreLimit) || !ss.TryAcquire(MaxSemaphoreLimit) {
		t.Error("the whole maximum limit was refused")
	}
}

// TestShardedAcquireHugeCostNeverAdmits: concurrent huge requests on a
// ShardedSemaphore never admit (the optimistic subtraction of two of them
// from one shard would wrap the shard's count back to a positive value), and
// all the units are there afterwards.
func TestShardedAcquireHugeCostNeverAdmits(t *testing.T) {
	s, _ := NewShardedSemaphore(8, WithShardCount(1))
	const workers, rounds = 8, 50000
	var wg sync.WaitGroup
	var admitted [workers]int
	for w := range workers {
		wg.Go(func() {
			for range rounds {
				if s.TryAcquire(math.MaxInt64) {
					admitted[w]++
				}
			}
		})
	}
	wg.Wait()
	for w, a := range admitted {
		if a != 0 {
			t.Errorf("worker %d: %d huge requests admitted", w, a)
		}
	}
	if got := s.Inflight(); got != 0 {
		t.Errorf("inflight %d after refused requests, want 0", got)
	}
	if !s.TryAcquire(8) {
		t.Error("the whole limit was refused after the huge requests")
	}
}
