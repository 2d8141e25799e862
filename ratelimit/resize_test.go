package ratelimit

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
	// 21 count bits beside the 43 of the index of a 2^20 ns window: no room
	// left for a count of 2^21.
	f, err := NewFixedWindow(1<<21-1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WithLimit(1 << 21); err == nil || !strings.HasPrefix(err.Error(), "ratelimit: ") {
		t.Fatalf("fixed: WithLimit past the count field: %v", err)
	}
	if g, err := f.WithLimit(2); err != nil || g.Limit() != 2 {
		t.Fatalf("fixed: WithLimit within the field: %v", err)
	}
	sw, _ := NewSlidingWindow(3, 1<<20)
	if _, err := sw.Widened().WithLimit(sw.Widened().MaxLimit() + 1); err == nil || !strings.HasPrefix(err.Error(), "ratelimit: ") {
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

// TestSlidingLogLoweredLimitKeepsAdmissions is the login rule lowered from
// 20 to 5 attempts a minute: 20 made in the last 20 s leave none, until all
// but 4 of them are a minute old.
func TestSlidingLogLoweredLimitKeepsAdmissions(t *testing.T) {
	l20, _ := NewSlidingLog(20, time.Minute)
	l5, _ := NewSlidingLog(5, time.Minute)
	var s SlidingLogState
	t0 := int64(time.Hour)
	for i := range int64(20) {
		if d := l20.AllowN(&s, t0+i*int64(time.Second), 1); !d.Allowed() {
			t.Fatalf("attempt %d of 20: %+v", i+1, d)
		}
	}
	now := t0 + 20*int64(time.Second)
	d := l5.AllowN(&s, now, 1)
	// Attempt 16 (at t0+15s) is the oldest of the 4 that may stay.
	wantAt := t0 + 15*int64(time.Second) + int64(time.Minute)
	if d.Allowed() || d.Remaining != 0 || d.RetryAfter != time.Duration(wantAt-now) {
		t.Fatalf("20 in the window, lowered to 5: %+v, want a rejection until %v", d, time.Duration(wantAt-now))
	}
	if d := l5.AllowN(&s, wantAt-1, 1); d.Allowed() {
		t.Fatalf("admitted with 5 in the window: %+v", d)
	}
	if d := l5.AllowN(&s, wantAt, 1); !d.Allowed() || d.Remaining != 0 {
		t.Fatalf("4 in the window: %+v, want admitted with none left", d)
	}
	if d := l5.AllowN(&s, wantAt, 1); d.Allowed() {
		t.Fatalf("a sixth: %+v", d)
	}
}

func TestSlidingLogRaisedLimitKeepsAdmissions(t *testing.T) {
	l3, _ := NewSlidingLog(3, day)
	l4, _ := NewSlidingLog(4, day)
	var s SlidingLogState
	now := int64(10 * day)
	if d := l3.AllowN(&s, now, 3); !d.Allowed() {
		t.Fatal(d)
	}
	if d := l4.AllowN(&s, now+1, 0); d.Remaining != 1 || d.Limit != 4 {
		t.Fatalf("3 used, raised to 4: %+v, want 1 left", d)
	}
	if d := l4.AllowN(&s, now+2, 1); !d.Allowed() {
		t.Fatalf("the one more: %+v", d)
	}
	if d := l4.AllowN(&s, now+3, 1); d.Allowed() || d.RetryAfter != time.Duration(day-3) {
		t.Fatalf("a fifth: %+v, want a rejection until the first 3 are a day old", d)
	}
	// Back to 3: four in the window, none until the first three are a day
	// old; then one counts, and two fit.
	if d := l3.AllowN(&s, now+int64(day)-1, 1); d.Allowed() || d.RetryAfter != 1 {
		t.Fatalf("lowered back to 3: %+v, want RetryAfter 1ns", d)
	}
	if d := l3.AllowN(&s, now+int64(day), 1); !d.Allowed() || d.Remaining != 1 {
		t.Fatalf("one in the window of 3: %+v, want admitted with 1 left", d)
	}
}

// logRecord is one admission of a log whose limit changes: its time, the
// limit of the SlidingLog that admitted it, and whether it was refunded.
type logRecord struct {
	at, limit int64
	refunded  bool
}

// checkLogBound checks the guarantee of a log whose limit changes: in every
// interval of length window, the admissions not refunded number at most the
// limit under which the latest of them (in admission order) was admitted.
func checkLogBound(recs []logRecord, window int64) string {
	for _, end := range recs {
		var in, latest int
		latest = -1
		for i, r := range recs {
			if !r.refunded && r.at > end.at-window && r.at <= end.at {
				in++
				latest = i
			}
		}
		if latest >= 0 && int64(in) > recs[latest].limit {
			return fmt.Sprintf("%d admissions in (%d, %d], the latest under a limit of %d: %+v",
				in, end.at-window, end.at, recs[latest].limit, recs)
		}
	}
	return ""
}

// TestSlidingLogChangingLimitNeverOverAdmits: with the limit changing between
// decisions, refunds, and the clock moving both ways, no interval of length
// window holds more admissions than the limit of the latest of them.
func TestSlidingLogChangingLimitNeverOverAdmits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		window := int64(MinWindow) + rapid.Int64Range(0, 400).Draw(t, "window")
		logs := map[int64]*SlidingLog{}
		logOf := func(limit int64) *SlidingLog {
			if logs[limit] == nil {
				logs[limit], _ = NewSlidingLog(limit, time.Duration(window))
			}
			return logs[limit]
		}
		limit := rapid.Int64Range(1, 6).Draw(t, "limit")
		var s SlidingLogState
		var recs []logRecord
		// The model of which admissions Refund can mark: those of the ring
		// in use, of ringN slots, numbered from unrefundable on.
		var ringN int64
		unrefundable := 0
		now := int64(1000)
		rebuild := func() {
			if ringN != 0 && ringN != limit {
				ringN, unrefundable = limit, len(recs)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"allow": func(t *rapid.T) {
				n := rapid.Int64Range(0, limit+1).Draw(t, "n")
				if n >= 1 && n <= limit && ringN == 0 {
					ringN = limit
				}
				rebuild()
				d := logOf(limit).AllowN(&s, now, n)
				if n > 0 && d.Allowed() {
					for range n {
						recs = append(recs, logRecord{at: now, limit: limit})
					}
				}
			},
			"limit": func(t *rapid.T) { limit = rapid.Int64Range(1, 6).Draw(t, "new limit") },
			"refund": func(t *rapid.T) {
				n := rapid.Int64Range(1, limit).Draw(t, "n")
				logOf(limit).Refund(&s, now, n)
				for c := max(unrefundable, len(recs)-int(ringN)); c < len(recs) && n > 0; c++ {
					if r := &recs[c]; !r.refunded && r.at+window > now {
						r.refunded = true
						n--
					}
				}
			},
			"advance": func(t *rapid.T) { now += rapid.Int64Range(0, window).Draw(t, "dt") },
			"back":    func(t *rapid.T) { now -= rapid.Int64Range(0, min(now, window)).Draw(t, "dt") },
			"": func(t *rapid.T) {
				if err := checkLogBound(recs, window); err != "" {
					t.Fatal(err)
				}
			},
		})
	})
}

