package concurrency

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice/internal/allocsize"
)

// Overflow is what a Table does with a new key when it cannot admit it:
// the table (or the key's shard) holds its capacity of live entries and none
// of the key's candidate slots holds a recovered one.
type Overflow uint8

const (
	// OverflowReject makes Get report ok == false for a key that does not fit.
	OverflowReject Overflow = iota
	// OverflowShare makes every key that does not fit share one overflow
	// state (Ref.Overflow reports true for it). The shared state is never
	// reset or evicted.
	OverflowShare
)

// TableOption configures NewTable.
type TableOption interface{ apply(*tableConfig) }

type tableConfig struct {
	overflow Overflow
	shards   int // 0: default
}

type overflowOption Overflow

func (o overflowOption) apply(c *tableConfig) { c.overflow = Overflow(o) }

// WithOverflow sets the overflow policy; the default is OverflowReject.
func WithOverflow(o Overflow) TableOption { return overflowOption(o) }

type shardsOption int

func (n shardsOption) apply(c *tableConfig) { c.shards = int(n) }

// WithShards sets the number of shards, a power of two no larger than the
// capacity. The default is the power of two at or above GOMAXPROCS, lowered
// so that each shard holds at least 1,024 entries (one shard for small
// tables).
func WithShards(n int) TableOption { return shardsOption(n) }

const (
	// bucketSlots is the number of slots of a bucket: its eight keys fill one
	// 64-byte cache line, so a probe of a bucket reads one line.
	bucketSlots = 8
	// bucketLine is the cache line that buckets are laid out in: 64 bytes,
	// the line of x86 and of most arm64 parts. (cacheLine, twice that, is
	// the padding that keeps atomics apart, another concern.)
	bucketLine = 64
	// pinLocked is added to a slot's pin count by whoever holds it
	// exclusively. It is so negative that concurrent pinners, which add 1 and
	// undo on seeing a negative result, can never lift it to zero or above.
	pinLocked int32 = -1 << 30
	// slotsPerEntry4 is the number of slots per unit of capacity, times 4:
	// 5/4 slots per entry, so a full table is 80% occupied. With the
	// emptier-of-two-buckets placement this keeps both buckets of a new key
	// full (a spurious overflow) rare; TestTableLoad measures it.
	slotsPerEntry4 = 5
)

// bucket holds bucketSlots entries, keys first so that a probe touches one
// cache line. A key is a 64-bit keyed hash; 0 marks an empty slot. The pin
// counts are padded to the second line, so that a bucket is a whole number
// of lines when V's size is a multiple of 8 (almost any V): then every
// bucket's keys sit in one line, rather than every other bucket's keys
// straddling two.
type bucket[V any] struct {
	keys  [bucketSlots]atomic.Uint64
	pins  [bucketSlots]atomic.Int32
	_     [bucketLine - bucketSlots*4]byte
	state [bucketSlots]V
}

// tableShard is one shard: its buckets (a part of Table.buckets) and its
// share of the capacity.
type tableShard[V any] struct {
	_       [cacheLine]byte
	buckets []bucket[V]
	cap     int64
	// count is the number of entries of the shard, reservations included;
	// it never exceeds cap once a reservation is confirmed.
	count     atomic.Int64
	evictions atomic.Uint64
	overflows atomic.Uint64
}

