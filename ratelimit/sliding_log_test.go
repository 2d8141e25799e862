package ratelimit

import (
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// logModel is the log without a ring, laps or concurrency: a slice of every
// admission. A request of n reuses the places of admissions h−limit..
// h+n−1−limit and is admitted when each of those no longer counts: a window
// after its time, or at its time once refunded.
type logModel struct {
	limit, window int64
	claims        []logClaim
}

type logClaim struct {
	at       int64
	refunded bool
}

func newLogModel(limit int64, window time.Duration) rateModel {
	return &logModel{limit: limit, window: int64(window)}
}

func (m *logModel) freeAt(c int64) int64 {
	switch {
	case c < 0:
		return 0
	case m.claims[c].refunded:
		return m.claims[c].at
	}
	return m.claims[c].at + m.window
}

func (m *logModel) report(now int64) Decision {
	d := Decision{Limit: m.limit}
	h := int64(len(m.claims))
	for c := h - m.limit; c < h && m.freeAt(c) <= now; c++ {
		d.Remaining++
	}
	for c := max(0, h-m.limit); c < h; c++ {
		d.ResetAfter = max(d.ResetAfter, time.Duration(m.freeAt(c)-now))
	}
	return d
}

func (m *logModel) allowN(now, n int64) Decision {
	d := m.report(now)
	h := int64(len(m.claims))
	switch {
	case n == 0:
	case n > m.limit:
		d.RetryAfter = Never
	default:
		var until int64
		for c := h - m.limit; c < h+n-m.limit; c++ {
			until = max(until, m.freeAt(c))
		}
		if until > now {
			d.RetryAfter = time.Duration(until - now)
			return d
		}
		for range n {
			m.claims = append(m.claims, logClaim{at: now})
		}
		d = m.report(now)
	}
	return d
}

func (m *logModel) refund(now, n int64) {
	h := int64(len(m.claims))
	for c := max(0, h-m.limit); c < h && n > 0; c++ {
		if cl := &m.claims[c]; !cl.refunded && cl.at <= now && cl.at+m.window > now {
			cl.refunded = true
			n--
		}
	}
}

func (m *logModel) recovered(now int64) bool {
	h := int64(len(m.claims))
	for c := max(0, h-m.limit); c < h; c++ {
		if m.freeAt(c) > now {
			return false
		}
	}
	return true
}

// TestSlidingLogIsTheSlidingWindow: with a clock that never goes backwards,
// the log admits exactly when the last window (now−W, now] holds at most
// limit−n admissions that were not refunded, and Remaining is what is left
// of the limit there.
func TestSlidingLogIsTheSlidingWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Int64Range(1, 10).Draw(t, "limit")
		window := int64(MinWindow) + rapid.Int64Range(0, 500).Draw(t, "window")
		l, err := NewSlidingLog(limit, time.Duration(window))
		if err != nil {
			t.Fatal(err)
		}
		var s SlidingLogState
		type event struct {
			at       int64
			refunded bool
		}
		var admitted []event
		now := int64(1000)
		counting := func() (k int64) {
			for _, e := range admitted {
				if !e.refunded && e.at > now-window {
					k++
				}
			}
			return k
		}
		t.Repeat(map[string]func(*rapid.T){
			"allow": func(t *rapid.T) {
				n := rapid.Int64Range(1, limit).Draw(t, "n")
				k := counting()
				d := l.AllowN(&s, now, n)
				if want := k+n <= limit; d.Allowed() != want {
					t.Fatalf("%d counting in the window, n=%d: allowed=%v", k, n, d.Allowed())
				}
				if d.Allowed() {
					for range n {
						admitted = append(admitted, event{at: now})
					}
					k += n
				}
				if d.Remaining != limit-k {
					t.Fatalf("remaining %d, window holds %d of %d", d.Remaining, k, limit)
				}
			},
			"refund": func(t *rapid.T) {
				n := rapid.Int64Range(1, limit).Draw(t, "n")
				l.Refund(&s, now, n)
				// The oldest admissions that still count are given back
				// (with this clock, all were made at now or before).
				for i := range admitted {
					if e := &admitted[i]; n > 0 && !e.refunded && e.at > now-window {
						e.refunded = true
						n--
					}
				}
			},
			"advance": func(t *rapid.T) { now += rapid.Int64Range(0, window).Draw(t, "dt") },
		})
	})
}

