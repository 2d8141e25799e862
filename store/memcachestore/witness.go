package memcachestore

import "sync"

// witnessSlots is the size of a Store's table of witnesses: 1024 slots of
// 40 bytes.
const witnessSlots = 1024

// witnesses remembers, for the counters this Store charged lately, how
// many units it admitted on each in its window: a counter's value can
// never be lower than that (other instances only ever take back their own
// units), unless the counter was evicted, or reset. The table is a fixed
// array of slots, each a counter's (by a 64-bit tag of its key) until
// another counter's hash takes it: bounded memory, and a lost slot only
// misses a detection. A slot's mutex is held for a few instructions, never
// across a round trip.
type witnesses struct {
	slots [witnessSlots]witnessSlot
}

type witnessSlot struct {
	mu  sync.Mutex
	tag uint64
	gen uint64 // bumped by a Refund or Reset of this Store: snapshots before it are void
	sum int64  // units admitted here since the tag took the slot
}

// witness is a snapshot of one counter's slot, taken before its incr.
type witness struct {
	tag, gen uint64
	sum      int64
}

func (w *witnesses) slot(tag uint64) *witnessSlot { return &w.slots[tag%witnessSlots] }

// before returns the snapshot of tag's counter before a round trip.
func (w *witnesses) before(tag uint64) witness {
	s := w.slot(tag)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tag != tag {
		return witness{tag: tag, gen: s.gen}
	}
	return witness{tag: tag, gen: s.gen, sum: s.sum}
}

// lost reports whether value, read or returned by incr after snapshot b
// was taken (plus cost, the units this request added), is lower than the
// units admitted here before b: the counter was made anew. It then
// restarts the slot, so that one loss is reported once.
func (w *witnesses) lost(b witness, value, cost int64) bool {
	if b.sum == 0 || value >= b.sum+cost {
		return false
	}
	s := w.slot(b.tag)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != b.gen {
		return false // this Store refunded or reset meanwhile
	}
	if s.tag == b.tag {
		s.sum = 0
	}
	return true
}

// admitted records cost units admitted on tag's counter.
func (w *witnesses) admitted(tag uint64, cost int64) {
	s := w.slot(tag)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tag != tag {
		s.tag, s.sum = tag, 0
	}
	s.sum += cost
}

// gaveBack records that this Store takes cost units of tag's counter back
// (a Refund), or all of them (a Reset, cost < 0), before it does.
func (w *witnesses) gaveBack(tag uint64, cost int64) {
	s := w.slot(tag)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	if s.tag == tag {
		if cost < 0 {
			s.sum = 0
		} else {
			s.sum = max(0, s.sum-cost)
		}
	}
}
