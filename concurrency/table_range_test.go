package concurrency

import (
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// TestTableRangeSeesEveryEntryOnce: Range hands each entry's own state,
// once, with the hash LookupHash finds it by again; it stops when f says
// so, and sees no deleted entry.
func TestTableRangeSeesEveryEntryOnce(t *testing.T) {
	tb := newTestTable(t, 1000, WithShards(4))
	for i := range 500 {
		r, ok := tb.Get(strconv.Itoa(i), 0)
		if !ok {
			t.Fatalf("key %d did not fit", i)
		}
		r.Value().owner.Store(uint64(i + 1))
		r.Value().until.Store(1)
		r.Release()
	}
	if !tb.Delete("7") {
		t.Fatal("Delete of an unpinned key failed")
	}
	seen := map[uint64]uint64{}
	tb.Range(func(h uint64, v *tstate) bool {
		o := v.owner.Load()
		if _, dup := seen[o]; dup {
			t.Fatalf("owner %d seen twice", o)
		}
		seen[o] = h
		return true
	})
	if len(seen) != 499 {
		t.Fatalf("Range saw %d entries, want 499", len(seen))
	}
	if _, ok := seen[8]; ok {
		t.Fatal("Range saw the deleted key 7")
	}
	for o, h := range seen {
		r, ok := tb.LookupHash(h)
		if !ok || r.Value().owner.Load() != o {
			t.Fatalf("LookupHash of owner %d's hash: %v", o, ok)
		}
		r.Release()
	}
	if _, ok := tb.LookupHash(0); ok {
		t.Error("LookupHash(0) found an entry in a table without one of hash 1")
	}
	n := 0
	tb.Range(func(uint64, *tstate) bool { n++; return n < 10 })
	if n != 10 {
		t.Errorf("Range went on after f returned false: %d calls", n)
	}
}

// TestTableRangeRacesChurn: Range during insertions and evictions only
// ever hands a pinned state that a key owns (run with -race), and the
// entries it pins are not evicted under it.
func TestTableRangeRacesChurn(t *testing.T) {
	tb := newTestTable(t, 256, WithShards(1))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := uint64(w*1_000_000 + i%2000 + 1)
				r, ok := tb.Get(strconv.FormatUint(id, 10), int64(i))
				if !ok {
					continue
				}
				tableUse(t, r, id, int64(i)+50)
				r.Release()
			}
		}()
	}
	for range 200 {
		tb.Range(func(h uint64, v *tstate) bool {
			o := v.owner.Load()
			runtime.Gosched() // let the writers at it: a pinned entry is not reset
			if o2 := v.owner.Load(); o != 0 && o2 != o || tb.Index(v) < 0 {
				t.Errorf("the state Range pinned went from owner %d to %d (slot %d)", o, o2, tb.Index(v))
				return false
			}
			return true
		})
	}
	close(stop)
	wg.Wait()
}

func BenchmarkTableRange(b *testing.B) {
	for _, capacity := range []int{1 << 16, 1 << 20} {
		b.Run(strconv.Itoa(capacity), func(b *testing.B) {
			tb := newTestTable(b, capacity)
			for i := range capacity / 2 {
				r, _ := tb.Get(strconv.Itoa(i), 0)
				r.Value().until.Store(1)
				r.Release()
			}
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				tb.Range(func(uint64, *tstate) bool { n++; return true })
			}
			b.ReportMetric(float64(tb.Slots()), "slots")
		})
	}
}
