package concurrency

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"
)

// inflightBound is the contract Semaphore and ShardedSemaphore share; the
// tests below run on both.
type inflightBound interface {
	TryAcquire(n int64) bool
	Release(n int64)
	SetLimit(limit int64) error
	Limit() int64
	Inflight() int64
	Available() int64
	OnCapacity(f func()) error
	OnCapacityWhile(waiting *atomic.Int64, f func()) error
}

var (
	_ inflightBound = (*Semaphore)(nil)
	_ inflightBound = (*ShardedSemaphore)(nil)
)

type boundImpl struct {
	name string
	new  func(limit int64) inflightBound
}

func boundImpls() []boundImpl {
	impls := []boundImpl{{"single", func(l int64) inflightBound {
		s, err := NewSemaphore(l)
		if err != nil {
			panic(err)
		}
		return s
	}}}
	for _, shards := range []int{1, 8, 64} {
		impls = append(impls, boundImpl{fmt.Sprintf("sharded%d", shards), func(l int64) inflightBound {
			s, err := NewShardedSemaphore(l, WithShardCount(shards))
			if err != nil {
				panic(err)
			}
			return s
		}})
	}
	return impls
}

// atDepth calls f d frames of 8 KiB deeper on the stack. pickShard hashes
// the stack address, so from one goroutine this reaches other shards: the
// model tests use it to spread units over shards and exercise stealing and
// gathering.
//
//go:noinline
func atDepth(d int, f func()) byte {
	var pad [8 << 10]byte
	pad[d%len(pad)] = byte(d)
	if d <= 0 {
		f()
		return pad[0]
	}
	return atDepth(d-1, f) + pad[(d*7)%len(pad)]
}

func TestNewShardedSemaphoreRejectsBadInput(t *testing.T) {
	for _, limit := range []int64{0, -1} {
		if _, err := NewShardedSemaphore(limit); err == nil {
			t.Errorf("limit %d: no error", limit)
		}
	}
	for _, n := range []int{-1, 3, 12, 1 << 17} {
		if _, err := NewShardedSemaphore(10, WithShardCount(n)); err == nil {
			t.Errorf("%d shards: no error", n)
		}
	}
	s, _ := NewShardedSemaphore(3)
	if s.SetLimit(0) == nil || s.SetLimit(-2) == nil || s.Limit() != 3 {
		t.Fatal("bad SetLimit accepted or changed the limit")
	}
}

func TestBoundBasics(t *testing.T) {
	for _, impl := range boundImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s := impl.new(3)
			if !s.TryAcquire(2) || !s.TryAcquire(1) || s.TryAcquire(1) || !s.TryAcquire(0) || s.TryAcquire(4) {
				t.Fatal("wrong admissions around the limit")
			}
			s.Release(2)
			if s.Inflight() != 1 || s.Available() != 2 {
				t.Fatalf("inflight=%d available=%d, want 1 and 2", s.Inflight(), s.Available())
			}
			if !s.TryAcquire(2) || s.TryAcquire(1) {
				t.Fatal("released units not admitted exactly")
			}
			s.Release(3)
			mustPanic(t, "Release(-1)", func() { s.Release(-1) })
			mustPanic(t, "TryAcquire(-1)", func() { s.TryAcquire(-1) })
		})
	}
}

func TestBoundShrinkDoesNotRevoke(t *testing.T) {
	for _, impl := range boundImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s := impl.new(10)
			for range 8 {
				s.TryAcquire(1)
			}
			if err := s.SetLimit(5); err != nil {
				t.Fatal(err)
			}
			if s.Inflight() != 8 || s.Available() != 0 || s.TryAcquire(1) {
				t.Fatalf("shrink revoked or admitted: inflight %d available %d", s.Inflight(), s.Available())
			}
			s.Release(1)
			s.Release(3)
			if !s.TryAcquire(1) || s.TryAcquire(1) {
				t.Fatal("after falling under the new limit, exactly one more unit should fit")
			}
			if err := s.SetLimit(7); err != nil {
				t.Fatal(err)
			}
			if !s.TryAcquire(2) || s.TryAcquire(1) {
				t.Fatal("growing did not add exactly two units")
			}
			s.Release(7)
			if s.Inflight() != 0 || s.Available() != 7 {
				t.Fatalf("quiet: inflight %d available %d", s.Inflight(), s.Available())
			}
		})
	}
}