// TestSlidingLogPendingEntryIsRecent: a slot claimed but not yet published
// blocks the admission that would reuse it, and a decision meanwhile reports
// it as recent.
func TestSlidingLogPendingEntryIsRecent(t *testing.T) {
	const w = int64(MinWindow)
	l, err := NewSlidingLog(2, time.Duration(w))
	if err != nil {
		t.Fatal(err)
	}
	var s SlidingLogState
	l.AllowN(&s, 0, 2) // admissions 0 and 1 at t=0
	// Simulate admitters of numbers 2 and 3 that won the head CAS at 5
	// windows; number 3 has published its entry (slot 1), number 2 not yet
	// (slot 0).
	r := s.ring.Load()
	r.head.Store(4)
	r.slots[0].seq.Store(0)
	r.slots[1].ts.Store(5 * w)
	r.slots[1].seq.Store(2 << 1) // lap 1, published
	// Admission 4 would reuse slot 0, whose entry (number 2) is pending.
	if d := l.AllowN(&s, 100*w, 1); d.Allowed() || d.RetryAfter != time.Duration(w) {
		t.Fatalf("admitted over a pending entry: %+v", d)
	}
	if l.Recovered(&s, 100*w) {
		t.Fatal("a state with a pending entry reported recovered")
	}
	r.slots[0].ts.Store(5 * w)
	r.slots[0].seq.Store(2 << 1)
	if d := l.AllowN(&s, 100*w, 1); !d.Allowed() {
		t.Fatalf("rejected after the entry was published: %+v", d)
	}
}

// TestSlidingLogHammer: many goroutines on one key with the clock standing
// still admit exactly the limit, and the ring ends consistent.
func TestSlidingLogHammer(t *testing.T) {
	const limit = 7
	l, _ := NewSlidingLog(limit, time.Second)
	var s SlidingLogState
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 32 {
		wg.Go(func() {
			for range 50 {
				if l.AllowN(&s, 1<<40, 1).Allowed() {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if admitted != limit {
		t.Fatalf("admitted %d, want %d", admitted, limit)
	}
	if d := l.AllowN(&s, 1<<40+int64(time.Second), 0); d.Remaining != limit || !l.Recovered(&s, 1<<40+int64(time.Second)) {
		t.Fatalf("a window later the log is not recovered: %+v", d)
	}
}

// TestSlidingLogBoundWithRefunds: with refunds in the mix and the clock
// moving both ways, the admissions that were not refunded never exceed the
// limit in any window.
func TestSlidingLogBoundWithRefunds(t *testing.T) {
	impl := rateImpls()[3]
	if impl.name != "sliding_log" {
		t.Fatalf("harness order changed: %s", impl.name)
	}
	rapid.Check(t, func(t *rapid.T) {
		limit := rapid.Int64Range(1, 6).Draw(t, "limit")
		window := int64(MinWindow) + rapid.Int64Range(0, 400).Draw(t, "window")
		l, err := NewSlidingLog(limit, time.Duration(window))
		if err != nil {
			t.Fatal(err)
		}
		var s SlidingLogState
		var claims []logClaim // every admission in number order
		now := int64(1000)
		t.Repeat(map[string]func(*rapid.T){
			"allow": func(t *rapid.T) {
				n := rapid.Int64Range(1, limit).Draw(t, "n")
				if l.AllowN(&s, now, n).Allowed() {
					for range n {
						claims = append(claims, logClaim{at: now})
					}
				}
			},
			"refund": func(t *rapid.T) {
				n := rapid.Int64Range(1, limit).Draw(t, "n")
				l.Refund(&s, now, n)
				// Which admissions Refund marks: the oldest of the last limit
				// made at now or before, that still count at now.
				for c := max(0, len(claims)-int(limit)); c < len(claims) && n > 0; c++ {
					if cl := &claims[c]; !cl.refunded && cl.at <= now && cl.at+window > now {
						cl.refunded = true
						n--
					}
				}
			},
			"advance": func(t *rapid.T) { now += rapid.Int64Range(0, window).Draw(t, "dt") },
			"back":    func(t *rapid.T) { now -= rapid.Int64Range(0, min(now, window)).Draw(t, "dt") },
			"": func(t *rapid.T) {
				var kept []rateAdmission
				for _, c := range claims {
					if !c.refunded {
						kept = append(kept, rateAdmission{c.at, 1})
					}
				}
				if err := checkRateBound(impl, limit, window, kept); err != "" {
					t.Fatal(err)
				}
			},
		})
	})
}

func TestNewSlidingLogCapsTheLimit(t *testing.T) {
	if _, err := NewSlidingLog(MaxSlidingLogLimit, time.Second); err != nil {
		t.Fatalf("the largest supported limit is refused: %v", err)
	}
	if _, err := NewSlidingLog(MaxSlidingLogLimit+1, time.Second); err == nil {
		t.Fatal("a limit above MaxSlidingLogLimit is accepted")
	}
}

// TestSlidingLogKeyBytes: a key's log holds KeyBytes once it admitted,
// 16 bytes a slot.
func TestSlidingLogKeyBytes(t *testing.T) {
	l, err := NewSlidingLog(1000, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// TotalAlloc counts every goroutine's allocations (other tests' too):
	// the least of a few fresh keys' is this one's alone.
	got := int64(math.MaxInt64)
	for range 5 {
		var s SlidingLogState
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		l.AllowN(&s, int64(time.Second), 1)
		runtime.ReadMemStats(&b)
		got = min(got, int64(b.TotalAlloc-a.TotalAlloc))
	}
	if want := l.KeyBytes(); got < want || got > want+want/8+64 || want < 16*1000 {
		t.Errorf("a key's log allocated %d bytes, KeyBytes says %d", got, want)
	}
}
