package ratelimit

import (
	"testing"
	"time"
)

// slidingModel keeps the admissions per aligned window in a map and applies
// the estimate cur + prev·(W−e)/W ≤ limit − n with plain integers. Its
// RetryAfter and ResetAfter come from a search over future instants, not
// from a formula.
type slidingModel struct {
	limit, window int64
	counts        map[int64]int64
	latest        int64
}

func newSlidingModel(limit int64, window time.Duration) rateModel {
	return &slidingModel{limit: limit, window: int64(window), counts: map[int64]int64{}}
}

// at returns the window governing now, its count and the previous one's, and
// whether now lies before the latest charged window.
func (m *slidingModel) at(now int64) (idx, cur, prev int64, back bool) {
	idx = now / m.window
	if idx < m.latest {
		return m.latest, m.counts[m.latest], m.counts[m.latest-1], true
	}
	return idx, m.counts[idx], m.counts[idx-1], false
}

// room returns limit − cur − ⌈prev·(W−e)/W⌉ at now (negative when over).
func (m *slidingModel) room(now int64) int64 {
	idx, cur, prev, back := m.at(now)
	if back {
		return -1
	}
	w := prev * (m.window - (now - idx*m.window)) // small numbers: no overflow
	return m.limit - cur - (w+m.window-1)/m.window
}

// first returns the first instant from now on when ok holds; ok must turn
// true within three windows of the latest one and stay true.
func (m *slidingModel) first(now int64, ok func(int64) bool) int64 {
	lo, hi := now, max(now, m.latest*m.window)+3*m.window
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

func (m *slidingModel) report(now int64) Decision {
	d := Decision{Limit: m.limit, Remaining: max(0, m.room(now))}
	d.ResetAfter = time.Duration(m.first(now, m.recovered) - now)
	return d
}

func (m *slidingModel) allowN(now, n int64) Decision {
	d := m.report(now)
	switch {
	case n == 0:
	case n > m.limit:
		d.RetryAfter = Never
	case m.room(now) < n:
		d.RetryAfter = time.Duration(m.first(now, func(t int64) bool { return m.room(t) >= n }) - now)
	default:
		idx := now / m.window
		m.counts[idx] += n
		m.latest = idx
		d = m.report(now)
	}
	return d
}

// refund gives back n admitted at now, to now's window if it is the
// latest one counted or the one before it.
func (m *slidingModel) refund(now, n int64) {
	if w := now / m.window; w == m.latest || w == m.latest-1 {
		m.counts[w] -= min(n, m.counts[w])
	}
}

func (m *slidingModel) recovered(now int64) bool {
	_, cur, prev, back := m.at(now)
	return !back && cur == 0 && prev == 0
}

func TestSlidingWindowPacking(t *testing.T) {
	checkPacking(t, "NewSlidingWindow", func(limit int64, window time.Duration) error {
		_, err := NewSlidingWindow(limit, window)
		return err
	}, []packing{
		{1, MinWindow, true},         // 2 bits of counts, 62 of index
		{1023, MinWindow, true},      // 20 bits of counts need only 2^19 ns
		{1023, MinWindow - 1, false}, // below the minimum, whatever the packing
		{2047, 1 << 21, true},        // 22 bits of counts need 2^21 ns (2.1 ms)
		{2047, 1<<21 - 1, false},     // one short, although above MinWindow
		{65535, 1 << 31, true},       // 32 bits of counts need 2^31 ns (~2.1 s)
		{65535, time.Second, false},
		{1 << 32, 1 << 59, false}, // 66 bits of counts: never
	})
}

// TestSlidingWindowWorstCase shows the documented error bound is reached
// (nearly): a full previous window packed into its last instant, then the
// weighted allowance late in the current window.
func TestSlidingWindowWorstCase(t *testing.T) {
	const limit, u = 10, int64(time.Microsecond)
	const window = 1000 * u
	sw, err := NewSlidingWindow(limit, time.Duration(window))
	if err != nil {
		t.Fatal(err)
	}
	var s SlidingWindowState
	admitted := int64(0)
	if sw.AllowN(&s, window-1, limit).Allowed() {
		admitted += limit
	}
	// At 1900 µs the previous window weighs 10·(100/1000) = 1, leaving 9.
	for sw.AllowN(&s, 1900*u, 1).Allowed() {
		admitted++
	}
	bound := int64(limit + limit*(window-1)/window)
	if admitted != 19 || admitted > bound {
		t.Fatalf("admitted %d in (900 µs, 1900 µs], want 19 (bound %d)", admitted, bound)
	}
}

// TestSlidingWindowEvenTrafficIsExact: with the previous window's requests
// spread evenly, the estimate equals the true count of the last window.
func TestSlidingWindowEvenTrafficIsExact(t *testing.T) {
	const limit, u = 10, int64(time.Microsecond)
	const window = 1000 * u
	sw, err := NewSlidingWindow(limit, time.Duration(window))
	if err != nil {
		t.Fatal(err)
	}
	var s SlidingWindowState
	for i := range int64(limit) {
		if !sw.AllowN(&s, i*window/limit+50*u, 1).Allowed() { // 50, 150, ..., 950 µs
			t.Fatalf("request %d of an evenly spread window rejected", i)
		}
	}
	// At 1500 µs the last window (500, 1500] holds the 5 requests at 550..950.
	if d := sw.AllowN(&s, 1500*u, 0); d.Remaining != limit-5 {
		t.Fatalf("remaining %d at 1500 µs, a true sliding window has %d", d.Remaining, limit-5)
	}
}
