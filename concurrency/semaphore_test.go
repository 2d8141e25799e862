package concurrency

import (
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"
)

func TestNewSemaphoreRejectsBadLimits(t *testing.T) {
	for _, limit := range []int64{0, -1, -1 << 62} {
		if _, err := NewSemaphore(limit); err == nil {
			t.Errorf("NewSemaphore(%d) returned no error", limit)
		}
	}
	s, err := NewSemaphore(3)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetLimit(0); err == nil {
		t.Error("SetLimit(0) returned no error")
	}
	if s.Limit() != 3 {
		t.Errorf("failed SetLimit changed the limit to %d", s.Limit())
	}
}

func TestSemaphoreBasics(t *testing.T) {
	s, _ := NewSemaphore(3)
	if !s.TryAcquire(2) || !s.TryAcquire(1) {
		t.Fatal("could not fill the semaphore")
	}
	if s.TryAcquire(1) {
		t.Fatal("admitted past the limit")
	}
	if !s.TryAcquire(0) {
		t.Fatal("TryAcquire(0) must succeed as a no-op")
	}
	if s.TryAcquire(4) {
		t.Fatal("admitted more than the limit at once")
	}
	s.Release(2)
	if s.Inflight() != 1 || s.Available() != 2 {
		t.Fatalf("inflight=%d available=%d, want 1 and 2", s.Inflight(), s.Available())
	}
}

func TestSemaphoreReleaseTooMuchPanics(t *testing.T) {
	s, _ := NewSemaphore(3)
	s.TryAcquire(1)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("releasing more than held did not panic")
			}
		}()
		s.Release(2)
	}()
	if s.Inflight() != 1 {
		t.Fatalf("a refused release changed inflight to %d", s.Inflight())
	}
	for _, f := range []func(){func() { s.Release(-1) }, func() { s.TryAcquire(-1) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("negative n did not panic")
				}
			}()
			f()
		}()
	}
}

func TestSemaphoreShrinkDoesNotRevoke(t *testing.T) {
	s, _ := NewSemaphore(10)
	s.TryAcquire(8)
	if err := s.SetLimit(5); err != nil {
		t.Fatal(err)
	}
	if s.Inflight() != 8 {
		t.Fatalf("shrinking revoked permits: inflight %d", s.Inflight())
	}
	if s.TryAcquire(1) {
		t.Fatal("admitted while inflight is above the new limit")
	}
	s.Release(4)
	if !s.TryAcquire(1) || s.TryAcquire(1) {
		t.Fatal("after falling under the new limit, exactly one more unit should fit")
	}
}

func TestSemaphoreOnCapacity(t *testing.T) {
	s, _ := NewSemaphore(2)
	var calls atomic.Int64
	if err := s.OnCapacity(func() { calls.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := s.OnCapacity(func() {}); err != ErrHookInUse {
		t.Fatalf("second hook: got %v, want ErrHookInUse", err)
	}
	s.TryAcquire(2)
	s.Release(1)
	_ = s.SetLimit(1) // shrinking frees nothing
	_ = s.SetLimit(4) // growing does
	if got := calls.Load(); got != 2 {
		t.Fatalf("hook called %d times, want 2", got)
	}
	_ = s.OnCapacity(nil)
	s.Release(1)
	if got := calls.Load(); got != 2 {
		t.Fatalf("removed hook still called (%d)", got)
	}
}

// TestSemaphoreHammer: 1,000 goroutines x 1,000 iterations on a limit of 10.
// The observed inflight never exceeds the limit and every attempt is
// accounted for as a success or a rejection.
func TestSemaphoreHammer(t *testing.T) {
	const limit, workers = 10, 1000
	iters := 1000
	if testing.Short() {
		iters = 100
	}
	s, _ := NewSemaphore(limit)
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
				for {
					m := maxSeen.Load()
					if v <= m || maxSeen.CompareAndSwap(m, v) {
						break
					}
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
	if s.Inflight() != 0 {
		t.Fatalf("quiet semaphore holds %d", s.Inflight())
	}
}

// TestSemaphoreStartingGun: 50 goroutines released together against a fresh
// limit of 10 and holding what they get: exactly 10 are admitted.
func TestSemaphoreStartingGun(t *testing.T) {
	s, _ := NewSemaphore(10)
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

// TestSemaphoreModel checks the semaphore against a plain model over random
// sequences of acquire, release and limit changes.
func TestSemaphoreModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Int64Range(1, 50).Draw(t, "limit")
		s, _ := NewSemaphore(limit)
		var held int64
		t.Repeat(map[string]func(*rapid.T){
			"acquire": func(t *rapid.T) {
				n := rapid.Int64Range(0, 60).Draw(t, "n")
				want := n == 0 || held+n <= limit
				if got := s.TryAcquire(n); got != want {
					t.Fatalf("TryAcquire(%d) with held=%d limit=%d: got %v", n, held, limit, got)
				}
				if want {
					held += n
				}
			},
			"release": func(t *rapid.T) {
				if held == 0 {
					t.Skip("nothing held")
				}
				n := rapid.Int64Range(1, held).Draw(t, "n")
				s.Release(n)
				held -= n
			},
			"setlimit": func(t *rapid.T) {
				limit = rapid.Int64Range(1, 50).Draw(t, "newlimit")
				if err := s.SetLimit(limit); err != nil {
					t.Fatal(err)
				}
			},
			"": func(t *rapid.T) {
				if s.Inflight() != held {
					t.Fatalf("inflight %d, model %d", s.Inflight(), held)
				}
				if want := max(0, limit-held); s.Available() != want {
					t.Fatalf("available %d, model %d", s.Available(), want)
				}
			},
		})
	})
}

func TestSemaphoreTryAcquireDoesNotAllocate(t *testing.T) {
	s, _ := NewSemaphore(10)
	if a := testing.AllocsPerRun(1000, func() {
		if s.TryAcquire(1) {
			s.Release(1)
		}
	}); a != 0 {
		t.Fatalf("TryAcquire+Release allocates %v per run", a)
	}
}
