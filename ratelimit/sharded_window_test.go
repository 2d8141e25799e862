package ratelimit

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestNewShardedWindowRejectsBadInput(t *testing.T) {
	cases := []struct {
		limit  int64
		window time.Duration
		opts   []ShardedOption
	}{
		{0, time.Second, nil},
		{-1, time.Second, nil},
		{1 << 31, time.Second, nil},
		{10, 0, nil},
		{10, -time.Second, nil},
		{10, MinWindow - 1, nil},
		{10, time.Second, []ShardedOption{WithShardCount(6)}},
	}
	for _, c := range cases {
		if _, err := NewShardedWindow(c.limit, c.window, c.opts...); err == nil {
			t.Errorf("NewShardedWindow(%d, %v, %d opts): no error", c.limit, c.window, len(c.opts))
		}
	}
	sw, err := NewShardedWindow(1<<31-1, MinWindow)
	if err != nil || sw.Limit() != 1<<31-1 || sw.Window() != MinWindow {
		t.Fatalf("largest limit refused: %v", err)
	}
}

func TestShardedWindowBasics(t *testing.T) {
	const sec = int64(time.Second)
	for _, shards := range []int{1, 8} {
		sw, _ := NewShardedWindow(3, time.Second, WithShardCount(shards))
		for i := range 3 {
			if d := sw.AllowN(100, 1); !d.Allowed() || d.Limit != 3 || d.ResetAfter != time.Duration(sec-100) {
				t.Fatalf("request %d: %+v", i, d)
			}
		}
		d := sw.AllowN(200, 1)
		if d.Allowed() || d.Reason() != ReasonLimited || d.RetryAfter != time.Duration(sec-200) || d.Remaining != 0 {
			t.Fatalf("4th request: %+v", d)
		}
		if d := sw.AllowN(sec-1, 1); d.Allowed() {
			t.Fatal("admitted 1 ns before RetryAfter")
		}
		if d := sw.AllowN(200, 0); !d.Allowed() || d.Remaining != 0 {
			t.Fatalf("n=0 must be an allowed no-op: %+v", d)
		}
		if d := sw.AllowN(sec, 3); !d.Allowed() || d.Remaining != 0 {
			t.Fatalf("new window at RetryAfter: %+v", d)
		}
		if d := sw.AllowN(sec-5, 1); d.Allowed() || d.RetryAfter != time.Duration(sec+5) {
			t.Fatalf("a late caller must be charged to the current window: %+v", d)
		}
		if d := sw.AllowN(5*sec, 4); d.Allowed() || d.Reason() != ReasonExceedsCapacity || d.RetryAfter != Never {
			t.Fatalf("n > limit: %+v", d)
		}
		if d := sw.AllowN(5*sec, -3); !d.Allowed() || d.Remaining != 3 {
			t.Fatalf("negative n must charge nothing: %+v", d)
		}
	}
	sw, _ := NewShardedWindow(5, time.Second)
	if d := sw.Allow(); !d.Allowed() || d.Remaining != 4 {
		t.Fatalf("Allow on a fresh window: %+v", d)
	}
}