func TestBoundOnCapacity(t *testing.T) {
	for _, impl := range boundImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s := impl.new(2)
			var calls atomic.Int64
			if err := s.OnCapacity(func() { calls.Add(1) }); err != nil {
				t.Fatal(err)
			}
			if err := s.OnCapacity(func() {}); err != ErrHookInUse {
				t.Fatalf("second hook: %v", err)
			}
			s.TryAcquire(2)
			s.Release(1)
			_ = s.SetLimit(1)
			_ = s.SetLimit(4)
			if calls.Load() != 2 {
				t.Fatalf("hook called %d times, want 2", calls.Load())
			}
			_ = s.OnCapacity(nil)
			s.Release(1)
			if calls.Load() != 2 {
				t.Fatal("removed hook still called")
			}
		})
	}
}

// TestBoundOnCapacityWhile: the gated hook runs only while its waiter count
// is not zero, and shares the one hook slot with OnCapacity.
func TestBoundOnCapacityWhile(t *testing.T) {
	for _, impl := range boundImpls() {
		t.Run(impl.name, func(t *testing.T) {
			s := impl.new(2)
			var waiting, calls atomic.Int64
			if err := s.OnCapacityWhile(&waiting, func() { calls.Add(1) }); err != nil {
				t.Fatal(err)
			}
			if s.OnCapacity(func() {}) != ErrHookInUse || s.OnCapacityWhile(&waiting, func() {}) != ErrHookInUse {
				t.Fatal("a second hook was accepted")
			}
			s.TryAcquire(2)
			s.Release(1)
			_ = s.SetLimit(3)
			if calls.Load() != 0 {
				t.Fatalf("hook called %d times with nobody waiting", calls.Load())
			}
			waiting.Store(1)
			s.Release(1)
			_ = s.SetLimit(2)
			_ = s.SetLimit(4)
			if calls.Load() != 2 {
				t.Fatalf("hook called %d times, want 2 (a release and an increase)", calls.Load())
			}
			if err := s.OnCapacityWhile(nil, nil); err != nil {
				t.Fatal(err)
			}
			s.TryAcquire(1)
			s.Release(1)
			if calls.Load() != 2 {
				t.Fatal("removed hook still called")
			}
			if err := s.OnCapacity(func() {}); err != nil {
				t.Fatalf("the slot is not free after removal: %v", err)
			}
		})
	}
}

// TestBoundStartingGun: 50 goroutines released together against a fresh
// limit of 10, each holding what it gets: exactly 10 are admitted.
func TestBoundStartingGun(t *testing.T) {
	for _, impl := range boundImpls() {
		t.Run(impl.name, func(t *testing.T) {
			for range 20 {
				s := impl.new(10)
				var admitted atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				for range 50 {
					wg.Go(func() {
						<-start
						if s.TryAcquire(1) {
							admitted.Add(1)
						}
					})
				}
				close(start)
				wg.Wait()
				if admitted.Load() != 10 {
					t.Fatalf("admitted %d, want exactly 10", admitted.Load())
				}
			}
		})
	}
}

