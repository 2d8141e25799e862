package concurrency

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/ratelimit"
)

// tstate is the per-key state of the table tests: the first user stamps its
// key id in owner, every use counts a hit, and until is the time at which
// the state is recovered (indistinguishable from fresh) again.
type tstate struct {
	owner atomic.Uint64
	hits  atomic.Int64
	until atomic.Int64
}

func (s *tstate) Reset() {
	s.owner.Store(0)
	s.hits.Store(0)
	s.until.Store(0)
}

func trecovered(s *tstate, now int64) bool { return now >= s.until.Load() }

func newTestTable(t testing.TB, capacity int, opts ...TableOption) *Table[tstate, *tstate] {
	t.Helper()
	tb, err := NewTable[tstate](capacity, trecovered, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// tableUse stamps and charges the state of key id: the state must be fresh or
// already owned by id, else the Ref points at another key's state.
func tableUse(t testing.TB, r Ref[tstate], id uint64, until int64) {
	v := r.Value()
	if !v.owner.CompareAndSwap(0, id) {
		if o := v.owner.Load(); o != id {
			t.Errorf("key %d got the state of key %d", id, o)
		}
	}
	v.hits.Add(1)
	for {
		u := v.until.Load()
		if u >= until || v.until.CompareAndSwap(u, until) {
			return
		}
	}
}

func TestNewTableRejectsBadInput(t *testing.T) {
	cases := []struct {
		name     string
		capacity int
		rec      func(*tstate, int64) bool
		opts     []TableOption
	}{
		{"zero capacity", 0, trecovered, nil},
		{"negative capacity", -5, trecovered, nil},
		{"nil recovered", 10, nil, nil},
		{"unknown overflow", 10, trecovered, []TableOption{WithOverflow(7)}},
		{"zero shards", 10, trecovered, []TableOption{WithShards(-1)}},
		{"shards not a power of two", 100, trecovered, []TableOption{WithShards(3)}},
		{"more shards than capacity", 4, trecovered, []TableOption{WithShards(8)}},
	}
	for _, c := range cases {
		if _, err := NewTable[tstate](c.capacity, c.rec, c.opts...); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	tb := newTestTable(t, 1<<20, WithShards(16))
	if len(tb.shards) != 16 || tb.Stats().Capacity != 1<<20 {
		t.Fatalf("shards %d capacity %d", len(tb.shards), tb.Stats().Capacity)
	}
}

func TestTableBasics(t *testing.T) {
	tb := newTestTable(t, 10)
	if _, ok := tb.Lookup("a"); ok {
		t.Fatal("Lookup found a key never inserted")
	}
	r, ok := tb.Get("a", 0)
	if !ok || r.Overflow() {
		t.Fatal("Get on an empty table failed")
	}
	tableUse(t, r, 1, 100)
	if tb.Delete("a") {
		t.Fatal("Delete removed a pinned entry")
	}
	r2, ok := tb.GetBytes([]byte("a"), 1)
	if !ok || r2.Value() != r.Value() || r2.Value().hits.Load() != 1 {
		t.Fatal("GetBytes did not find the entry of Get")
	}
	r.Release()
	r2.Release()
	if l, ok := tb.Lookup("a"); !ok || l.Value().hits.Load() != 1 {
		t.Fatal("Lookup lost the entry")
	} else {
		l.Release()
	}
	if tb.Len() != 1 {
		t.Fatalf("Len %d, want 1", tb.Len())
	}
	if !tb.Delete("a") || tb.Delete("a") || tb.Len() != 0 {
		t.Fatal("Delete of an unpinned entry failed, or deleted twice")
	}
	r, _ = tb.Get("a", 2)
	if r.Value().hits.Load() != 0 || r.Value().owner.Load() != 0 {
		t.Fatal("re-inserted key did not start fresh")
	}
	r.Release()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("double Release did not panic")
			}
		}()
		r.Release()
	}()
	Ref[tstate]{}.Release() // the zero Ref is inert
}

