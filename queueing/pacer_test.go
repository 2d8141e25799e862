package queueing

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

func TestNewPacerRejects(t *testing.T) {
	for _, tc := range []struct {
		n   int64
		per time.Duration
	}{{0, time.Second}, {-1, time.Second}, {1, 0}, {10, 5}, {1 << 40, 1 << 40}} {
		if _, err := NewPacer(tc.n, tc.per); err == nil {
			t.Errorf("NewPacer(%d, %v) returned no error", tc.n, tc.per)
		}
	}
}

// Slots are exactly period/n apart with no drift, and any run of n slots
// spans exactly one period.
func TestPacerReserveAtSpacing(t *testing.T) {
	p, err := NewPacer(3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const t0 = int64(1) << 40
	want := []int64{0, 333_333_333, 666_666_666, 1_000_000_000, 1_333_333_333, 1_666_666_666, 2_000_000_000}
	for i, w := range want {
		if got := p.ReserveAt(t0) - t0; got != w {
			t.Fatalf("slot %d at +%d, want +%d", i, got, w)
		}
	}
	// No credit after idling: a long pause then a burst of callers still
	// gets evenly spaced slots starting at now.
	now := t0 + 10*int64(time.Second)
	if at := p.ReserveAt(now); at != now {
		t.Fatalf("after idling the first slot is at +%d, want now", at-now)
	}
	if at := p.ReserveAt(now); at != now+333_333_333 {
		t.Fatalf("second slot after idling at +%d: a burst", at-now)
	}
	if p.AllowAt(now) {
		t.Fatal("AllowAt took a future slot")
	}
	if !p.AllowAt(now + 666_666_666) {
		t.Fatal("AllowAt refused a due slot")
	}
}

// Concurrent Wait callers are released exactly one interval apart in fake
// time.
func TestPacerWaitExactInFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := NewPacer(100, time.Second) // every 10ms
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var at []int64
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if err := p.Wait(context.Background()); err != nil {
					t.Error(err)
				}
				mu.Lock()
				at = append(at, clock.Now())
				mu.Unlock()
			})
		}
		wg.Wait()
		seen := map[int64]int{}
		first := at[0]
		for _, v := range at {
			first = min(first, v)
		}
		for _, v := range at {
			d := v - first
			if d%int64(10*time.Millisecond) != 0 {
				t.Fatalf("release at +%v is off the 10ms grid", time.Duration(d))
			}
			seen[d]++
		}
		for d, n := range seen {
			if n != 1 {
				t.Fatalf("%d callers released together at +%v: a burst", n, time.Duration(d))
			}
		}
		if len(seen) != 50 {
			t.Fatalf("%d distinct slots for 50 callers", len(seen))
		}
	})
}

func TestPacerWaitRespectsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := NewPacer(1, time.Second)
		bg := context.Background()
		if err := p.Wait(bg); err != nil { // slot 0, now
			t.Fatal(err)
		}
		// The next slot is 1s away: a 500ms deadline is refused at once,
		// and takes no slot.
		ctx, cancel := context.WithTimeout(bg, 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := p.Wait(ctx); !errors.Is(err, ErrDeadline) || time.Since(start) != 0 {
			t.Fatalf("got %v after %v, want ErrDeadline at once", err, time.Since(start))
		}
		// A caller cancelled while waiting gives its slot back.
		ctx2, cancel2 := context.WithCancel(bg)
		done := make(chan error)
		go func() { done <- p.Wait(ctx2) }()
		time.Sleep(100 * time.Millisecond)
		cancel2()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Wait: %v", err)
		}
		start = time.Now()
		if err := p.Wait(bg); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 900*time.Millisecond {
			t.Fatalf("waited %v for the given-back slot at 1s, want 900ms", waited)
		}
		ctx3, cancel3 := context.WithCancel(bg)
		cancel3()
		if err := p.Wait(ctx3); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait on a done context: %v", err)
		}
	})
}