// Table is a bounded table of per-key state V, for rate state per client
// (per IP, user, API key or tenant). It never holds more than its capacity
// of entries, and it evicts only entries whose state is recovered, that is
// indistinguishable from a fresh one. When it is full of live entries, a new
// key follows the overflow policy (reject, or share one overflow state): a
// flood of new keys never resets a client that is currently limited.
//
// Keys are not stored. The table keeps a 64-bit hash of each key, keyed
// with a per-table random seed (hash/maphash), so keys never need to be
// copied or retained and an attacker who does not know the seed cannot aim
// for collisions. Two keys with the same hash share one state; among n
// entries the probability of any collision is about n²/2^65 (about 2.7e-10
// for 10^5 entries).
//
// Get finds or inserts the key's entry and pins it: the Ref it returns
// points at the key's state until Release, and nobody can evict, delete or
// re-target that entry meanwhile. The state is shared by all goroutines that
// hold a Ref to the same key at once, so V itself must be safe for
// concurrent use (typically atomic words, like a ratelimit.GCRAState).
//
// Placement: a key's shard comes from its hash, and each shard holds an
// equal share of the capacity. Within the shard the key may live in any of
// the 16 slots of its two candidate buckets; a new key goes to the emptier
// one. Eviction looks at those 16 slots only. So a new key can overflow
// although the table is not full: when its shard holds its share, or when
// its two buckets are full of live entries (TestTableLoad, filling a
// one-shard table of 100,000 entries with keys that never recover, saw the
// first such overflow at 90-97% of the capacity and the table full after
// 10% more keys), or, rarely, when concurrent insertions take the last
// free slots of its buckets first; and a full table can overflow although
// recovered entries exist outside the key's buckets. None of these ever
// evicts or resets a live entry.
//
// Memory: capacity·5/4 slots, each 16 bytes (key, pin count and padding)
// plus the size of V, so 20 bytes plus 1.25 times the size of V per entry
// of capacity, preallocated by NewTable; nothing is allocated later. On
// Linux NewTable advises the buckets for transparent huge pages of 2 MiB,
// so that a lookup of a random key in a large table seldom misses the
// TLB: a capacity of 2·10^6 entries of 8 bytes, 60 MB, spans about 15,000
// pages of 4 KiB, far more than a TLB holds, and 30 huge ones. The bytes
// are the same, but the kernel makes them resident 2 MiB at a time (a
// large table holding few keys is resident sooner). Buckets in memory the
// Go heap reuses, resident already, are collapsed into huge pages by
// NewTable (a copy of the buckets, on Linux 6.1 and later; before, the
// kernel's khugepaged does it in time).
//
// Get, GetBytes, Lookup, LookupHash, Peek, Range, Delete, Len and Stats
// are safe for concurrent use and take no lock: a reader pins an entry
// with one atomic add (Peek does not even pin it), and writers
// (insertion, eviction, deletion) take a slot with one compare-and-swap and
// never wait for a pinned one. The only wait is a yield while another
// goroutine is in the middle of inserting, evicting or deleting an entry of
// the same key (a few stores). The zero value is not usable; call NewTable.
type Table[V any, P interface {
	*V
	Reset()
}] struct {
	seed maphash.Seed
	// buckets holds every bucket, the shards' in turn, so that Index is a
	// subtraction.
	buckets []bucket[V]
	shards  []tableShard[V]
	// h>>shardShift&shardMask is the shard of hash h: its top bits (a
	// shift of 0 and a mask of 0 for one shard).
	shardShift uint8
	shardMask  uint64
	capacity   int64
	overflow   Overflow
	recovered  func(v *V, now int64) bool
	// prefetch says that the buckets are too large to stay in a
	// processor's caches (prefetchBytes): Prefetch reads them.
	prefetch bool
	// shared is the overflow state of OverflowShare.
	shared V
}

// TableStats is a snapshot of a Table's counters.
type TableStats struct {
	// Entries is the number of entries held (including insertions in
	// progress).
	Entries int64
	// Capacity is the hard cap on entries.
	Capacity int64
	// Evictions counts recovered entries replaced by new keys.
	Evictions uint64
	// Overflows counts new keys that did not fit and were rejected or sent
	// to the shared overflow state.
	Overflows uint64
}

