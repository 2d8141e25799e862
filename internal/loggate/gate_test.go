package loggate

import (
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

const sec = int64(time.Second)

func TestOneLinePerIntervalReportsWhatItHeld(t *testing.T) {
	var g Gate
	now := int64(1_700_000_000) * sec
	if ok, held := g.Allow(now); !ok || held != 0 {
		t.Fatalf("first line: ok=%v held=%d, want true 0", ok, held)
	}
	for i := range 5 {
		if ok, _ := g.Allow(now + int64(i)*sec/10); ok {
			t.Fatalf("line %d within the interval was let through", i)
		}
	}
	if ok, held := g.Allow(now + sec); !ok || held != 5 {
		t.Fatalf("next interval: ok=%v held=%d, want true 5", ok, held)
	}
	if ok, held := g.Allow(now + 3*sec); !ok || held != 0 {
		t.Fatalf("after a quiet interval: ok=%v held=%d, want true 0", ok, held)
	}
}

func TestBurstLetsThatManyThroughPerInterval(t *testing.T) {
	g := Gate{Every: 2 * time.Second, Burst: 3}
	now := int64(42) * sec
	got := 0
	for i := range 10 {
		if ok, _ := g.Allow(now + int64(i)*sec/10); ok {
			got++
		}
	}
	if got != 3 {
		t.Fatalf("let %d through in one interval, want 3", got)
	}
	if ok, held := g.Allow(now + sec); ok || held != 0 {
		t.Fatalf("1 s into a 2 s interval: ok=%v held=%d, want false 0", ok, held)
	}
	if ok, held := g.Allow(now + 2*sec); !ok || held != 8 {
		t.Fatalf("next interval: ok=%v held=%d, want true 8", ok, held)
	}
}

func TestZeroNowIsAnInstantLikeAnyOther(t *testing.T) {
	var g Gate
	if ok, _ := g.Allow(0); !ok {
		t.Fatal("the first line at now 0 was held")
	}
	if ok, _ := g.Allow(1); ok {
		t.Fatal("a second line 1 ns later was let through")
	}
}

// TestConcurrentCallersNeverExceedTheBurstNorLoseACount races callers at
// instants of one interval and of the next: at most Burst lines per
// interval, and every call is either let through or reported as held by
// the first line of the next interval.
func TestConcurrentCallersNeverExceedTheBurstNorLoseACount(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		burst := rapid.Int64Range(1, 4).Draw(t, "burst")
		callers := rapid.IntRange(1, 16).Draw(t, "callers")
		g := Gate{Burst: burst}
		now := rapid.Int64Range(0, 1<<40).Draw(t, "now")
		var mu sync.Mutex
		let, held := int64(0), int64(0)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				ok, h := g.Allow(now + int64(i)) // all within one interval
				mu.Lock()
				if ok {
					let++
				}
				held += h
				mu.Unlock()
			})
		}
		wg.Wait()
		if let > burst {
			t.Fatalf("%d lines let through in one interval, burst %d", let, burst)
		}
		ok, h := g.Allow(now + 10*sec)
		if !ok {
			t.Fatal("the first line of a later interval was held")
		}
		if let+held+h != int64(callers) {
			t.Fatalf("let %d + reported held %d != %d calls", let, held+h, callers)
		}
	})
}

func BenchmarkAllowHeld(b *testing.B) {
	var g Gate
	g.Allow(1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		g.Allow(2 + int64(i&1023))
	}
}