// TestShardedWindowStartingGun: 50 goroutines released together against a
// fresh limit of 10 in one window: exactly 10 are admitted.
func TestShardedWindowStartingGun(t *testing.T) {
	for _, shards := range []int{1, 8, 64} {
		for range 20 {
			sw, _ := NewShardedWindow(10, time.Second, WithShardCount(shards))
			var admitted atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 50 {
				wg.Go(func() {
					<-start
					if sw.AllowN(42, 1).Allowed() {
						admitted.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			if admitted.Load() != 10 {
				t.Fatalf("%d shards: admitted %d, want exactly 10", shards, admitted.Load())
			}
		}
	}
}

// TestShardedWindowNeverOverAdmits: goroutines share a virtual clock that
// ticks on every call and crosses many windows; the units admitted into
// each window (the one ResetAfter points at) never exceed the limit.
func TestShardedWindowNeverOverAdmits(t *testing.T) {
	// The clock ticks 500 ns a call against 1 ms windows (MinWindow): 2,000
	// calls a window, as 1 ns ticks made against 2 µs ones.
	const limit, window, windows, workers, tick = 200, int64(MinWindow), 60, 8, int64(MinWindow) / 2000
	for _, shards := range []int{1, 4, 64} {
		sw, err := NewShardedWindow(limit, time.Duration(window), WithShardCount(shards))
		if err != nil {
			t.Fatal(err)
		}
		var clock atomic.Int64
		var counts [windows + 2]atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				n := int64(w%3 + 1)
				for {
					now := clock.Add(tick)
					if now >= windows*window {
						return
					}
					if d := sw.AllowN(now, n); d.Allowed() {
						counts[(now+int64(d.ResetAfter))/window-1].Add(n)
					}
				}
			})
		}
		wg.Wait()
		var total int64
		for i := range counts {
			c := counts[i].Load()
			if c > limit {
				t.Fatalf("%d shards: window %d admitted %d units, limit %d", shards, i, c, limit)
			}
			total += c
		}
		t.Logf("%d shards: %d units admitted over %d windows (at most %d)", shards, total, windows, limit*windows)
	}
}

// TestShardedWindowModel runs random sequences of AllowN with time moving
// forward, standing still or going back against an exact fixed-window
// model. From one goroutine the sharded window must match it exactly; its
// Remaining is a lower bound, exact with one shard.
func TestShardedWindowModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.Int64Range(1, 30).Draw(rt, "limit")
		const window = int64(MinWindow)
		shards := 1 << rapid.IntRange(0, 4).Draw(rt, "shardbits")
		sw, err := NewShardedWindow(limit, time.Duration(window), WithShardCount(shards))
		if err != nil {
			rt.Fatal(err)
		}
		now := rapid.Int64Range(0, 10*window).Draw(rt, "start")
		cur, used := int64(-1), int64(0)
		rt.Repeat(map[string]func(*rapid.T){
			"allow": func(rt *rapid.T) {
				n := rapid.Int64Range(-1, limit+2).Draw(rt, "n")
				var d Decision
				atDepth(rapid.IntRange(0, 8).Draw(rt, "depth"), func() { d = sw.AllowN(now, n) })
				if n > limit {
					if d.Allowed() || d.Reason() != ReasonExceedsCapacity || d.RetryAfter != Never {
						rt.Fatalf("n=%d > limit: %+v", n, d)
					}
					return
				}
				if w := now / window; w > cur {
					cur, used = w, 0
				}
				want := n <= 0 || used+n <= limit
				if want && n > 0 {
					used += n
				}
				if d.Allowed() != want {
					rt.Fatalf("AllowN(%d, %d) window %d used %d: %+v", now, n, cur, used, d)
				}
				next := time.Duration((cur+1)*window - now)
				if d.ResetAfter != next || (!want && d.RetryAfter != next) || (want && d.RetryAfter != 0) {
					rt.Fatalf("AllowN(%d, %d): %+v, next window in %v", now, n, d, next)
				}
				if d.Remaining > limit-used || (shards == 1 && d.Remaining != limit-used) {
					rt.Fatalf("Remaining %d, model %d", d.Remaining, limit-used)
				}
			},
			"refund": func(rt *rapid.T) {
				// Units admitted in the window of now come back; a refund
				// in any other window gives nothing.
				// (Refund trusts its caller: nothing is refunded in the
				// current window that it did not admit.)
				inCur := now/window == cur
				if inCur && used == 0 {
					return
				}
				n := rapid.Int64Range(1, limit).Draw(rt, "refund")
				if inCur {
					n = rapid.Int64Range(1, used).Draw(rt, "refund-cur")
					used -= n
				}
				atDepth(rapid.IntRange(0, 8).Draw(rt, "depth"), func() { sw.Refund(now, n) })
			},
			"advance": func(rt *rapid.T) {
				now += rapid.Int64Range(0, 2*window).Draw(rt, "dt")
			},
			"back": func(rt *rapid.T) {
				now = max(0, now-rapid.Int64Range(0, window).Draw(rt, "back"))
			},
		})
	})
}

