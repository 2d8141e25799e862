package store_test

import (
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// TestMemoryBytesBoundsWhatAMemoryStoreHolds: registering a limit
// allocates its table, no more than MemoryBytes says, and a sliding log
// whose every key has admitted (the worst case) reaches the figure; the
// sliding log of 1,000 an hour at the default capacity is the 1 GiB of
// the field report.
func TestMemoryBytesBoundsWhatAMemoryStoreHolds(t *testing.T) {
	const slack = 16 << 10 // the heap moves by a few KiB of its own meanwhile
	heap := func() int64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	// The heap counts every goroutine's memory: a figure is taken three
	// times, the least bounded above and the greatest below, so that
	// another's allocation or free during one try cannot fail the test.
	const tries = 3
	for _, spec := range []store.Spec{
		{Name: "tb", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Rate{Count: 1, Per: time.Second}},
		{Name: "fw", Algorithm: store.FixedWindow, Limit: 10, Window: time.Minute, Capacity: 100_000},
		{Name: "cc", Algorithm: store.Concurrency, Limit: 4, LeaseTTL: time.Minute, Capacity: 5000},
	} {
		want, err := spec.MemoryBytes()
		if err != nil {
			t.Fatal(err)
		}
		least, most := int64(math.MaxInt64), int64(math.MinInt64)
		for range tries {
			m := store.NewMemory()
			before := heap()
			if _, err := m.Register(t.Context(), spec); err != nil {
				t.Fatal(err)
			}
			got := heap() - before
			runtime.KeepAlive(m)
			least, most = min(least, got), max(most, got)
		}
		if most <= 0 || least > want+slack {
			t.Errorf("%s: registering took %d to %d bytes, MemoryBytes says at most %d", spec.Name, least, most, want)
		}
	}

	const keys = 2000
	spec := store.Spec{Name: "log", Algorithm: store.SlidingLog, Limit: 100, Window: time.Hour, Capacity: keys}
	want, err := spec.MemoryBytes()
	if err != nil {
		t.Fatal(err)
	}
	least, most := int64(math.MaxInt64), int64(math.MinInt64)
	for range tries {
		m := store.NewMemory()
		before := heap()
		id, err := m.Register(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		// Nine keys in ten are admitted: a table may overflow a little
		// before it is full (a key whose candidate buckets are both taken,
		// which depends on the table's random seed: about one run in 150
		// met one before 90%), so such a key is passed over for the next
		// one, and every other answer must admit.
		var keyBuf [16]byte
		admitted, overflowed := 0, 0
		for i := 0; admitted < keys*9/10; i++ {
			if overflowed > keys/20 {
				t.Fatalf("%d of %d new keys overflowed a table of %d", overflowed, i, keys)
			}
			key := string(concurrencyKey(keyBuf[:0], i))
			req := store.Request{Now: int64(time.Second)}
			req.Add(id, key, 1)
			var res store.Result
			switch err := m.Decide(t.Context(), &req, &res); {
			case err == nil && res.Allowed:
				admitted++
			case err == nil && res.Hits[0].Overflow:
				overflowed++
			default:
				t.Fatalf("key %d: %+v %v", i, res, err)
			}
		}
		got := heap() - before
		runtime.KeepAlive(m)
		least, most = min(least, got), max(most, got)
	}
	if least > want+slack || most < want*3/4 {
		t.Errorf("sliding log, every key admitted: %d to %d bytes, MemoryBytes says %d", least, most, want)
	}

	big := store.Spec{Name: "login", Algorithm: store.SlidingLog, Limit: 1000, Window: time.Hour}
	if b, err := big.MemoryBytes(); err != nil || b < 1e9 {
		t.Errorf("1,000 an hour at the default capacity: %d bytes %v, want over 1 GB", b, err)
	}
	for _, bad := range []store.Spec{
		{Name: "huge", Algorithm: store.TokenBucket, Limit: 1, Rate: ratelimit.Rate{Count: 1, Per: time.Second}, Capacity: concurrency.MaxTableCapacity + 1},
		{Name: "neg", Algorithm: store.TokenBucket, Limit: -1, Rate: ratelimit.Rate{Count: 1, Per: time.Second}},
	} {
		if _, err := bad.MemoryBytes(); err == nil || !strings.HasPrefix(err.Error(), "store: ") {
			t.Errorf("%s: %v, want a store error", bad.Name, err)
		}
	}
}

func concurrencyKey(dst []byte, i int) []byte {
	dst = append(dst, "k"...)
	for ; i > 0; i /= 10 {
		dst = append(dst, byte('0'+i%10))
	}
	return dst
}
