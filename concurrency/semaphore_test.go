package concurrency

import (
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

func TestSemaphoreReleaseTooMuchPanics(t *testing.T) {
	s, _ := NewSemaphore(3)
	s.TryAcquire(1)
	mustPanic(t, "releasing more than held", func() { s.Release(2) })
	if s.Inflight() != 1 {
		t.Fatalf("a refused release changed inflight to %d", s.Inflight())
	}
	// A negative n panics too: TestBoundBasics checks it on every
	// implementation.
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
