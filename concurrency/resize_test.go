package concurrency

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

const day = 24 * time.Hour

func TestFixedWindowWithLimitRaisedKeepsCount(t *testing.T) {
	f0, err := NewFixedWindow(3, day)
	if err != nil {
		t.Fatal(err)
	}
	f := f0.Widened()
	var s FixedWindowState
	now := int64(5 * day)
	for i := range 3 {
		if d := f.AllowN(&s, now+int64(i), 1); !d.Allowed() {
			t.Fatalf("admission %d of 3 rejected: %+v", i+1, d)
		}
	}
	g, err := f.WithLimit(4)
	if err != nil {
		t.Fatal(err)
	}
	if d := g.AllowN(&s, now+10, 0); d.Remaining != 1 || d.Limit != 4 {
		t.Fatalf("3 used, raised to 4: %+v, want 1 remaining of 4", d)
	}
	if d := g.AllowN(&s, now+11, 1); !d.Allowed() || d.Remaining != 0 {
		t.Fatalf("the one more: %+v", d)
	}
	if d := g.AllowN(&s, now+12, 1); d.Allowed() {
		t.Fatalf("a fifth in the window was admitted: %+v", d)
	}
	next := int64(6 * day)
	for i := range 4 {
		if d := g.AllowN(&s, next+int64(i), 1); !d.Allowed() {
			t.Fatalf("next window, admission %d of 4 rejected: %+v", i+1, d)
		}
	}
}

func TestFixedWindowWithLimitLoweredAdmitsNothingWhileOver(t *testing.T) {
	f0, _ := NewFixedWindow(10, time.Minute)
	f := f0.Widened()
	var s FixedWindowState
	now := int64(time.Hour)
	if d := f.AllowN(&s, now, 8); !d.Allowed() {
		t.Fatal(d)
	}
	g, err := f.WithLimit(5)
	if err != nil {
		t.Fatal(err)
	}
	d := g.AllowN(&s, now+1, 1)
	if d.Allowed() || d.Remaining != 0 || d.RetryAfter != time.Minute-1 {
		t.Fatalf("8 counted, lowered to 5: %+v, want a rejection with 0 remaining until the window ends", d)
	}
	if d := g.AllowN(&s, now+2, 0); d.Remaining != 0 {
		t.Fatalf("peek over the lowered limit: Remaining %d, want 0", d.Remaining)
	}
}

func TestSlidingWindowWithLimitKeepsCounts(t *testing.T) {
	sw0, _ := NewSlidingWindow(10, time.Minute)
	sw := sw0.Widened()
	var s SlidingWindowState
	start := int64(time.Hour) // a window boundary
	if d := sw.AllowN(&s, start, 10); !d.Allowed() {
		t.Fatal(d)
	}
	// Half-way through the next window the previous one weighs 5.
	mid := start + int64(time.Minute) + int64(30*time.Second)
	lower, err := sw.WithLimit(5)
	if err != nil {
		t.Fatal(err)
	}
	if d := lower.AllowN(&s, mid, 1); d.Allowed() || d.Remaining != 0 {
		t.Fatalf("weight 5 under a limit of 5: %+v, want a rejection", d)
	}
	raise, err := sw.WithLimit(7)
	if err != nil {
		t.Fatal(err)
	}
	if d := raise.AllowN(&s, mid, 2); !d.Allowed() || d.Remaining != 0 {
		t.Fatalf("weight 5 under a limit of 7, cost 2: %+v, want admitted with 0 left", d)
	}
	if d := raise.AllowN(&s, mid, 1); d.Allowed() {
		t.Fatalf("over the raised limit: %+v", d)
	}
}

