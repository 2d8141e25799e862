package penalty

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// model is the specification of one key's penalty state, written plainly:
// an unbounded list of strikes instead of a ring of atomics.
type model struct {
	strikes       []int64
	until         int64
	level, anchor int64
}

func (m *model) effLevel(now int64, decay int64) int64 {
	if m.level == 0 || now <= m.anchor {
		return m.level
	}
	return max(0, m.level-(now-m.anchor)/decay)
}

// recovered reports whether the state is indistinguishable from a fresh
// one at now: no timeout, no strike within the window, no level left.
func (m *model) recovered(now int64, c config) bool {
	for _, t := range m.strikes {
		if now-t < c.window {
			return false
		}
	}
	return now >= m.until && m.effLevel(now, c.levelDecay) == 0
}

func (m *model) strike(now int64, c config) Status {
	if now < m.until {
		return Status{RetryAfter: time.Duration(m.until - now), Level: int(m.effLevel(now, c.levelDecay)), Tracked: true}
	}
	m.strikes = append(m.strikes, now)
	n := 0
	for _, t := range m.strikes {
		if now-t < c.window {
			n++
		}
	}
	if n < c.strikes {
		return Status{Strikes: n, Level: int(m.effLevel(now, c.levelDecay)), Tracked: true}
	}
	lvl := m.effLevel(now, c.levelDecay) + 1
	d := c.timeouts[min(int(lvl), len(c.timeouts))-1]
	*m = model{until: now + d, level: lvl, anchor: now + d}
	return Status{RetryAfter: time.Duration(d), Level: int(lvl), Started: true, Tracked: true}
}

func genOptions(t *rapid.T) []Option {
	n := rapid.IntRange(1, MaxStrikes).Draw(t, "strikes")
	window := time.Duration(rapid.Int64Range(1, 100).Draw(t, "window"))
	steps := rapid.SliceOfN(rapid.Int64Range(1, 50), 1, 4).Draw(t, "steps")
	ds := make([]time.Duration, len(steps))
	acc := int64(0)
	for i, s := range steps {
		acc += s
		ds[i] = time.Duration(acc)
	}
	decay := time.Duration(rapid.Int64Range(1, 200).Draw(t, "decay"))
	return []Option{WithStrikes(n, window), WithTimeouts(ds...), WithLevelDecay(decay)}
}

// TestBoxMatchesModel drives a Box and the model with the same random
// strikes, checks and pardons on a few keys at non-decreasing times: every
// Status and every Check agree, so strikes expire and levels decay exactly
// on schedule; and the table's eviction test (recovered), which reads the
// history kept beside the table, agrees with the model at any later time.
func TestBoxMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b, err := NewBox(64, genOptions(t)...)
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{"a", "b", "c"}
		models := map[string]*model{}
		for _, k := range keys {
			models[k] = &model{}
		}
		now := int64(1)
		for range rapid.IntRange(1, 200).Draw(t, "ops") {
			now += rapid.Int64Range(0, 40).Draw(t, "dt")
			k := rapid.SampledFrom(keys).Draw(t, "key")
			m := models[k]
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0:
				b.Pardon(k)
				*m = model{}
			case 1, 2, 3:
				d, blocked := b.Check(k, now)
				if wantBlocked := now < m.until; blocked != wantBlocked || (blocked && d != time.Duration(m.until-now)) {
					t.Fatalf("Check(%s, %d) = %v %v, model until %d", k, now, d, blocked, m.until)
				}
			default:
				got := b.Strike(k, now)
				if want := m.strike(now, b.cfg); got != want {
					t.Fatalf("Strike(%s, %d) = %+v, model %+v", k, now, got, want)
				}
			}
			if ref, ok := b.table.Lookup(k); ok {
				later := now + rapid.Int64Range(0, 400).Draw(t, "later")
				got := b.recovered(ref.Value(), later)
				ref.Release()
				if want := m.recovered(later, b.cfg); got != want {
					t.Fatalf("recovered(%s, %d) = %v, model %v (%+v)", k, later, got, want, *m)
				}
			}
		}
	})
}

// TestBoxPenaltiesNeverShorten: without a pardon, once Check has said a key
// is blocked until E, it stays blocked at every later instant before E, and
// the end of a later timeout is never earlier.
func TestBoxPenaltiesNeverShorten(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b, err := NewBox(8, genOptions(t)...)
		if err != nil {
			t.Fatal(err)
		}
		now, end := int64(1), int64(0)
		for range rapid.IntRange(1, 300).Draw(t, "ops") {
			now += rapid.Int64Range(0, 20).Draw(t, "dt")
			if rapid.Bool().Draw(t, "strike") {
				b.Strike("k", now)
			}
			d, blocked := b.Check("k", now)
			if now < end && (!blocked || now+int64(d) < end) {
				t.Fatalf("at %d blocked %v until %d, earlier promised until %d", now, blocked, now+int64(d), end)
			}
			if blocked {
				end = max(end, now+int64(d))
			}
		}
	})
}

// TestBoxStrikeCountsForExactlyTheWindow: with threshold n, n strikes whose
// first is less than window before the last start a timeout; when the
// first is exactly window old, they do not.
func TestBoxStrikeCountsForExactlyTheWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, MaxStrikes).Draw(t, "n")
		window := rapid.Int64Range(int64(n), 1e12).Draw(t, "window")
		inside := rapid.Bool().Draw(t, "inside")
		b, err := NewBox(8, WithStrikes(n, time.Duration(window)))
		if err != nil {
			t.Fatal(err)
		}
		start := rapid.Int64Range(1, 1e15).Draw(t, "start")
		last := start + window
		if inside {
			last--
		}
		for i := range n - 1 {
			if st := b.Strike("k", start+int64(i)); st.Started {
				t.Fatalf("timeout after %d strikes", i+1)
			}
		}
		if st := b.Strike("k", last); st.Started != inside {
			t.Fatalf("last strike at +%d of a %d window: started %v", last-start, window, st.Started)
		}
	})
}

// TestBoxMemoryBounded: any number of distinct keys never holds more than
// the capacity, and a key in a timeout stays in it.
func TestBoxMemoryBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 256).Draw(t, "capacity")
		b, err := NewBox(capacity, WithStrikes(1, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		first := b.Strike("first", 1).Tracked
		for i := range rapid.IntRange(0, 3000).Draw(t, "keys") {
			b.Strike(keyOf(i), 2)
			if e := b.Stats().Entries; e > int64(capacity) {
				t.Fatalf("%d entries, capacity %d", e, capacity)
			}
		}
		if _, blocked := b.Check("first", 3); first && !blocked {
			t.Fatal("the first offender was forgotten")
		}
	})
}
