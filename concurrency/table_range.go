package concurrency

import "runtime"

// Range calls f with the hash and the state of every entry of the table,
// each pinned for the call (as by Lookup), until f returns false: for a
// reader that reports on the table (its hottest keys, say) at the time it
// asks, so that nothing is kept per decision. The hash is the key's 64-bit
// hash under the table's secret seed (see Table), never the key, which
// the table does not keep; LookupHash finds the entry again.
//
// Range visits each slot once, but it is not a snapshot: entries
// inserted, evicted or deleted while it runs may be seen or not (a key
// deleted and inserted again meanwhile may be seen twice, in two slots),
// and an entry held by a writer at the instant it is reached (an
// insertion, an eviction in progress) is skipped. It never waits and
// allocates nothing; it reads every slot (Slots), so it takes time in
// proportion to the capacity, not to the entries: about half a
// millisecond per 10^5 slots of a half-full table (BenchmarkTableRange,
// on a 2-core machine). f may call the table's other methods (a Delete of
// the entry it holds fails, as for any pinned entry). Safe for concurrent
// use with every other method.
func (t *Table[V, P]) Range(f func(hash uint64, v *V) bool) {
	for bi := range t.buckets {
		b := &t.buckets[bi]
		for i := range bucketSlots {
			h := b.keys[i].Load()
			if h == 0 {
				continue
			}
			r, st := pinSlot(b, i, h)
			if st != probeFound {
				continue // being written, or re-keyed since the load
			}
			more := f(h, r.v)
			r.Release()
			if !more {
				return
			}
		}
	}
}

// LookupHash is Lookup for an entry known by its hash, as Range reports
// it: it returns the pinned entry of that hash if there is one.
func (t *Table[V, P]) LookupHash(hash uint64) (r Ref[V], ok bool) {
	h := fixHash(hash)
	sh, i1, i2 := t.locate(h)
	b1, b2 := &sh.buckets[i1], &sh.buckets[i2]
	for {
		r, st := findSlot(b1, b2, h)
		if st != probeBusy {
			return r, st == probeFound
		}
		runtime.Gosched()
	}
}