func TestWithLimitBeyondStateFormatIsAnError(t *testing.T) {
	f, _ := NewFixedWindow(3, 1024) // 2 count bits, no room left beside the index
	if _, err := f.WithLimit(4); err == nil || !strings.HasPrefix(err.Error(), "concurrency: ") {
		t.Fatalf("fixed: WithLimit past the count field: %v", err)
	}
	if g, err := f.WithLimit(2); err != nil || g.Limit() != 2 {
		t.Fatalf("fixed: WithLimit within the field: %v", err)
	}
	sw, _ := NewSlidingWindow(3, 1<<20)
	if _, err := sw.Widened().WithLimit(sw.Widened().MaxLimit() + 1); err == nil || !strings.HasPrefix(err.Error(), "concurrency: ") {
		t.Fatalf("sliding: WithLimit past the count field: %v", err)
	}
	for _, bad := range []int64{0, -1} {
		if _, err := f.WithLimit(bad); err == nil {
			t.Fatalf("fixed: WithLimit(%d) accepted", bad)
		}
		if _, err := sw.WithLimit(bad); err == nil {
			t.Fatalf("sliding: WithLimit(%d) accepted", bad)
		}
	}
}

func TestWidenedFitsSaneLimits(t *testing.T) {
	for _, c := range []struct {
		window time.Duration
		fixed  int64 // at least this MaxLimit
		slide  int64
	}{
		{time.Millisecond, 1 << 19, 1 << 9},
		{time.Second, 1 << 29, 1 << 14},
		{time.Minute, 1 << 35, 1 << 17},
		{day, 1 << 46, 1 << 22},
	} {
		f, _ := NewFixedWindow(1, c.window)
		sw, _ := NewSlidingWindow(1, c.window)
		if got := f.Widened().MaxLimit(); got < c.fixed {
			t.Errorf("fixed window %v: MaxLimit %d, want at least %d", c.window, got, c.fixed)
		}
		if got := sw.Widened().MaxLimit(); got < c.slide {
			t.Errorf("sliding window %v: MaxLimit %d, want at least %d", c.window, got, c.slide)
		}
	}
}

// TestWidenedWithLimitMatchesModel checks widened window counters whose
// limit changes between requests against the reference models, with the
// model's limit changed in place (its counts kept).
func TestWidenedWithLimitMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		window := time.Duration(rapid.Int64Range(1, 1000).Draw(t, "window")) * time.Millisecond
		limit := rapid.Int64Range(1, 20).Draw(t, "limit")
		f0, _ := NewFixedWindow(limit, window)
		sw0, _ := NewSlidingWindow(limit, window)
		f, sw := f0.Widened(), sw0.Widened()
		fm := newFixedModel(limit, window).(*fixedModel)
		sm := newSlidingModel(limit, window).(*slidingModel)
		var fs FixedWindowState
		var ss SlidingWindowState
		now := rapid.Int64Range(0, 1<<40).Draw(t, "start")
		for i := range rapid.IntRange(1, 60).Draw(t, "steps") {
			now += rapid.Int64Range(0, int64(window)).Draw(t, "dt")
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0: // change the limit
				limit = rapid.Int64Range(1, 20).Draw(t, "new limit")
				var err error
				if f, err = f.WithLimit(limit); err != nil {
					t.Fatal(err)
				}
				if sw, err = sw.WithLimit(limit); err != nil {
					t.Fatal(err)
				}
				fm.limit, sm.limit = limit, limit
			case 1:
				n := rapid.Int64Range(0, 3).Draw(t, "refund")
				f.Refund(&fs, now, n)
				fm.refund(now, n)
				sw.Refund(&ss, now, n)
				sm.refund(now, n)
			default:
				n := rapid.Int64Range(0, 4).Draw(t, "n")
				want := fm.allowN(now, n)
				want.Remaining = max(0, want.Remaining)
				if got := f.AllowN(&fs, now, n); got != want {
					t.Fatalf("step %d: fixed AllowN(%d, %d) = %+v, model %+v", i, now, n, got, want)
				}
				want = sm.allowN(now, n)
				if got := sw.AllowN(&ss, now, n); got != want {
					t.Fatalf("step %d: sliding AllowN(%d, %d) = %+v, model %+v", i, now, n, got, want)
				}
			}
		}
	})
}