// TestShardedWindowNeverOverAdmitsWithRefunds: goroutines on a shared
// virtual clock admit and give back about a third of what they got, in the
// window they got it; what each window holds net (admitted minus refunded)
// never exceeds the limit, and refunds are admitted again.
func TestShardedWindowNeverOverAdmitsWithRefunds(t *testing.T) {
	const limit, window, windows, workers, tick = 200, int64(MinWindow), 40, 8, int64(MinWindow) / 2000
	for _, shards := range []int{1, 4, 64} {
		sw, err := NewShardedWindow(limit, time.Duration(window), WithShardCount(shards))
		if err != nil {
			t.Fatal(err)
		}
		var clock atomic.Int64
		var net, gross [windows + 2]atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				n := int64(w%3 + 1)
				for i := 0; ; i++ {
					now := clock.Add(tick)
					if now >= windows*window {
						return
					}
					d := sw.AllowN(now, n)
					if !d.Allowed() {
						continue
					}
					at := (now+int64(d.ResetAfter))/window - 1
					// Counted before the refund, so that net never shows
					// less than the window holds.
					net[at].Add(n)
					gross[at].Add(n)
					if i%3 == 0 && at == now/window {
						net[at].Add(-n)
						sw.Refund(now, n)
					}
				}
			})
		}
		wg.Wait()
		var over int64
		for i := range net {
			if c := net[i].Load(); c > limit {
				t.Fatalf("%d shards: window %d holds %d units net, limit %d", shards, i, c, limit)
			}
			over = max(over, gross[i].Load())
		}
		if over <= limit {
			t.Errorf("%d shards: no window admitted more than its limit gross (%d): refunds were never admitted again", shards, over)
		}
	}
}

func TestShardedWindowRefundBasics(t *testing.T) {
	sw, err := NewShardedWindow(3, time.Second, WithShardCount(4))
	if err != nil {
		t.Fatal(err)
	}
	now := int64(10 * time.Second)
	for range 3 {
		if !sw.AllowN(now, 1).Allowed() {
			t.Fatal("rejected below the limit")
		}
	}
	if sw.AllowN(now, 1).Allowed() {
		t.Fatal("admitted above the limit")
	}
	sw.Refund(now, 2)
	if !sw.AllowN(now, 2).Allowed() || sw.AllowN(now, 1).Allowed() {
		t.Fatal("the refunded units were not admitted again exactly")
	}
	sw.Refund(now+int64(time.Second), 2) // the next window is not open: nothing
	next := now + int64(time.Second)
	if !sw.AllowN(next, 3).Allowed() || sw.AllowN(next, 1).Allowed() {
		t.Fatal("a refund before its window opened changed it")
	}
	sw.Refund(now, 3) // the old window has passed: nothing
	if sw.AllowN(next, 1).Allowed() {
		t.Fatal("a refund in a past window was admitted in the current one")
	}
	sw.Refund(next, 0)
	defer func() {
		if recover() == nil {
			t.Error("a negative refund did not panic")
		}
	}()
	sw.Refund(next, -1)
}

// TestShardedWindowRefundIsSeenFromEveryShard: units given back are in
// the Remaining of the next decision whichever shard it is decided on, not
// only on the refunding caller's (whose shard depends on its stack depth):
// on a window of few units, where no shard caches a batch, what two
// callers are told does not depend on where each one runs.
func TestShardedWindowRefundIsSeenFromEveryShard(t *testing.T) {
	for _, limit := range []int64{1, 4, 1000} {
		sw, err := NewShardedWindow(limit, time.Second, WithShardCount(8))
		if err != nil {
			t.Fatal(err)
		}
		now := int64(10 * time.Second)
		if !sw.AllowN(now, 1).Allowed() {
			t.Fatal("rejected below the limit")
		}
		tag := uint32(windowIndex(now, sw.window))
		before := make([]int64, len(sw.shards))
		for j := range sw.shards {
			before[j] = sw.remaining(&sw.shards[j], tag)
		}
		sw.Refund(now, 1)
		for j := range sw.shards {
			if got := sw.remaining(&sw.shards[j], tag); got != before[j]+1 {
				t.Fatalf("limit %d: shard %d sees %d left after the refund, want %d", limit, j, got, before[j]+1)
			}
		}
	}
}