// MaxTableCapacity is the largest capacity NewTable accepts: 2^24
// (16,777,216) entries. A table preallocates 20 bytes plus 1.25 times the
// size of V per entry of capacity (see Table), so at this capacity one with
// an 8-byte state (a ratelimit.GCRAState or FixedWindowState) takes
// 480 MiB and one with a 16-byte state 640 MiB: a bound that keeps a
// mistyped capacity an error rather than an allocation the process cannot
// survive (1<<40 entries would be a fatal out-of-memory, which recover
// cannot catch).
const MaxTableCapacity = 1 << 24

// NewTable returns a Table that holds at most capacity entries of state V.
// The zero value of V is the fresh state; P's Reset sets a state back to
// fresh. recovered(v, now) reports whether state v is indistinguishable
// from a fresh one at now, so that its entry may be evicted; it is called
// only while the table holds the entry exclusively, on the eviction path,
// and like Reset it must not block or panic.
//
// NewTable returns an error, before allocating anything, when capacity is
// not positive or is above MaxTableCapacity, recovered is nil, the overflow
// policy is unknown or the shard count is not a power of two between 1 and
// capacity.
func NewTable[V any, P interface {
	*V
	Reset()
}](capacity int, recovered func(v *V, now int64) bool, opts ...TableOption) (*Table[V, P], error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("concurrency: table capacity must be positive, got %d", capacity)
	}
	if capacity > MaxTableCapacity {
		return nil, fmt.Errorf("concurrency: table capacity %d is above the supported %d", capacity, MaxTableCapacity)
	}
	if recovered == nil {
		return nil, errors.New("concurrency: table needs a recovered func")
	}
	var cfg tableConfig
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("concurrency: nil TableOption")
		}
		o.apply(&cfg)
	}
	if cfg.overflow > OverflowShare {
		return nil, fmt.Errorf("concurrency: unknown overflow policy %d", cfg.overflow)
	}
	n := cfg.shards
	if n == 0 {
		n = defaultShards(capacity)
	} else if n < 0 || n&(n-1) != 0 || n > capacity {
		return nil, fmt.Errorf("concurrency: table shards must be a power of two between 1 and the capacity (%d), got %d", capacity, n)
	}
	t := &Table[V, P]{
		seed:       maphash.MakeSeed(),
		shards:     make([]tableShard[V], n),
		shardShift: uint8(64-bits.TrailingZeros(uint(n))) & 63,
		shardMask:  uint64(n - 1),
		capacity:   int64(capacity),
		overflow:   cfg.overflow,
		recovered:  recovered,
	}
	t.buckets = make([]bucket[V], totalBuckets(capacity, n))
	t.prefetch = int64(len(t.buckets))*int64(unsafe.Sizeof(bucket[V]{})) >= prefetchBytes
	// Before the first touch, so that the pages come huge (see
	// adviseHugePages); a small table, or another OS, keeps small pages.
	adviseHugePages(t.buckets)
	next := t.buckets
	for i := range t.shards {
		c, nb := shardBuckets(capacity, n, i)
		t.shards[i].cap = int64(c)
		t.shards[i].buckets, next = next[:nb:nb], next[nb:]
	}
	return t, nil
}

// defaultShards is the shard count of a table of capacity without
// WithShards (see WithShards).
func defaultShards(capacity int) int {
	n := 1 << bits.Len(uint(max(1, runtime.GOMAXPROCS(0))-1))
	for n > 1 && capacity/n < 1024 {
		n /= 2
	}
	return n
}

// shardBuckets returns the capacity and the buckets of shard i of n of a
// table of capacity.
func shardBuckets(capacity, n, i int) (c, nb int) {
	c = capacity / n
	if i < capacity%n {
		c++
	}
	return c, max(1, (c*slotsPerEntry4/4+bucketSlots-1)/bucketSlots)
}

func totalBuckets(capacity, n int) int {
	total := 0
	for i := range n {
		_, nb := shardBuckets(capacity, n, i)
		total += nb
	}
	return total
}

