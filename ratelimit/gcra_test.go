package ratelimit

import (
	"strings"
	"testing"
	"time"
)

// gcraModel is the textbook token bucket, kept in nanoseconds of credit: the
// bucket holds level(t) = min(tau, c + (t−a)) ns, where c is the level
// recorded at the last change a; a token costs one interval. The level is a
// function of absolute time in both directions, so an earlier now sees a
// lower level.
type gcraModel struct {
	interval, tau, burst int64
	c, a                 int64
}

func newGCRAModel(limit int64, window time.Duration) rateModel {
	interval := (int64(window) + limit - 1) / limit
	return &gcraModel{interval: interval, tau: limit * interval, burst: limit, c: limit * interval}
}

func (m *gcraModel) level(now int64) int64 { return min(m.tau, m.c+now-m.a) }

func (m *gcraModel) report(level int64) Decision {
	return Decision{
		Limit:      m.burst,
		Remaining:  max(0, level/m.interval),
		ResetAfter: time.Duration(m.tau - level),
	}
}

func (m *gcraModel) allowN(now, n int64) Decision {
	level := m.level(now)
	d := m.report(level)
	switch {
	case n == 0:
	case n > m.burst:
		d.RetryAfter = Never
	case level >= n*m.interval:
		m.c, m.a = level-n*m.interval, now
		d = m.report(m.c)
	default:
		d.RetryAfter = time.Duration(n*m.interval - level)
	}
	return d
}

func (m *gcraModel) refund(now, n int64) {
	// Nothing comes back while the bucket owes beyond empty at now (an
	// older now, or reservations pending): see GCRA.Refund.
	if level := m.level(now); level >= 0 && level < m.tau {
		m.c, m.a = min(m.tau, level+n*m.interval), now
	}
}

func (m *gcraModel) recovered(now int64) bool { return m.level(now) == m.tau }

func TestNewGCRARejectsBadRates(t *testing.T) {
	for _, c := range []struct {
		rate  Rate
		burst int64
		want  string
	}{
		{Per(0, time.Second), 1, "count"},
		{Per(-5, time.Second), 1, "count"},
		{Per(10, 0), 1, "period"},
		{Per(10, -time.Second), 1, "period"},
		{Per(11, 10*time.Nanosecond), 1, "faster than one"},
		{Per(10, time.Second), 0, "burst"},
		{Per(10, time.Second), -1, "burst"},
		{Per(1, 24*time.Hour), 365 * 20, "refill"},
	} {
		_, err := NewGCRA(c.rate, c.burst)
		if err == nil || !strings.HasPrefix(err.Error(), "ratelimit: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewGCRA(%v, %d): error %v, want one about %q", c.rate, c.burst, err, c.want)
		}
	}
	if _, err := NewGCRA(Per(10, 10*time.Nanosecond), 1); err != nil {
		t.Errorf("one per nanosecond is representable: %v", err)
	}
}

// TestGCRAIntervalRoundsUp: 3 per 10 ns cannot be kept exactly; the interval
// rounds up to 4 ns so the bucket refills slightly slower, never faster.
func TestGCRAIntervalRoundsUp(t *testing.T) {
	g, err := NewGCRA(Per(3, 10*time.Nanosecond), 1)
	if err != nil {
		t.Fatal(err)
	}
	if g.Interval() != 4 || g.Burst() != 1 {
		t.Fatalf("interval %v burst %d, want 4ns and 1", g.Interval(), g.Burst())
	}
	var s GCRAState
	admitted := 0
	for now := int64(0); now < 30; now++ {
		if g.AllowN(&s, now, 1).Allowed() {
			admitted++
		}
	}
	// At 4 ns per token over [0, 30): t = 0, 4, ..., 28 -> 8; the exact rate
	// would allow 9 (burst 1 + 3 per 10 ns over 29 ns, floored).
	if admitted != 8 {
		t.Fatalf("admitted %d in 30 ns, want 8", admitted)
	}
}

// TestGCRADecisionNumbers pins the decision fields on a small example.
func TestGCRADecisionNumbers(t *testing.T) {
	b, err := NewTokenBucket(Per(1, time.Second), 3)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1) << 62
	for i, want := range []Decision{
		{Limit: 3, Remaining: 2, ResetAfter: time.Second},
		{Limit: 3, Remaining: 1, ResetAfter: 2 * time.Second},
		{Limit: 3, Remaining: 0, ResetAfter: 3 * time.Second},
		{Limit: 3, Remaining: 0, RetryAfter: time.Second, ResetAfter: 3 * time.Second},
	} {
		if got := b.AllowN(now, 1); got != want {
			t.Fatalf("request %d: got %+v, want %+v", i, got, want)
		}
	}
	now += int64(1500 * time.Millisecond)
	if got, want := b.AllowN(now, 2), (Decision{Limit: 3, Remaining: 1,
		RetryAfter: 500 * time.Millisecond, ResetAfter: 1500 * time.Millisecond}); got != want {
		t.Fatalf("two tokens after 1.5s: got %+v, want %+v", got, want)
	}
	b.Refund(now, 10) // more than was ever taken: the bucket is full, not fuller
	if d := b.AllowN(now, 3); !d.Allowed() || d.Remaining != 0 {
		t.Fatalf("after an oversized refund: %+v", d)
	}
	if d := b.AllowN(now, 1); d.Allowed() {
		t.Fatalf("refund overfilled the bucket: %+v", d)
	}
}
