package concurrency

import (
	"runtime"
	"strconv"
	"testing"
)

// TestTableKeyFlood pours tableFloodKeys distinct keys (10 million, or 1 million
// under the race detector) into a table capped at 100,000 entries. The first
// 1,000 keys are limited for good (their state never recovers); every flood
// key stays live for longer than the table has room for, so the table runs
// full of live entries, overflows, and evicts flood keys as they recover.
// The heap must not grow beyond the table preallocated by NewTable (plus a
// little slack for the runtime), and no limited key may ever be evicted or
// reset.
func TestTableKeyFlood(t *testing.T) {
	const (
		capacity = 100_000
		limited  = 1_000
		ttl      = 150_000 // flood entries stay live for 150,000 ticks
		slack    = 1 << 20
	)
	var m0, m1, m2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	tb := newTestTable(t, capacity)
	runtime.GC()
	runtime.ReadMemStats(&m1)

	buf := make([]byte, 0, 32)
	key := func(i int) []byte { return strconv.AppendInt(append(buf[:0], 'k'), int64(i), 10) }
	for i := range limited {
		r, ok := tb.GetBytes(key(i), int64(i))
		if !ok {
			t.Fatal("could not insert a limited key into an empty table")
		}
		tableUse(t, r, uint64(i+1), 1<<62)
		r.Release()
	}
	for i := limited; i < tableFloodKeys; i++ {
		now := int64(i)
		if r, ok := tb.GetBytes(key(i), now); ok {
			tableUse(t, r, uint64(i+1), now+ttl)
			r.Release()
		}
		if i%(tableFloodKeys/10) == 0 { // a limited client comes back: its state must be intact
			j := i / (tableFloodKeys / 10)
			r, ok := tb.GetBytes(key(j), now)
			if !ok || r.Value().hits.Load() != 1 || r.Value().owner.Load() != uint64(j+1) {
				t.Fatalf("after %d keys, limited key %d was lost or reset", i, j)
			}
			r.Release()
		}
		if i%1024 == 0 && tb.Len() > capacity {
			t.Fatalf("after %d keys: %d entries, capacity %d", i, tb.Len(), capacity)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m2)
	for i := range limited {
		r, ok := tb.GetBytes(key(i), tableFloodKeys)
		if !ok || r.Value().owner.Load() != uint64(i+1) || r.Value().hits.Load() != 1 {
			t.Fatalf("limited key %d was evicted or reset", i)
		}
		r.Release()
	}
	s := tb.Stats()
	tableBytes := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	growth := int64(m2.HeapAlloc) - int64(m1.HeapAlloc)
	t.Logf("%d keys: stats %+v; table %d bytes (%.1f per entry of capacity), heap growth during the flood %d bytes",
		tableFloodKeys, s, tableBytes, float64(tableBytes)/capacity, growth)
	if growth > slack {
		t.Fatalf("heap grew by %d bytes during the flood", growth)
	}
	if s.Overflows == 0 || s.Evictions == 0 {
		t.Fatalf("the flood neither overflowed nor evicted: %+v", s)
	}
}
