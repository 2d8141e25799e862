package concurrency

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

func TestTableIndex(t *testing.T) {
	tb := newTestTable(t, 100, WithShards(2), WithOverflow(OverflowShare))
	if tb.Slots() != len(tb.buckets)*bucketSlots || tb.Slots() < 125 {
		t.Fatalf("Slots %d for %d buckets", tb.Slots(), len(tb.buckets))
	}
	seen := map[int]bool{}
	for i := range 100 {
		r, _ := tb.Get(strconv.Itoa(i), 0)
		if r.Overflow() {
			r.Release()
			continue // a shard full before the table
		}
		r.Value().until.Store(1) // live: never evicted at 0
		x := tb.Index(r.Value())
		if x < 0 || x >= tb.Slots() || seen[x] {
			t.Fatalf("key %d: slot %d of %d, seen before: %v", i, x, tb.Slots(), seen[x])
		}
		seen[x] = true
		r.Release()
	}
	var outside tstate
	for name, v := range map[string]*tstate{"overflow state": &tb.shared, "nil": nil, "another state": &outside} {
		if x := tb.Index(v); x != -1 {
			t.Errorf("Index(%s) = %d, want -1", name, x)
		}
	}
	// Every slot of every bucket, in order.
	for i := range tb.buckets {
		for j := range bucketSlots {
			if x := tb.Index(&tb.buckets[i].state[j]); x != i*bucketSlots+j {
				t.Fatalf("bucket %d slot %d: Index %d", i, j, x)
			}
		}
	}
}

// vstate follows the recipe of PeekRef: a version that Reset makes odd and
// that a holder of a Ref makes even, and the id of the key that owns it.
type vstate struct {
	version atomic.Uint64
	owner   atomic.Uint64
	until   atomic.Int64
}

func (s *vstate) Reset() {
	s.version.Store((s.version.Load() + 2) | 1)
	s.owner.Store(0)
	s.until.Store(0)
}

// TestTablePeekRacesReKeying: writers churn a small key space through a
// table smaller than it (insertions, evictions, deletions all the time),
// while readers Peek and validate as PeekRef prescribes. A validated read
// must never see another key's owner.
func TestTablePeekRacesReKeying(t *testing.T) {
	const capacity, keys, writers, readers = 16, 64, 4, 4
	iters := 50000
	if testing.Short() || tableRaceEnabled {
		iters = 5000
	}
	tb, err := NewTable[vstate](capacity, func(s *vstate, now int64) bool { return now >= s.until.Load() }, WithShards(1))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, keys+1)
	for id := range names {
		names[id] = strconv.Itoa(id)
	}
	var clock atomic.Int64
	var validated, foreign, done atomic.Int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			defer done.Add(1)
			x := uint64(w)*0x9e3779b97f4a7c15 + 1
			for range iters {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				id := x%keys + 1
				now := clock.Add(1)
				r, ok := tb.Get(names[id], now)
				if !ok {
					continue // full of live entries
				}
				v := r.Value()
				if g := v.version.Load(); g&1 == 1 {
					v.version.CompareAndSwap(g, g+1) // another holder may have done it
				}
				if !v.owner.CompareAndSwap(0, id) && v.owner.Load() != id {
					t.Errorf("key %d holds the state of key %d", id, v.owner.Load())
				}
				v.until.Store(now + int64(x%8))
				r.Release()
				if x%13 == 0 {
					tb.Delete(names[id])
				}
			}
		})
	}
	for r := range readers {
		wg.Go(func() {
			x := uint64(r)*0x2545f4914f6cdd1d + 7
			for done.Load() < writers {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				id := x%keys + 1
				p, ok := tb.Peek(names[id])
				if !ok {
					continue
				}
				v := p.Value()
				g := v.version.Load()
				if g&1 == 1 || !p.Current() {
					continue
				}
				owner := v.owner.Load()
				if v.version.Load() != g {
					continue
				}
				validated.Add(1)
				if owner != 0 && owner != id {
					foreign.Add(1)
					t.Errorf("validated Peek of key %d read the state of key %d", id, owner)
				}
			}
		})
	}
	wg.Wait()
	s := tb.Stats()
	t.Logf("%d validated reads, stats %+v", validated.Load(), s)
	if validated.Load() == 0 || s.Evictions == 0 {
		t.Fatalf("the test did not exercise the race: %d validated reads, stats %+v", validated.Load(), s)
	}
}

func TestTableIndexOfZeroSizeStates(t *testing.T) {
	tb, err := NewTable[zstate](8, func(*zstate, int64) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	r, _ := tb.Get("a", 0)
	defer r.Release()
	if x := tb.Index(r.Value()); x != -1 {
		t.Fatalf("Index of a zero-size state: %d", x)
	}
}

type zstate struct{}

func (*zstate) Reset() {}