// TestTableEvictsOnlyRecovered fills a one-bucket table and checks that a
// new key replaces only a recovered, unpinned entry.
func TestTableEvictsOnlyRecovered(t *testing.T) {
	tb := newTestTable(t, 4) // one shard, one bucket: every key competes
	for i := range 4 {
		r, ok := tb.Get("k"+strconv.Itoa(i), 0)
		if !ok {
			t.Fatal("could not fill")
		}
		tableUse(t, r, uint64(i+1), 100) // limited until 100
		r.Release()
	}
	if _, ok := tb.Get("new", 50); ok {
		t.Fatal("a new key was admitted into a table full of limited entries")
	}
	for i := range 4 {
		r, ok := tb.Lookup("k" + strconv.Itoa(i))
		if !ok || r.Value().hits.Load() != 1 {
			t.Fatalf("limited key k%d lost or reset", i)
		}
		r.Release()
	}
	// k1 recovers early; it is the only one that may go, and only unpinned.
	r, _ := tb.Lookup("k1")
	r.Value().until.Store(10)
	if _, ok := tb.Get("new", 50); ok {
		t.Fatal("evicted a pinned entry")
	}
	r.Release()
	nr, ok := tb.Get("new", 50)
	if !ok || nr.Value().hits.Load() != 0 {
		t.Fatal("a recovered entry was not replaced by a fresh one")
	}
	nr.Release()
	if _, ok := tb.Lookup("k1"); ok {
		t.Fatal("the recovered entry is still there")
	}
	for _, k := range []string{"k0", "k2", "k3"} {
		if r, ok := tb.Lookup(k); !ok {
			t.Fatalf("live entry %s evicted", k)
		} else {
			r.Release()
		}
	}
	if s := tb.Stats(); s.Evictions != 1 || s.Overflows != 2 || s.Entries != 4 {
		t.Fatalf("stats %+v", s)
	}
}

func TestTableOverflowShare(t *testing.T) {
	tb := newTestTable(t, 2, WithOverflow(OverflowShare))
	for _, k := range []string{"a", "b"} {
		r, _ := tb.Get(k, 0)
		tableUse(t, r, 1, 100)
		r.Release()
	}
	x, ok := tb.Get("x", 1)
	y, ok2 := tb.GetBytes([]byte("y"), 1)
	if !ok || !ok2 || !x.Overflow() || !y.Overflow() || x.Value() != y.Value() {
		t.Fatal("keys that do not fit do not share the overflow state")
	}
	x.Value().hits.Add(1)
	x.Release()
	y.Release()
	if _, ok := tb.Lookup("x"); ok {
		t.Fatal("Lookup returned the overflow state")
	}
	if s := tb.Stats(); s.Overflows != 2 || s.Entries != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestTableSameNewKeyConcurrently: many goroutines Get the same new key at
// once; they must all land on one entry.
func TestTableSameNewKeyConcurrently(t *testing.T) {
	const workers = 64
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	tb := newTestTable(t, 1000, WithShards(1))
	for round := range rounds {
		key := "key" + strconv.Itoa(round)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range workers {
			wg.Go(func() {
				<-start
				r, ok := tb.Get(key, 0)
				if !ok {
					t.Error("Get failed")
					return
				}
				tableUse(t, r, uint64(round+1), 1)
				r.Release()
			})
		}
		close(start)
		wg.Wait()
		r, ok := tb.Lookup(key)
		if !ok || r.Value().hits.Load() != workers {
			t.Fatalf("round %d: the key's entry has %d hits, want %d", round, r.Value().hits.Load(), workers)
		}
		r.Release()
		if tb.Len() != round+1 {
			t.Fatalf("round %d: %d entries, want %d", round, tb.Len(), round+1)
		}
	}
}

// TestTableCapUnderConcurrentInserts: goroutines insert distinct keys that
// never recover; Len never exceeds the capacity and every admitted key
// keeps its entry.
func TestTableCapUnderConcurrentInserts(t *testing.T) {
	const capacity, workers, perWorker = 1000, 8, 400
	tb := newTestTable(t, capacity, WithShards(2))
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range perWorker {
				id := uint64(w*perWorker + i + 1)
				r, ok := tb.Get(strconv.FormatUint(id, 10), 0)
				if n := tb.Len(); n > capacity {
					t.Errorf("Len %d above capacity", n)
				}
				if !ok {
					continue
				}
				admitted.Add(1)
				tableUse(t, r, id, 1<<62)
				r.Release()
			}
		})
	}
	close(start)
	wg.Wait()
	s := tb.Stats()
	if s.Entries > capacity || s.Entries != admitted.Load() || s.Entries+int64(s.Overflows) != workers*perWorker {
		t.Fatalf("stats %+v, admitted %d", s, admitted.Load())
	}
	if s.Entries < capacity*9/10 {
		t.Fatalf("only %d of %d entries filled before overflowing", s.Entries, capacity)
	}
}

