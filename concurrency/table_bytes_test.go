package concurrency

import (
	"math"
	"runtime"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestTableBytesIsWhatNewTableAllocates: TableBytes is the size of the
// buckets NewTable allocates, within what the allocator rounds up and the
// table's header, for small and large capacities and states of several
// sizes; and it refuses what NewTable refuses.
func TestTableBytesIsWhatNewTableAllocates(t *testing.T) {
	measure := func(f func()) int64 { // the least of a few runs: others allocate too
		least := int64(math.MaxInt64)
		for range 5 {
			var a, b runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&a)
			f()
			runtime.ReadMemStats(&b)
			least = min(least, int64(b.TotalAlloc-a.TotalAlloc))
		}
		return least
	}
	for _, capacity := range []int{1, 1000, 1 << 16, 300_001} {
		want, err := TableBytes[ratelimit.GCRAState](capacity)
		if err != nil {
			t.Fatal(err)
		}
		var tab *Table[ratelimit.GCRAState, *ratelimit.GCRAState]
		got := measure(func() {
			tab, _ = NewTable[ratelimit.GCRAState](capacity, func(*ratelimit.GCRAState, int64) bool { return true })
		})
		if got > want || got < want-4096 {
			t.Errorf("capacity %d: NewTable allocated %d bytes, TableBytes says %d", capacity, got, want)
		}
		runtime.KeepAlive(tab)
		lw, _ := TableBytes[ratelimit.SlidingLogState](capacity)
		lease, _ := TableBytes[[64]byte](capacity)
		if lw != want || lease <= want {
			t.Errorf("capacity %d: 8-byte states %d and %d, 64-byte %d", capacity, want, lw, lease)
		}
	}
	for _, capacity := range []int{0, -1, MaxTableCapacity + 1} {
		if _, err := TableBytes[ratelimit.GCRAState](capacity); err == nil {
			t.Errorf("TableBytes(%d) = nil error", capacity)
		}
	}
}

// TestTableHeaderBound: tableHeader covers a Table's fields but V.
func TestTableHeaderBound(t *testing.T) {
	if got := unsafe.Sizeof(Table[ratelimit.GCRAState, *ratelimit.GCRAState]{}) - unsafe.Sizeof(ratelimit.GCRAState{}); got > tableHeader {
		t.Errorf("a Table's fields take %d bytes, tableHeader is %d", got, tableHeader)
	}
}

// TestAllocBytesIsWhatTheAllocatorTakes: for sizes small and large, an
// allocation of n bytes takes AllocBytes(n) (measured on the heap), and
// AllocBytes never allocates much itself.
func TestAllocBytesIsWhatTheAllocatorTakes(t *testing.T) {
	var sink []byte
	for _, n := range []int64{17, 1000, 16000, 32 << 10, 32<<10 + 1, 100_000, 1 << 22} { // not tiny ones: they share blocks
		// TotalAlloc counts every goroutine's allocations (a parallel
		// test's too): the least of a few tries is this make's alone.
		got := int64(math.MaxInt64)
		for range 5 {
			var a, b runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&a)
			sink = make([]byte, n)
			runtime.ReadMemStats(&b)
			got = min(got, int64(b.TotalAlloc-a.TotalAlloc))
		}
		if want := AllocBytes(n); got < want || got > want+256 { // the runtime allocates a little of its own
			t.Errorf("make(%d bytes) took %d, AllocBytes says %d", n, got, want)
		}
	}
	runtime.KeepAlive(sink)
	if n := testing.AllocsPerRun(10, func() { AllocBytes(1 << 30) }); n != 0 {
		t.Errorf("AllocBytes of a large size allocates %v times", n)
	}
}