// TableBytes returns the bytes NewTable preallocates for a table of
// capacity entries of state V with the default shards (at the current
// GOMAXPROCS): its buckets, 5/4 slots per entry rounded up to whole
// buckets in each shard, each slot 16 bytes plus the size of V (see
// Table). A state that points to memory of its own (the ring of a
// ratelimit.SlidingLogState) costs that memory on top. It returns the error NewTable would for a
// capacity that is not positive or is above MaxTableCapacity.
func TableBytes[V any](capacity int) (int64, error) {
	if capacity <= 0 {
		return 0, fmt.Errorf("concurrency: table capacity must be positive, got %d", capacity)
	}
	if capacity > MaxTableCapacity {
		return 0, fmt.Errorf("concurrency: table capacity %d is above the supported %d", capacity, MaxTableCapacity)
	}
	// At most 2^24·5/4/8 buckets of a few KiB: no overflow.
	n := defaultShards(capacity)
	return AllocBytes(int64(totalBuckets(capacity, n))*int64(unsafe.Sizeof(bucket[V]{}))) +
		AllocBytes(int64(n)*int64(unsafe.Sizeof(tableShard[V]{}))) + AllocBytes(tableHeader+int64(unsafe.Sizeof(*new(V)))), nil
}

// tableHeader bounds the fields of a Table other than its shared state V.
const tableHeader = 128

// AllocBytes returns the memory an allocation of n bytes takes: n rounded
// up to the Go allocator's size class, as append rounds a slice's capacity
// (measured so, on a small allocation), or to whole 8 KiB pages above
// 32 KiB, the largest size class. Sizes of memory bounds use it, so that a
// bound is one.
func AllocBytes(n int64) int64 { return allocsize.Of(n) }

// Ref is a pinned reference to one key's state, returned by Get and Lookup.
// It must be released exactly once with Release; the zero Ref is inert.
type Ref[V any] struct {
	v    *V
	pins *atomic.Int32 // nil for the shared overflow state
}

// Value returns the key's state. It is valid until Release.
func (r Ref[V]) Value() *V { return r.v }

// Overflow reports whether r is the shared overflow state of OverflowShare.
func (r Ref[V]) Overflow() bool { return r.v != nil && r.pins == nil }

// Release unpins the entry. Releasing a Ref twice is a programmer error; it
// panics when it is detected (the entry was pinned by no one else).
func (r Ref[V]) Release() {
	if r.pins == nil {
		return
	}
	if r.pins.Add(-1) == -1 {
		r.pins.Add(1)
		panic("concurrency: Ref released more than once")
	}
}