// TestTableChurn: goroutines hammer a small key space through a table that
// is smaller than it, with entries recovering and being evicted all the
// time. Every Ref must point at its own key's state (no re-targeting).
func TestTableChurn(t *testing.T) {
	const capacity, keys, workers = 64, 256, 8
	iters := 20000
	if testing.Short() {
		iters = 2000
	}
	tb := newTestTable(t, capacity, WithShards(1), WithOverflow(OverflowShare))
	tb.prefetch = true // as a large table's: Prefetch reads the buckets that Get, Delete and eviction write
	var clock atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			x := uint64(w)*0x9e3779b97f4a7c15 + 1
			for range iters {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				id := x%keys + 1
				tb.Prefetch(strconv.FormatUint(id, 10))
				tb.Prefetch(strconv.FormatUint((id*31)%keys+1, 10))
				now := clock.Add(1)
				r, ok := tb.Get(strconv.FormatUint(id, 10), now)
				if !ok {
					t.Error("OverflowShare Get failed")
					return
				}
				if !r.Overflow() {
					tableUse(t, r, id, now+int64(x%64))
				}
				if x%97 == 0 {
					tb.Delete(strconv.FormatUint(id, 10))
				}
				r.Release()
			}
		})
	}
	wg.Wait()
	s := tb.Stats()
	if s.Entries > capacity || s.Evictions == 0 {
		t.Fatalf("stats %+v", s)
	}
	t.Logf("churn stats %+v", s)
}

func TestTableDoesNotAllocate(t *testing.T) {
	tb := newTestTable(t, 100)
	r, _ := tb.Get("present", 0)
	r.Release()
	key := []byte("bytes-key")
	for name, f := range map[string]func(){
		"Get+Release existing": func() {
			r, _ := tb.Get("present", 0)
			r.Release()
		},
		"GetBytes+Release": func() {
			r, _ := tb.GetBytes(key, 0)
			r.Release()
		},
		"Lookup+Release": func() {
			r, _ := tb.Lookup("present")
			r.Release()
		},
		"Peek": func() {
			if p, ok := tb.Peek("present"); ok {
				p.Value().hits.Load()
				p.Current()
			}
			tb.Peek("absent")
		},
		"Prefetch": func() {
			tb.Prefetch("present")
			tb.Prefetch("absent")
		},
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s allocates %v per run", name, a)
		}
	}
}

// TestPrefetchChangesNothing: Prefetch of present and absent keys leaves
// the entries, their states and the counters as they were.
func TestPrefetchChangesNothing(t *testing.T) {
	tb := newTestTable(t, 100, WithShards(1))
	tb.prefetch = true // as a large table's
	for i := range 50 {
		r, _ := tb.Get("k"+strconv.Itoa(i), 0)
		tableUse(t, r, uint64(i+1), 10)
		r.Release()
	}
	before := tb.Stats()
	for i := range 200 {
		tb.Prefetch("k" + strconv.Itoa(i))
	}
	if after := tb.Stats(); after != before {
		t.Fatalf("stats %+v after Prefetch, %+v before", after, before)
	}
	for i := range 200 {
		r, ok := tb.Lookup("k" + strconv.Itoa(i))
		if ok != (i < 50) {
			t.Fatalf("k%d present %v after Prefetch, want %v", i, ok, i < 50)
		}
		if ok {
			if v := r.Value(); v.owner.Load() != uint64(i+1) || v.hits.Load() != 1 || v.until.Load() != 10 {
				t.Errorf("k%d's state changed: owner %d, hits %d, until %d", i, v.owner.Load(), v.hits.Load(), v.until.Load())
			}
			r.Release()
		}
	}
}