// TestShardedWindowFailedGatherIsSeenFromEveryShard: a weighted request
// that gathered units and did not find enough gives them back where every
// caller's Remaining counts them, not to its own shard alone.
func TestShardedWindowFailedGatherIsSeenFromEveryShard(t *testing.T) {
	sw, err := NewShardedWindow(4, time.Second, WithShardCount(8))
	if err != nil {
		t.Fatal(err)
	}
	now := int64(10 * time.Second)
	if !sw.AllowN(now, 3).Allowed() {
		t.Fatal("rejected below the limit")
	}
	if sw.AllowN(now, 2).Allowed() {
		t.Fatal("admitted above the limit")
	}
	tag := uint32(windowIndex(now, sw.window))
	for j := range sw.shards {
		if got := sw.remaining(&sw.shards[j], tag); got != 1 {
			t.Fatalf("shard %d sees %d left after the failed request, want 1", j, got)
		}
	}
}

func TestShardedWindowDoesNotAllocate(t *testing.T) {
	sw, _ := NewShardedWindow(1<<30, time.Hour)
	if a := testing.AllocsPerRun(1000, func() { sw.AllowN(1, 1) }); a != 0 {
		t.Fatalf("AllowN allocates %v per run", a)
	}
}

// TestShardedWindowIdleGap: window indexes are kept modulo 2^32 in the
// words; after long idle gaps (here of 2^30 windows and more, of 1 ms) the
// next caller must still get a fresh window, not be taken for a late
// caller of the old one.
func TestShardedWindowIdleGap(t *testing.T) {
	const w = int64(MinWindow)
	sw, err := NewShardedWindow(2, MinWindow, WithShardCount(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int64{0, 3 << 30, 3<<30 + 1<<32, 3<<30 + 1<<33 + 1<<31} {
		now := 5 + k*w
		if d := sw.AllowN(now, 2); !d.Allowed() {
			t.Fatalf("fresh window at %d refused: %+v", now, d)
		}
		if d := sw.AllowN(now, 1); d.Allowed() {
			t.Fatalf("window at %d admitted more than its limit", now)
		}
	}
}

// TestShardedWindowLongWindowNeverWrapsResetAfter: a window so long that the
// end of the current one is past MaxInt64 is refused like every rate
// window above 2^59 ns; at the longest accepted one, ResetAfter at the
// latest supported now is still the exact, positive time to the window's
// end.
func TestShardedWindowLongWindowNeverWrapsResetAfter(t *testing.T) {
	for _, w := range []time.Duration{1 << 62, 1<<59 + 1, time.Duration(math.MaxInt64)} {
		if _, err := NewShardedWindow(10, w); err == nil {
			t.Errorf("NewShardedWindow(10, %v): no error", w)
		}
	}
	const longest = time.Duration(1 << 59)
	sw, err := NewShardedWindow(10, longest)
	if err != nil {
		t.Fatalf("NewShardedWindow(10, 2^59 ns): %v", err)
	}
	now := int64(1<<62 + 1<<61 - 1) // the latest now the rate primitives support
	d := sw.AllowN(now, 1)
	want := time.Duration((now/int64(longest)+1)*int64(longest) - now)
	if !d.Allowed() || d.ResetAfter != want || d.ResetAfter <= 0 {
		t.Errorf("AllowN at %d: %+v, want allowed with ResetAfter %v", now, d, want)
	}
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

// TestShardedWindowAllowNShardCachesInTheNamedShard: a caller that names
// its shard spends and caches the window's units there, the name taken
// modulo the shard count: another shard's Remaining does not count them
// (a lower bound), the named one's does.
func TestShardedWindowAllowNShardCachesInTheNamedShard(t *testing.T) {
	sw, err := NewShardedWindow(1000, time.Second, WithShardCount(4))
	if err != nil {
		t.Fatal(err)
	}
	if d := sw.AllowNShard(6, 1, 1); !d.Allowed() { // shard 2
		t.Fatalf("%+v", d)
	}
	mine, other := sw.AllowNShard(2, 1, 0).Remaining, sw.AllowNShard(1, 1, 0).Remaining
	if mine != 999 || other >= mine {
		t.Fatalf("Remaining from the named shard %d (want 999), from another %d (want less)", mine, other)
	}
}