// hash returns the key's slot hash: never 0, which marks an empty slot.
func fixHash(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// Get returns the entry of key, inserting a fresh one if the key is absent,
// and pins it. When the key does not fit (see Overflow), Get returns the
// shared overflow state under OverflowShare and ok == false under
// OverflowReject. now is the time handed to recovered when Get has to
// evict. Get allocates nothing.
func (t *Table[V, P]) Get(key string, now int64) (r Ref[V], ok bool) {
	return t.get(fixHash(maphash.String(t.seed, key)), now)
}

// GetBytes is Get for a key held in a byte slice; it does not allocate and
// does not retain key.
func (t *Table[V, P]) GetBytes(key []byte, now int64) (r Ref[V], ok bool) {
	return t.get(fixHash(maphash.Bytes(t.seed, key)), now)
}

// Lookup returns the pinned entry of key if there is one. It never inserts
// and never returns the overflow state.
func (t *Table[V, P]) Lookup(key string) (r Ref[V], ok bool) {
	h := fixHash(maphash.String(t.seed, key))
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

// Peek finds the entry of key without pinning it, for a reader of a few
// words of the state that can do without Lookup's two atomic adds (and the
// cache line they take from other cores). It writes nothing, never inserts
// and never returns the overflow state; ok is false when the key has no
// entry. What is read through the PeekRef counts only when validated as
// PeekRef describes. Peek probes the key's two candidate buckets together,
// so that their cache misses overlap.
func (t *Table[V, P]) Peek(key string) (p PeekRef[V], ok bool) {
	h := fixHash(maphash.String(t.seed, key))
	sh, i1, i2 := t.locate(h)
	b1, b2 := &sh.buckets[i1], &sh.buckets[i2]
	for i := range bucketSlots {
		k1, k2 := b1.keys[i].Load(), b2.keys[i].Load()
		if k1 == h {
			return PeekRef[V]{b: b1, h: h, i: uint64(i)}, true
		}
		if k2 == h {
			return PeekRef[V]{b: b2, h: h, i: uint64(i)}, true
		}
	}
	return PeekRef[V]{}, false
}

// PeekRef is an unpinned reference to a slot where Peek found a key. The
// slot may be evicted, deleted or given to another key at any moment, so a
// reader validates what it reads, as with a seqlock. The table promises:
//
//   - it changes a slot's key only while it holds the slot exclusively,
//     that is while no Ref to it is held;
//   - it writes a slot's state only by calling Reset, while it holds the
//     slot and before it stores the slot's new key, never after.
//
// A slot that shows the key may still be held by the table, for an
// insertion that has not published it yet (perhaps a duplicate that it
// will withdraw): its state is then freshly Reset, but it is not the key's
// entry. So V itself must say when it is readable. A V that works: a
// version that only grows, which Reset sets to a new odd value before its
// first write, and which a holder of a Ref to the key sets to the next
// (even) value once Get or Lookup has returned the entry. A reader loads
// the version (gives up if odd), checks Current (gives up if false), loads
// the words it needs, and loads the version again (gives up if changed).
//
// Then each word read was the key's own, as it was at the instant of its
// load. The version was even and did not change, so no Reset began in
// between, and the last Reset before was followed by a holder's mark,
// hence by the store of the slot's key and its publication. A new key
// needs a new Reset first, so the key that Current saw was the slot's key
// from that mark until the second version load (or until a deletion,
// which writes no state), and every write to the state in between came
// from a holder of a Ref to that key. Giving up means asking Lookup.
type PeekRef[V any] struct {
	b *bucket[V]
	h uint64
	i uint64 // the slot in b, below bucketSlots
}

// Value returns the state in the slot; see PeekRef for how to read it.
func (p PeekRef[V]) Value() *V { return &p.b.state[p.i%bucketSlots] }

// Current reports whether the slot still holds the key (not that the key
// is published there; see PeekRef).
func (p PeekRef[V]) Current() bool { return p.b.keys[p.i%bucketSlots].Load() == p.h }

// Delete removes the entry of key and reports whether it did. It waits for
// no one: it fails, returning false, when the entry is pinned or in the
// middle of an insertion, and when there is no entry.
func (t *Table[V, P]) Delete(key string) bool {
	h := fixHash(maphash.String(t.seed, key))
	sh, i1, i2 := t.locate(h)
	b1, b2 := &sh.buckets[i1], &sh.buckets[i2]
	for _, b := range [2]*bucket[V]{b1, b2} {
		for i := range b.keys {
			if b.keys[i].Load() != h {
				continue
			}
			// CAS 0 -> locked: take the slot only if nobody pins it.
			if !b.pins[i].CompareAndSwap(0, pinLocked) {
				return false
			}
			if b.keys[i].Load() != h { // re-keyed before we took it
				b.pins[i].Add(-pinLocked)
				continue
			}
			b.keys[i].Store(0)
			sh.count.Add(-1)
			b.pins[i].Add(-pinLocked)
			return true
		}
		if b2 == b1 {
			break
		}
	}
	return false
}

// Slots returns the number of slots: capacity·5/4, rounded up to whole
// buckets. It bounds Index.
func (t *Table[V, P]) Slots() int { return len(t.buckets) * bucketSlots }

// Index returns the number, in [0, Slots()), of the slot whose state v
// points to: a pointer from Ref.Value or PeekRef.Value, or the one handed
// to recovered. It returns -1 for any other pointer, the shared overflow
// state's included. A slot keeps its number for the life of the table, so
// a caller may keep more per-key data than V holds in an array of Slots()
// elements beside the table. The table does not know that data: when it
// gives the slot to a new key it resets V only, so V must tell whether the
// data beside it is stale (see penalty.Box for one way). The states of a
// V of size zero share one address: Index returns -1 for them.
func (t *Table[V, P]) Index(v *V) int {
	var b *bucket[V] // only for the sizes: never dereferenced
	size, first, each := unsafe.Sizeof(*b), unsafe.Offsetof(b.state), unsafe.Sizeof(b.state[0])
	// Arithmetic on addresses inside t.buckets, never turned back into a
	// pointer; the heap does not move.
	off := uintptr(unsafe.Pointer(v)) - uintptr(unsafe.Pointer(unsafe.SliceData(t.buckets)))
	if each == 0 || off >= uintptr(len(t.buckets))*size || off%size < first {
		return -1
	}
	return int(off/size)*bucketSlots + int((off%size-first)/each)
}

// Len returns the number of entries.
func (t *Table[V, P]) Len() int {
	var n int64
	for i := range t.shards {
		n += t.shards[i].count.Load()
	}
	return int(n)
}

// Stats returns a snapshot of the table's counters; each is read
// atomically, the set is not read at one instant.
func (t *Table[V, P]) Stats() TableStats {
	s := TableStats{Capacity: t.capacity}
	for i := range t.shards {
		sh := &t.shards[i]
		s.Entries += sh.count.Load()
		s.Evictions += sh.evictions.Load()
		s.Overflows += sh.overflows.Load()
	}
	return s
}

// prefetchBytes is the size of buckets from which Prefetch reads them:
// below it a table mostly stays in a processor's caches, where Prefetch's
// second hash of the key costs more than the misses it would overlap
// (three tables of 20,000 keys, 1.2 MB each, decided together: 218 ns
// without it, 236-245 with it; of 100,000 keys, 6 MB each: 563 and 481).
const prefetchBytes = 4 << 20

// Prefetch reads, and discards, the memory that a Get, Lookup or Peek of
// key reads first: the keys, pin counts and states of its two candidate
// buckets. A caller about to look up several keys, in several tables,
// calls it for each of them first, so that their cache misses overlap
// rather than follow one another: three per-key token buckets of 10^6
// keys each, decided together through store.Memory, took 884 ns without
// and 731 ns with it (the bench module's Keyed1e6Layered). It does nothing for a table of less than 4 MiB of
// buckets, which mostly stays in the caches. Prefetch changes nothing,
// allocates nothing and is safe for concurrent use.
func (t *Table[V, P]) Prefetch(key string) {
	if !t.prefetch {
		return
	}
	sh, i1, i2 := t.locate(fixHash(maphash.String(t.seed, key)))
	touchBucket(&sh.buckets[i1])
	touchBucket(&sh.buckets[i2])
}

// Prefetches reports whether Prefetch reads anything: whether the table
// has 4 MiB of buckets or more. A caller that would call Prefetch for
// several keys skips the calls when it says no.
func (t *Table[V, P]) Prefetches() bool { return t.prefetch }

// touchBucket loads a word of each line that a probe of b reads: its
// keys, its pin counts, and the first and last words of its states (all
// of them for states of up to 16 bytes). The loads are atomic so that the
// compiler keeps them. The states are read only where the race detector
// is off: a state is written without atomics while its slot is held, and
// a racing read, although discarded, would be reported.
func touchBucket[V any](b *bucket[V]) {
	b.keys[0].Load()
	b.pins[0].Load()
	if !raceEnabled && unsafe.Sizeof(b.state) >= 4 {
		p := unsafe.Pointer(&b.state)
		atomic.LoadUint32((*uint32)(p))
		atomic.LoadUint32((*uint32)(unsafe.Add(p, unsafe.Sizeof(b.state)-4)))
	}
}

// locate returns the shard of hash h and the numbers of its two candidate
// buckets there: the shard from the top bits, the buckets from two
// independent mixes of h (multiply-shift ranges them without a division).
// It is small enough to be inlined.
func (t *Table[V, P]) locate(h uint64) (sh *tableShard[V], i1, i2 uint64) {
	sh = &t.shards[h>>(t.shardShift&63)&t.shardMask]
	nb := uint64(len(sh.buckets))
	i1 = (uint64(uint32(h)) * nb) >> 32
	i2 = (((h * 0x9e3779b97f4a7c15) >> 32) * nb) >> 32
	if i2 == i1 { // the next bucket instead (the same one if it is the only one)
		if i2++; i2 == nb {
			i2 = 0
		}
	}
	return sh, i1, i2
}

type probe uint8

const (
	probeMiss probe = iota
	probeFound
	probeBusy // the key's slot is held exclusively for the moment
)

// findSlot pins the slot of h in b1 or b2. It probes both buckets in one
// loop, so that the loads from the second do not wait for the comparisons
// of the first and their cache misses overlap.
func findSlot[V any](b1, b2 *bucket[V], h uint64) (Ref[V], probe) {
	for i := range bucketSlots {
		k1, k2 := b1.keys[i].Load(), b2.keys[i].Load()
		if k1 == h {
			if r, st := pinSlot(b1, i, h); st != probeMiss {
				return r, st
			}
		}
		if k2 == h && b2 != b1 {
			if r, st := pinSlot(b2, i, h); st != probeMiss {
				return r, st
			}
		}
	}
	return Ref[V]{}, probeMiss
}

// pinSlot pins slot i of b, where the key h was just seen.
func pinSlot[V any](b *bucket[V], i int, h uint64) (Ref[V], probe) {
	p := &b.pins[i]
	if p.Add(1) < 0 { // held exclusively: undo, the holder is about to re-key or publish
		p.Add(-1)
		return Ref[V]{}, probeBusy
	}
	if b.keys[i].Load() != h { // re-keyed between the load and the pin
		p.Add(-1)
		return Ref[V]{}, probeMiss
	}
	return Ref[V]{v: &b.state[i], pins: p}, probeFound
}

func (t *Table[V, P]) get(h uint64, now int64) (Ref[V], bool) {
	sh, i1, i2 := t.locate(h)
	b1, b2 := &sh.buckets[i1], &sh.buckets[i2]
	for {
		r, st := findSlot(b1, b2, h)
		switch st {
		case probeFound:
			return r, true
		case probeBusy:
			runtime.Gosched()
			continue
		}
		r, st = t.insert(sh, b1, b2, h, now)
		switch st {
		case probeFound:
			return r, true
		case probeBusy: // lost a race for the same key: find it again
			continue
		}
		sh.overflows.Add(1)
		if t.overflow == OverflowShare {
			return Ref[V]{v: &t.shared}, true
		}
		return Ref[V]{}, false
	}
}

// insert places h in an empty slot of b1 or b2 if the shard's cap allows,
// else in place of a recovered entry of b1 or b2. It returns probeFound with
// the pinned new entry, probeBusy when it gave way to a concurrent insertion
// of the same key, probeMiss when the key does not fit.
func (t *Table[V, P]) insert(sh *tableShard[V], b1, b2 *bucket[V], h uint64, now int64) (Ref[V], probe) {
	if sh.reserve() {
		// Emptier bucket first (two-choice placement keeps buckets level).
		first, second := b1, b2
		if freeSlots(b2) > freeSlots(b1) {
			first, second = b2, b1
		}
		for _, b := range [2]*bucket[V]{first, second} {
			for i := range b.keys {
				if b.keys[i].Load() != 0 {
					continue
				}
				// CAS 0 -> locked: take the empty slot unless someone pins it.
				if !b.pins[i].CompareAndSwap(0, pinLocked) {
					continue
				}
				if b.keys[i].Load() != 0 { // filled before we took it
					b.pins[i].Add(-pinLocked)
					continue
				}
				return t.publish(sh, b1, b2, b, i, h)
			}
			if b2 == b1 {
				break
			}
		}
		sh.count.Add(-1)
	}
	// Full: replace a recovered entry of the two buckets, if any.
	for _, b := range [2]*bucket[V]{b1, b2} {
		for i := range b.keys {
			if k := b.keys[i].Load(); k == 0 || k == h {
				continue
			}
			// CAS 0 -> locked: only an entry nobody pins may be examined and evicted.
			if !b.pins[i].CompareAndSwap(0, pinLocked) {
				continue
			}
			if k := b.keys[i].Load(); k == 0 || k == h || !t.recovered(&b.state[i], now) {
				b.pins[i].Add(-pinLocked)
				continue
			}
			sh.evictions.Add(1) // the count stays: one entry out, one in

			return t.publish(sh, b1, b2, b, i, h)
		}
		if b2 == b1 {
			break
		}
	}
	return Ref[V]{}, probeMiss
}

// reserve takes one unit of the shard's capacity if one is left.
func (sh *tableShard[V]) reserve() bool {
	for {
		c := sh.count.Load()
		if c >= sh.cap {
			return false
		}
		// CAS c -> c+1: reserve only while under the cap, so that the count,
		// and with it Len, never exceeds the capacity even for an instant.
		if sh.count.CompareAndSwap(c, c+1) {
			return true
		}
	}
}

func freeSlots[V any](b *bucket[V]) int {
	n := 0
	for i := range b.keys {
		if b.keys[i].Load() == 0 {
			n++
		}
	}
	return n
}

// publish writes h and a fresh state into slot i of b, which the caller
// holds exclusively and has counted, then resolves a race with concurrent
// insertions of the same key before it makes the slot visible: two inserters
// that missed each other may have placed h in two slots. Each writes its key
// before it scans (sequentially consistent atomics), so at least one sees
// the other. An inserter gives way (empties its slot) when it sees h already
// published, or held in a slot that comes earlier in the (b1, b2) order; it
// waits while h is held in a later slot, whose holder will either give way
// to it or re-key the slot. So exactly one copy is published, and no holder
// waits on an earlier one (no cycle).
func (t *Table[V, P]) publish(sh *tableShard[V], b1, b2, b *bucket[V], i int, h uint64) (Ref[V], probe) {
	// Reset before the key is stored, never after: Peek's readers rely on
	// it (see PeekRef).
	P(&b.state[i]).Reset()
	b.keys[i].Store(h)
	mine := slotOrder(b1, b2, b, i)
	for {
		wait := false
		for _, c := range [2]*bucket[V]{b1, b2} {
			for j := range c.keys {
				if (c == b && j == i) || c.keys[j].Load() != h {
					continue
				}
				if c.pins[j].Load() >= 0 || slotOrder(b1, b2, c, j) < mine {
					b.keys[i].Store(0)
					sh.count.Add(-1)
					b.pins[i].Add(-pinLocked)
					return Ref[V]{}, probeBusy
				}
				wait = true
			}
			if b2 == b1 {
				break
			}
		}
		if !wait {
			break
		}
		runtime.Gosched()
	}
	// From held to pinned once, in one add: no instant in which another
	// inserter could evict the fresh (and perhaps already recovered) entry.
	b.pins[i].Add(1 - pinLocked)
	return Ref[V]{v: &b.state[i], pins: &b.pins[i]}, probeFound
}

// slotOrder ranks slot j of bucket c among the candidates b1 then b2.
func slotOrder[V any](b1, b2, c *bucket[V], j int) int {
	if c == b1 {
		return j
	}
	return bucketSlots + j
}