// TestPrefetchReadsOnlyLargeTables: Prefetch reads the buckets of a table
// of prefetchBytes of buckets or more, and nothing of a smaller one.
func TestPrefetchReadsOnlyLargeTables(t *testing.T) {
	perSlot := int(unsafe.Sizeof(bucket[tstate]{})) / bucketSlots
	for _, tc := range []struct {
		capacity int
		want     bool
	}{
		{1000, false},
		{prefetchBytes / perSlot / 2, false},
		{prefetchBytes / perSlot, true},
	} {
		tb := newTestTable(t, tc.capacity)
		if tb.Prefetches() != tc.want {
			t.Errorf("capacity %d (%d bytes of buckets): prefetch %v, want %v",
				tc.capacity, len(tb.buckets)*int(unsafe.Sizeof(bucket[tstate]{})), tb.Prefetches(), tc.want)
		}
	}
}

// TestTableModel runs random sequences of Get, Release, Delete, Peek and
// time steps against a map with a cap. The table is small enough (one
// shard, at most two buckets) that every key can use every slot, so the
// table must match the model exactly: no spurious overflow. Every entry
// has its own slot number (Index).
func TestTableModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		capacity := rapid.IntRange(1, 8).Draw(rt, "capacity")
		policy := Overflow(rapid.IntRange(0, 1).Draw(rt, "policy"))
		tb, err := NewTable[tstate](capacity, trecovered, WithOverflow(policy))
		if err != nil {
			rt.Fatal(err)
		}
		type entry struct {
			hits, until int64
			pins        int
		}
		model := map[string]*entry{}
		var held []struct {
			key string
			r   Ref[tstate]
		}
		var now int64
		keyGen := rapid.SampledFrom([]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"})
		rt.Repeat(map[string]func(*rapid.T){
			"get": func(rt *rapid.T) {
				k := keyGen.Draw(rt, "key")
				ttl := rapid.Int64Range(0, 20).Draw(rt, "ttl")
				r, ok := tb.Get(k, now)
				e, present := model[k]
				if !present {
					if len(model) == capacity {
						var victims []string
						for mk, me := range model {
							if me.pins == 0 && now >= me.until {
								victims = append(victims, mk)
							}
						}
						if len(victims) == 0 {
							if policy == OverflowReject && ok || policy == OverflowShare && !r.Overflow() {
								rt.Fatalf("key %q admitted into a table full of live entries", k)
							}
							r.Release()
							return
						}
						gone := ""
						for _, v := range victims {
							if l, ok := tb.Lookup(v); ok {
								l.Release()
							} else {
								gone = v
							}
						}
						if gone == "" {
							rt.Fatalf("no recovered entry evicted for %q", k)
						}
						delete(model, gone)
					}
					e = &entry{}
					model[k] = e
				}
				if !ok || r.Overflow() {
					rt.Fatalf("Get(%q) did not return an entry", k)
				}
				if got := r.Value().hits.Load(); got != e.hits {
					rt.Fatalf("key %q has %d hits, model %d", k, got, e.hits)
				}
				r.Value().hits.Add(1)
				e.hits++
				e.until = max(e.until, now+ttl)
				r.Value().until.Store(e.until)
				e.pins++
				held = append(held, struct {
					key string
					r   Ref[tstate]
				}{k, r})
			},
			"release": func(rt *rapid.T) {
				if len(held) == 0 {
					rt.Skip("nothing held")
				}
				i := rapid.IntRange(0, len(held)-1).Draw(rt, "i")
				held[i].r.Release()
				model[held[i].key].pins--
				held = append(held[:i], held[i+1:]...)
			},
			"advance": func(rt *rapid.T) {
				now += rapid.Int64Range(0, 10).Draw(rt, "dt")
			},
			"delete": func(rt *rapid.T) {
				k := keyGen.Draw(rt, "key")
				e, present := model[k]
				want := present && e.pins == 0
				if got := tb.Delete(k); got != want {
					rt.Fatalf("Delete(%q) = %v, model %v", k, got, want)
				}
				if want {
					delete(model, k)
				}
			},
			"peek": func(rt *rapid.T) {
				k := keyGen.Draw(rt, "key")
				p, ok := tb.Peek(k)
				e, present := model[k]
				if ok != present {
					rt.Fatalf("Peek(%q) found %v, model %v", k, ok, present)
				}
				if ok && (!p.Current() || p.Value().hits.Load() != e.hits) {
					rt.Fatalf("Peek(%q): current %v, %d hits, model %d", k, p.Current(), p.Value().hits.Load(), e.hits)
				}
			},
			"": func(rt *rapid.T) {
				if tb.Len() != len(model) {
					rt.Fatalf("Len %d, model %d", tb.Len(), len(model))
				}
				// Every entry has its own slot number, the same through
				// Lookup and Peek.
				seen := map[int]string{}
				for k := range model {
					l, ok := tb.Lookup(k)
					if !ok {
						rt.Fatalf("Lookup lost %q", k)
					}
					i := tb.Index(l.Value())
					l.Release()
					if p, _ := tb.Peek(k); tb.Index(p.Value()) != i {
						rt.Fatalf("%q: Lookup's slot %d, Peek's %d", k, i, tb.Index(p.Value()))
					}
					if i < 0 || i >= tb.Slots() || seen[i] != "" {
						rt.Fatalf("%q has slot %d of %d, already %q's", k, i, tb.Slots(), seen[i])
					}
					seen[i] = k
				}
			},
		})
		for _, h := range held {
			h.r.Release()
		}
	})
}

