package ratelimit

import (
	"testing"
	"time"
)

// fixedModel counts admissions per aligned window in a map and remembers the
// latest window it charged; a request in an earlier window is rejected.
type fixedModel struct {
	limit, window int64
	counts        map[int64]int64
	latest        int64
}

func newFixedModel(limit int64, window time.Duration) rateModel {
	return &fixedModel{limit: limit, window: int64(window), counts: map[int64]int64{}}
}

func (m *fixedModel) allowN(now, n int64) Decision {
	idx := now / m.window
	back := idx < m.latest
	if back {
		idx = m.latest
	}
	cnt := m.counts[idx]
	report := func(cnt int64) Decision {
		d := Decision{Limit: m.limit}
		if !back {
			d.Remaining = m.limit - cnt
		}
		switch {
		case cnt > 0:
			d.ResetAfter = time.Duration((idx+1)*m.window - now)
		case back:
			d.ResetAfter = time.Duration(idx*m.window - now)
		}
		return d
	}
	d := report(cnt)
	switch {
	case n == 0:
	case n > m.limit:
		d.RetryAfter = Never
	case back:
		d.RetryAfter = time.Duration((idx+1)*m.window - now)
		if cnt+n <= m.limit {
			d.RetryAfter = time.Duration(idx*m.window - now)
		}
	case cnt+n > m.limit:
		d.RetryAfter = time.Duration((idx+1)*m.window - now)
	default:
		m.counts[idx] += n
		m.latest = idx
		d = report(cnt + n)
	}
	return d
}

// refund gives back n admitted at now, to now's window only if it is
// the latest one counted.
func (m *fixedModel) refund(now, n int64) {
	if now/m.window == m.latest {
		m.counts[m.latest] -= min(n, m.counts[m.latest])
	}
}

func (m *fixedModel) recovered(now int64) bool {
	idx := now / m.window
	return idx > m.latest || (idx == m.latest && m.counts[idx] == 0)
}

// TestFixedWindowPacking checks the one-word layout limits: the window
// index for any int64 now must fit beside the count.
func TestFixedWindowPacking(t *testing.T) {
	checkPacking(t, "NewFixedWindow", func(limit int64, window time.Duration) error {
		_, err := NewFixedWindow(limit, window)
		return err
	}, []packing{
		{1, MinWindow, true},         // 1 bit of count, 63 of index
		{1023, MinWindow, true},      // 10 bits of count need only 2^9 ns
		{1023, MinWindow - 1, false}, // below the minimum, whatever the packing
		{1 << 20, 1 << 20, true},     // 21 bits need 2^20 ns (1.05 ms)
		{1 << 20, 1<<20 - 1, false},  // one short, although above MinWindow
		{1<<22 - 1, 1 << 21, true},   // 22 bits need 2^21 ns
		{1<<22 - 1, 1<<21 - 1, false},
		{1<<62 - 1, 1 << 59, false}, // 62 bits of count leave 2 of index
	})
}

// TestFixedWindowOldStateIsNotCurrent: a state untouched for a very long
// time (windows that would wrap a short index) is read as a past window.
func TestFixedWindowOldStateIsNotCurrent(t *testing.T) {
	f, err := NewFixedWindow(3, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var s FixedWindowState
	if !f.AllowN(&s, 5, 3).Allowed() || f.AllowN(&s, 5, 1).Allowed() {
		t.Fatal("first window should hold exactly 3")
	}
	ms := int64(time.Millisecond)
	for _, later := range []int64{1 << 32 * ms, 1 << 40 * ms, 1<<62 + 5} {
		if d := f.AllowN(&s, later, 0); d.Remaining != 3 {
			t.Fatalf("at %d the old full window was read as current: %+v", later, d)
		}
	}
}

// TestFixedWindowBoundary documents the 2x burst across a boundary.
func TestFixedWindowBoundary(t *testing.T) {
	l, err := NewFixedWindowLimiter(10, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	end := int64(time.Second) - 1
	if !l.AllowN(end, 10).Allowed() || !l.AllowN(end+1, 10).Allowed() {
		t.Fatal("a fixed window admits a full limit on each side of a boundary")
	}
}