// TestSlidingLogChangingLimitHammer races decisions of two limits on one
// state (each first decision of the other limit rebuilds the ring) under
// -race: at one instant, with a window longer than the test, no more than
// the larger limit is ever admitted, and once only the smaller is used, no
// more than it.
func TestSlidingLogChangingLimitHammer(t *testing.T) {
	small, _ := NewSlidingLog(3, time.Hour)
	large, _ := NewSlidingLog(6, time.Hour)
	for round := range 200 {
		var (
			s     SlidingLogState
			wg    sync.WaitGroup
			total atomic.Int64
		)
		for g := range 4 {
			wg.Go(func() {
				for i := range 20 {
					l := small
					if (g+i)%2 == 0 {
						l = large
					}
					if l.AllowN(&s, 1000, 1).Allowed() {
						total.Add(1)
					}
					l.AllowN(&s, 1000, 0)
				}
			})
		}
		wg.Wait()
		got := total.Load()
		if got > 6 {
			t.Fatalf("round %d: %d admitted at one instant, the limit never above 6", round, got)
		}
		more := int64(0)
		for range 10 {
			if small.AllowN(&s, 1000, 1).Allowed() {
				more++
			}
		}
		if got+more > max(3, got) {
			t.Fatalf("round %d: %d admitted, then %d more under the limit of 3", round, got, more)
		}
	}
}

// TestSlidingLogChangingLimitHammerSpread races decisions of two limits at
// increasing instants spread over several windows and checks every window.
func TestSlidingLogChangingLimitHammerSpread(t *testing.T) {
	const window = MinWindow
	small, _ := NewSlidingLog(2, window)
	large, _ := NewSlidingLog(5, window)
	for round := range 50 {
		var (
			s     SlidingLogState
			wg    sync.WaitGroup
			clock atomic.Int64
			mu    sync.Mutex
			recs  []logRecord
		)
		for g := range 4 {
			wg.Go(func() {
				for i := range 100 {
					l := small
					if (g+i/7)%2 == 0 {
						l = large
					}
					now := clock.Add(int64(window) / 50) // 400 decisions over 8 windows
					if l.AllowN(&s, now, 1).Allowed() {
						mu.Lock()
						recs = append(recs, logRecord{at: now, limit: 5})
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if err := checkLogBound(recs, int64(window)); err != "" {
			t.Fatalf("round %d: %s", round, err)
		}
	}
}