// TestTableLoad fills one-shard tables with keys that never recover (10%
// more keys than the capacity) and reports how full they get before the
// first overflow, which is then spurious: both buckets of a key full while
// the table still has room. After the extra keys the table must be at least
// 99% full.
func TestTableLoad(t *testing.T) {
	for _, capacity := range []int{100, 10_000, 100_000} {
		if capacity > 10_000 && tableRaceEnabled {
			continue
		}
		tb := newTestTable(t, capacity, WithShards(1))
		first := -1
		buf := make([]byte, 0, 32)
		for i := range capacity * 11 / 10 {
			r, ok := tb.GetBytes(strconv.AppendInt(buf[:0], int64(i), 10), 0)
			if !ok {
				if first < 0 {
					first = i
				}
				continue
			}
			r.Value().until.Store(1 << 62)
			r.Release()
		}
		s := tb.Stats()
		t.Logf("capacity %d: first overflow at %d entries (%.1f%%), %d entries (%.2f%%) after %d distinct keys",
			capacity, first, 100*float64(first)/float64(capacity), s.Entries, 100*float64(s.Entries)/float64(capacity), capacity*11/10)
		if s.Entries < int64(capacity)*99/100 {
			t.Errorf("capacity %d: only %d entries", capacity, s.Entries)
		}
	}
}

// TestBucketLayout: the keys fill the first line of a bucket, the pin
// counts the second, and a bucket whose V is a multiple of 8 bytes is a
// whole number of lines, so that every bucket's keys sit in one line.
func TestBucketLayout(t *testing.T) {
	var b bucket[tstate]
	if unsafe.Offsetof(b.pins) != bucketLine || unsafe.Offsetof(b.state) != 2*bucketLine {
		t.Fatalf("pins at %d, state at %d", unsafe.Offsetof(b.pins), unsafe.Offsetof(b.state))
	}
	for name, size := range map[string]uintptr{
		"tstate":    unsafe.Sizeof(b),
		"GCRAState": unsafe.Sizeof(bucket[ratelimit.GCRAState]{}),
	} {
		if size%bucketLine != 0 {
			t.Errorf("bucket of %s: %d bytes, not whole lines", name, size)
		}
	}
}