// TestBoundHammer: 1,000 goroutines x 1,000 iterations on a limit of 10
// (100 iterations with -short). The observed inflight never exceeds the
// limit, every attempt is a success or a rejection, and the quiet
// semaphore holds nothing.
func TestBoundHammer(t *testing.T) {
	const limit, workers = 10, 1000
	iters := 1000
	if testing.Short() || tableRaceEnabled {
		iters = 100
	}
	for _, impl := range boundImpls()[1:] { // Semaphore has its own
		t.Run(impl.name, func(t *testing.T) {
			s := impl.new(limit)
			var observed, maxSeen, ok, rejected atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range workers {
				wg.Go(func() {
					<-start
					for range iters {
						if !s.TryAcquire(1) {
							rejected.Add(1)
							continue
						}
						ok.Add(1)
						v := observed.Add(1)
						for m := maxSeen.Load(); v > m && !maxSeen.CompareAndSwap(m, v); m = maxSeen.Load() {
						}
						observed.Add(-1)
						s.Release(1)
					}
				})
			}
			close(start)
			wg.Wait()
			if m := maxSeen.Load(); m > limit {
				t.Fatalf("observed %d inflight, limit %d", m, limit)
			}
			if got := ok.Load() + rejected.Load(); got != workers*int64(iters) {
				t.Fatalf("successes+rejections=%d, attempts=%d", got, workers*iters)
			}
			if s.Inflight() != 0 || s.Available() != limit {
				t.Fatalf("quiet: inflight %d available %d", s.Inflight(), s.Available())
			}
			t.Logf("%d admitted, %d rejected", ok.Load(), rejected.Load())
		})
	}
}

// TestShardedSemaphoreShrinkUnderLoad: weighted acquirers run while the
// limit swings between 12 and 4 (each shrink leaving a debt to pay off).
// Observed inflight never exceeds the largest limit, and once quiet the
// semaphore is whole again: nothing inflight, the full limit available.
func TestShardedSemaphoreShrinkUnderLoad(t *testing.T) {
	s, _ := NewShardedSemaphore(12, WithShardCount(8))
	var observed, maxSeen atomic.Int64
	var wg sync.WaitGroup
	var done atomic.Bool
	changer := make(chan struct{})
	go func() {
		defer close(changer)
		for i := 0; !done.Load(); i++ {
			_ = s.SetLimit(int64(4 + 8*(i%2)))
		}
		_ = s.SetLimit(12)
	}()
	for w := range 8 {
		wg.Go(func() {
			n := int64(w%3 + 1)
			for range 20000 {
				if !s.TryAcquire(n) {
					continue
				}
				v := observed.Add(n)
				for m := maxSeen.Load(); v > m && !maxSeen.CompareAndSwap(m, v); m = maxSeen.Load() {
				}
				observed.Add(-n)
				s.Release(n)
			}
		})
	}
	wg.Wait()
	done.Store(true)
	<-changer
	if maxSeen.Load() > 12 {
		t.Fatalf("observed %d inflight, limit at most 12", maxSeen.Load())
	}
	if s.Inflight() != 0 || s.Available() != s.Limit() {
		t.Fatalf("quiet: inflight %d available %d limit %d", s.Inflight(), s.Available(), s.Limit())
	}
}

// TestShardedSemaphoreModel runs random sequences of weighted acquires,
// releases and limit changes against a plain counter. Used from one
// goroutine the sharded semaphore must match it exactly, however its units
// are spread over the shards.
func TestShardedSemaphoreModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.Int64Range(1, 50).Draw(rt, "limit")
		shards := 1 << rapid.IntRange(0, 4).Draw(rt, "shardbits")
		s, err := NewShardedSemaphore(limit, WithShardCount(shards))
		if err != nil {
			rt.Fatal(err)
		}
		var held int64
		rt.Repeat(map[string]func(*rapid.T){
			"acquire": func(rt *rapid.T) {
				n := rapid.Int64Range(0, 20).Draw(rt, "n")
				want := n == 0 || held+n <= limit
				var got bool
				atDepth(rapid.IntRange(0, 8).Draw(rt, "depth"), func() { got = s.TryAcquire(n) })
				if got != want {
					rt.Fatalf("TryAcquire(%d) held=%d limit=%d: got %v", n, held, limit, got)
				}
				if want {
					held += n
				}
			},
			"release": func(rt *rapid.T) {
				if held == 0 {
					rt.Skip("nothing held")
				}
				n := rapid.Int64Range(1, held).Draw(rt, "n")
				atDepth(rapid.IntRange(0, 8).Draw(rt, "depth"), func() { s.Release(n) })
				held -= n
			},
			"setlimit": func(rt *rapid.T) {
				limit = rapid.Int64Range(1, 50).Draw(rt, "newlimit")
				if err := s.SetLimit(limit); err != nil {
					rt.Fatal(err)
				}
			},
			"": func(rt *rapid.T) {
				if s.Inflight() != held || s.Available() != max(0, limit-held) {
					rt.Fatalf("inflight %d available %d, model %d and %d", s.Inflight(), s.Available(), held, max(0, limit-held))
				}
			},
		})
	})
}