// TestTablePublishResolvesDuplicates drives the duplicate check of an
// insertion directly: two inserters of one key that missed each other must
// end with exactly one published copy.
func TestTablePublishResolvesDuplicates(t *testing.T) {
	const h = uint64(0x5eed)
	setup := func() (*Table[tstate, *tstate], *tableShard[tstate], *bucket[tstate], *bucket[tstate]) {
		tb := newTestTable(t, 16, WithShards(1)) // three buckets: b1 != b2
		sh, i1, i2 := tb.locate(h)
		b1, b2 := &sh.buckets[i1], &sh.buckets[i2]
		if b1 == b2 {
			t.Fatal("candidate buckets coincide")
		}
		return tb, sh, b1, b2
	}
	hold := func(sh *tableShard[tstate], b *bucket[tstate], i int) {
		if !b.pins[i].CompareAndSwap(0, pinLocked) {
			t.Fatal("could not hold the slot")
		}
		sh.count.Add(1)
	}
	givesWay := func(name string, sh *tableShard[tstate], b *bucket[tstate], i int, st probe) {
		if st != probeBusy || b.keys[i].Load() != 0 || b.pins[i].Load() != 0 || sh.count.Load() != 1 {
			t.Fatalf("%s: status %v, slot key %x pins %d, count %d; want it emptied and released", name, st, b.keys[i].Load(), b.pins[i].Load(), sh.count.Load())
		}
	}

	// A copy already published, even in a later slot: give way.
	tb, sh, b1, b2 := setup()
	b2.keys[6].Store(h)
	sh.count.Add(1)
	hold(sh, b1, 2)
	_, st := tb.publish(sh, b1, b2, b1, 2, h)
	givesWay("published later copy", sh, b1, 2, st)

	// A copy held in an earlier slot: give way to it.
	tb, sh, b1, b2 = setup()
	hold(sh, b1, 0)
	b1.keys[0].Store(h)
	hold(sh, b2, 3)
	_, st = tb.publish(sh, b1, b2, b2, 3, h)
	givesWay("held earlier copy", sh, b2, 3, st)

	// A copy held in a later slot: wait; if its holder gives way, publish.
	tb, sh, b1, b2 = setup()
	hold(sh, b2, 7)
	b2.keys[7].Store(h)
	hold(sh, b1, 1)
	done := make(chan probe)
	go func() {
		r, st := tb.publish(sh, b1, b2, b1, 1, h)
		if st == probeFound {
			r.Release()
		}
		done <- st
	}()
	b2.keys[7].Store(0) // the later holder gives way
	sh.count.Add(-1)
	b2.pins[7].Add(-pinLocked)
	if st := <-done; st != probeFound || b1.keys[1].Load() != h || b1.pins[1].Load() != 0 || sh.count.Load() != 1 {
		t.Fatalf("after the later copy gave way: status %v, key %x, pins %d, count %d", st, b1.keys[1].Load(), b1.pins[1].Load(), sh.count.Load())
	}

	// A copy held in a later slot that gets published instead: give way.
	tb, sh, b1, b2 = setup()
	hold(sh, b2, 4)
	b2.keys[4].Store(h)
	hold(sh, b1, 5)
	go func() {
		_, st := tb.publish(sh, b1, b2, b1, 5, h)
		done <- st
	}()
	b2.pins[4].Add(-pinLocked) // the later copy is published
	givesWay("later copy published while waiting", sh, b1, 5, <-done)
}

// TestTableCapacityAboveMaximumIsAnError: a capacity above
// MaxTableCapacity is an error before anything is allocated; without the
// bound, math.MaxInt overflowed the slot count (a panic) and 1<<40 was a
// fatal out-of-memory that no recover catches.
func TestTableCapacityAboveMaximumIsAnError(t *testing.T) {
	for _, c := range []int{MaxTableCapacity + 1, min(1<<40, math.MaxInt), math.MaxInt} {
		tb, err := NewTable[tstate](c, trecovered)
		if err == nil || tb != nil {
			t.Errorf("NewTable(%d): no error", c)
		}
	}
	tb, err := NewTable[tstate](1<<16, trecovered, WithShards(1<<16))
	if err != nil || tb.Stats().Capacity != 1<<16 {
		t.Fatalf("NewTable(1<<16) with one entry per shard: %v", err)
	}
}