func TestShardedSemaphoreDoesNotAllocate(t *testing.T) {
	s, _ := NewShardedSemaphore(1000)
	if a := testing.AllocsPerRun(1000, func() {
		if s.TryAcquire(1) {
			s.Release(1)
		}
	}); a != 0 {
		t.Fatalf("TryAcquire+Release allocates %v per run", a)
	}
}

// TestShardedSemaphoreTinyCaches: a limit of 2 with one shard gives a
// high-water mark of 1, so nearly every Release spills over to the pool
// while other goroutines spend from the same cache. The observed inflight
// must never exceed the limit.
func TestShardedSemaphoreTinyCaches(t *testing.T) {
	iters := 50000
	if testing.Short() || tableRaceEnabled {
		iters = 5000
	}
	for _, shards := range []int{1, 2} {
		s, _ := NewShardedSemaphore(2, WithShardCount(shards))
		var observed, maxSeen atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range iters {
					if !s.TryAcquire(1) {
						continue
					}
					v := observed.Add(1)
					for m := maxSeen.Load(); v > m && !maxSeen.CompareAndSwap(m, v); m = maxSeen.Load() {
					}
					observed.Add(-1)
					s.Release(1)
				}
			})
		}
		wg.Wait()
		if maxSeen.Load() > 2 || s.Inflight() != 0 || s.Available() != 2 {
			t.Fatalf("%d shards: max inflight %d, quiet inflight %d available %d", shards, maxSeen.Load(), s.Inflight(), s.Available())
		}
	}
}

// TestShardedSemaphoreRoundTripOnGivenShardStaysInItsCache: acquires and
// releases that name one shard meet on its cache, whatever the stack depth
// of either, so that a round trip never goes to the pool once the cache
// holds units; units acquired on one shard and released on another are
// all still counted.
func TestShardedSemaphoreRoundTripOnGivenShardStaysInItsCache(t *testing.T) {
	s, err := NewShardedSemaphore(1024, WithShardCount(8))
	if err != nil {
		t.Fatal(err)
	}
	const i = 8 + 3 // taken modulo the shard count
	if !s.TryAcquireShard(i, 1) {
		t.Fatal("first acquire rejected")
	}
	s.ReleaseShard(i, 1)
	pool := s.pool.Load()
	for d := range 8 {
		if !acquireAtDepth(s, d, i) {
			t.Fatalf("depth %d: rejected", d)
		}
		s.ReleaseShard(i, 1)
		if got := s.pool.Load(); got != pool {
			t.Fatalf("depth %d: the pool went from %d to %d: the round trip left shard 3", d, pool, got)
		}
	}
	if got := s.shards[3].n.Load(); got != 1 {
		t.Fatalf("shard 3 caches %d units, want the 1 released there", got)
	}
	for j := range uint64(8) {
		if !s.TryAcquireShard(j, 100) {
			t.Fatalf("shard %d: 100 of 1024 free rejected", j)
		}
		s.ReleaseShard(j+1, 100)
	}
	if s.Inflight() != 0 || s.Available() != 1024 {
		t.Fatalf("inflight %d, available %d after every unit came back", s.Inflight(), s.Available())
	}
}

// acquireAtDepth calls s.TryAcquireShard(i, 1) depth frames of 1 KiB
// below the caller.
//
//go:noinline
func acquireAtDepth(s *ShardedSemaphore, depth int, i uint64) bool {
	var pad [1024]byte
	pad[depth] = byte(depth)
	if depth > 0 {
		return acquireAtDepth(s, depth-1, i) && pad[depth] == byte(depth)
	}
	return s.TryAcquireShard(i, 1)
}
