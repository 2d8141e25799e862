package concurrency

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// ShardedSemaphore bounds weighted inflight work like Semaphore, with the
// permits spread over shard-local caches so that callers on different cores
// do not all write one word.
//
// The bound is exact: the permits in the shard caches plus those in a
// central pool plus those inflight always add up to the limit (plus a debt
// while a shrink is being paid off), and a caller is admitted only by
// taking permits that exist. TryAcquire picks a shard from its goroutine's
// stack address (so one goroutine's acquire and release, made at about the
// same stack depth, meet on one line) and takes from its cache with one
// atomic add on the shard's own cache line. An empty cache falls back to
// the central pool, then steals from the other shards, and a weighted
// request gathers units from several, before it rejects. Release adds the units to the caller's shard's cache up to a
// high-water mark (limit/(2·shards), at least 1) and hands the excess to
// the pool; while a shrink is being paid off it pays the debt first.
//
// When it rejects although permits exist: the scan of pool and shards is
// not one atomic snapshot, so a request can be rejected while units are
// released into a shard it has already passed; a failed fast-path attempt
// leaves its shard short for an instant, which a concurrent caller of that
// shard can see; and units on their way from a cache over its high-water
// mark to the pool, or held by a weighted request that is gathering them,
// are invisible for that moment. Fairness: a goroutine sticks to its shard,
// and the steal scan starts there and goes round all shards; callers whose
// shard holds units are served first, there is no queue and no ordering
// between callers, and a large request competes with a stream of small
// ones and can starve (as with Semaphore).
//
// Where it pays: a round trip here is one atomic add on the caller's shard
// line each way, plus the stack-address hash and loads of read-mostly
// words; Semaphore's is two atomic adds on one shared word. Used serially
// that word stays in one core's cache and Semaphore wins; once two cores
// admit at once its line bounces between them, and this one wins on two
// cores already. On the 2-core virtual machine this was developed on
// (shared with other jobs, so noisy), the bench module's
// BenchmarkTryAcquireRelease in four sets of 11 to 16 interleaved runs of
// 200 or 300 ms, gated on an otherwise idle machine: serially Semaphore
// took 10.4 to 11.4 ns (the sets' medians) against 18.8 to 22.3 ns here;
// with b.RunParallel Semaphore took 28 to 38 ns against 9.6 to 11.1 ns
// here, and 55 of 57 parallel runs of this one stayed within 6.3 to
// 13.3 ns (the other two took 20 and 32 ns). Before shards were picked by
// 2 KiB stack block, two goroutines often shared one: 37 of 59 parallel
// runs took 19 to 44 ns. Under the default shard count, up to GOMAXPROCS
// goroutines on adjacent stacks, as goroutines started together often are,
// never share a shard; two others meet about once in the shard count (1 in
// 8 at GOMAXPROCS 2) and then contend on one line, as on Semaphore's word.
// It has not been measured on a many-core machine: prefer Semaphore for
// serial use, this one where several cores admit against one limit at
// once.
//
// TryAcquire and Release (and their Shard forms) take no lock and allocate nothing; SetLimit takes
// a mutex (shared only with other SetLimit calls). A ShardedSemaphore is
// safe for concurrent use. The zero value is not usable; call
// NewShardedSemaphore. Releasing more than is held breaks the bound and is
// not detected.
type ShardedSemaphore struct {
	_ [cacheLine]byte
	// Read on every call, written only by SetLimit and while a shrink is
	// paid off: a line that stays shared in every core's cache.
	limit      atomic.Int64
	high       atomic.Int64 // high-water mark of a shard cache
	debt       atomic.Int64 // units still owed after a shrink
	mask       uint64
	onCapacity hookSlot
	_          [cacheLine]byte
	pool       atomic.Int64 // written on the slow paths only
	_          [cacheLine - 8]byte
	shards     []counterShard
	mu         sync.Mutex // serialises SetLimit
}

// NewShardedSemaphore returns a ShardedSemaphore that admits up to limit
// units at once. It returns an error when limit is not positive or is
// above MaxSemaphoreLimit, or when the shard count (WithShardCount) is not a
// power of two.
func NewShardedSemaphore(limit int64, opts ...ShardedOption) (*ShardedSemaphore, error) {
	if err := checkSemaphoreLimit(limit); err != nil {
		return nil, err
	}
	n, err := shardCount(opts)
	if err != nil {
		return nil, err
	}
	s := &ShardedSemaphore{shards: make([]counterShard, n), mask: uint64(n - 1)}
	s.limit.Store(limit)
	s.high.Store(s.highWater(limit))
	s.pool.Store(limit)
	return s, nil
}

func (s *ShardedSemaphore) highWater(limit int64) int64 {
	return max(1, limit/int64(2*len(s.shards)))
}

// TryAcquire admits n units if that keeps inflight within the limit and
// reports whether it did. It never blocks. A request above the limit is
// refused whatever its size (up to math.MaxInt64). TryAcquire(0) admits
// nothing and returns true. It panics when n is negative.
func (s *ShardedSemaphore) TryAcquire(n int64) bool {
	if n <= 0 {
		if n < 0 {
			panic("concurrency: ShardedSemaphore.TryAcquire with negative n")
		}
		return true
	}
	if n > MaxSemaphoreLimit {
		// Above any limit. Never subtracted: concurrent optimistic takes of
		// huge n would wrap a shard's word back to a positive count.
		return false
	}
	return s.tryAcquire(&s.shards[pickShard(s.mask)], n)
}

// TryAcquireShard is TryAcquire on the cache of shard i modulo Shards,
// instead of the one picked from the calling goroutine's stack: for a
// caller whose acquire and release are made at different stack depths (or
// on different goroutines), which would land on different shards and move
// the units through the central pool on every round trip. It passes the
// same i to ReleaseShard; callers running at once on different cores pass
// different i's, or they meet on one line.
func (s *ShardedSemaphore) TryAcquireShard(i uint64, n int64) bool {
	if n <= 0 {
		if n < 0 {
			panic("concurrency: ShardedSemaphore.TryAcquireShard with negative n")
		}
		return true
	}
	if n > MaxSemaphoreLimit {
		return false // as in TryAcquire
	}
	return s.tryAcquire(&s.shards[i&s.mask], n)
}

// tryAcquire admits n (0 < n <= MaxSemaphoreLimit) from home first.
func (s *ShardedSemaphore) tryAcquire(home *counterShard, n int64) bool {
	// Optimistic add, undone on overshoot (one XADD, as in Semaphore). A
	// failed attempt leaves the cache short by n for an instant, which can
	// make a concurrent caller of this shard or a stealer miss units.
	if home.n.Add(-n) >= 0 {
		return s.kept(n)
	}
	home.n.Add(n)
	return s.acquireSlow(home, n)
}

// kept confirms n units just taken: a shrink that started before the take
// was visible makes the caller give them back towards the debt and fail.
// Checking after the take (and the shrink setting the debt before it
// drains) means any kept acquisition happened before the shrink began.
func (s *ShardedSemaphore) kept(n int64) bool {
	if s.debt.Load() == 0 {
		return true
	}
	s.deposit(nil, n)
	return false
}

func (s *ShardedSemaphore) acquireSlow(home *counterShard, n int64) bool {
	if s.debt.Load() > 0 {
		s.settle()
		if s.debt.Load() > 0 {
			return false
		}
	}
	if takeAll(&s.pool, n) {
		return s.kept(n)
	}
	start := pickShard(s.mask)
	for i := range uint64(len(s.shards)) {
		if takeAll(&s.shards[(start+i)&s.mask].n, n) { // steal from a shard that holds them
			return s.kept(n)
		}
	}
	if n == 1 {
		return false
	}
	// A weighted request may find its units scattered: gather them. Units
	// held here are invisible to others until deposited again.
	got := takeUpTo(&s.pool, n)
	for i := uint64(0); i < uint64(len(s.shards)) && got < n; i++ {
		got += takeUpTo(&s.shards[(start+i)&s.mask].n, n-got)
	}
	if got < n {
		home.n.Add(got) // back where the next caller of this shard finds them
		return false
	}
	return s.kept(n)
}

// takeAll takes n units from w if it holds them, and reports whether it did.
func takeAll(w *atomic.Int64, n int64) bool {
	for {
		c := w.Load()
		if c < n {
			return false
		}
		// CAS c -> c-n: take n only while w holds them.
		if w.CompareAndSwap(c, c-n) {
			return true
		}
	}
}

// takeUpTo takes at most want units from w and returns how many it took.
func takeUpTo(w *atomic.Int64, want int64) int64 {
	for {
		c := w.Load()
		if c <= 0 {
			return 0
		}
		t := min(c, want)
		// CAS c -> c-t: take no more than w holds.
		if w.CompareAndSwap(c, c-t) {
			return t
		}
	}
}

// payDebt pays up to m units of the debt and returns what is left of m.
func (s *ShardedSemaphore) payDebt(m int64) int64 {
	for m > 0 {
		d := s.debt.Load()
		if d <= 0 {
			break
		}
		pay := min(d, m)
		// CAS d -> d-pay: repay no more than is owed.
		if s.debt.CompareAndSwap(d, d-pay) {
			m -= pay
		}
	}
	return m
}

// deposit returns m units: first to the debt, then to home's cache up to
// the high-water mark, the rest to the pool.
func (s *ShardedSemaphore) deposit(home *counterShard, m int64) {
	if m = s.payDebt(m); m == 0 {
		return
	}
	if home != nil {
		// Add to the cache (one XADD) and hand what went over the
		// high-water mark on to the pool.
		hw := s.high.Load()
		c := home.n.Add(m)
		if c <= hw {
			return
		}
		// Take back only what is still there (callers of this shard may
		// have spent it already): a blind subtraction could leave the cache
		// negative while the pool counts the units, and the pool would then
		// admit units that do not exist.
		m = takeUpTo(&home.n, min(m, c-hw))
	}
	if m > 0 {
		s.pool.Add(m)
	}
}

// settle pays the debt from the pool and the caches.
func (s *ShardedSemaphore) settle() {
	s.settleFrom(&s.pool)
	for i := range s.shards {
		s.settleFrom(&s.shards[i].n)
	}
}

func (s *ShardedSemaphore) settleFrom(w *atomic.Int64) {
	d := s.debt.Load()
	if d <= 0 {
		return
	}
	if t := takeUpTo(w, d); t > 0 {
		if rest := s.payDebt(t); rest > 0 {
			s.pool.Add(rest)
		}
	}
}

// Release gives back n units acquired earlier. Release(0) does nothing; a
// negative n, or one above MaxSemaphoreLimit (more than any limit), panics.
func (s *ShardedSemaphore) Release(n int64) {
	if n <= 0 {
		if n < 0 {
			panic("concurrency: ShardedSemaphore.Release with negative n")
		}
		return
	}
	if n > MaxSemaphoreLimit {
		panic(fmt.Sprintf("concurrency: ShardedSemaphore.Release(%d) releases more than any limit", n))
	}
	s.release(&s.shards[pickShard(s.mask)], n)
}

// ReleaseShard is Release into the cache of shard i modulo Shards (see
// TryAcquireShard). Units may be released on another shard than the one
// they were acquired on; only the cache they warm differs.
func (s *ShardedSemaphore) ReleaseShard(i uint64, n int64) {
	if n <= 0 {
		if n < 0 {
			panic("concurrency: ShardedSemaphore.ReleaseShard with negative n")
		}
		return
	}
	if n > MaxSemaphoreLimit {
		panic(fmt.Sprintf("concurrency: ShardedSemaphore.ReleaseShard(%d) releases more than any limit", n))
	}
	s.release(&s.shards[i&s.mask], n)
}

// release deposits n (0 < n <= MaxSemaphoreLimit) at home and runs the
// capacity hook.
func (s *ShardedSemaphore) release(home *counterShard, n int64) {
	s.deposit(home, n)
	if g := s.onCapacity.gate.Load(); g != nil && g.Load() != 0 {
		s.onCapacity.run()
	}
}

// SetLimit changes the limit. Shrinking never revokes permits already held:
// the difference becomes a debt, paid from free units and from releases
// first, and nothing is admitted until it is paid, that is until inflight is
// under the new limit. It returns an error when limit is not positive or is
// above MaxSemaphoreLimit, and leaves the limit unchanged then.
func (s *ShardedSemaphore) SetLimit(limit int64) error {
	if err := checkSemaphoreLimit(limit); err != nil {
		return err
	}
	s.mu.Lock()
	old := s.limit.Load()
	switch {
	case limit < old:
		// Debt first, then the new limit: an acquirer that checks the debt
		// after taking units and sees none took them before this shrink.
		s.debt.Add(old - limit)
		s.limit.Store(limit)
		s.high.Store(s.highWater(limit))
		s.settle()
	case limit > old:
		if rest := s.payDebt(limit - old); rest > 0 {
			s.pool.Add(rest)
		}
		s.high.Store(s.highWater(limit))
		s.limit.Store(limit)
	}
	s.mu.Unlock()
	if limit > old {
		if g := s.onCapacity.gate.Load(); g != nil && g.Load() != 0 {
			s.onCapacity.run()
		}
	}
	return nil
}

// Limit returns the current limit.
func (s *ShardedSemaphore) Limit() int64 { return s.limit.Load() }

// Shards returns the number of shard-local caches.
func (s *ShardedSemaphore) Shards() int { return len(s.shards) }

// Inflight returns the units currently held. It adds up several words that
// are not read at one instant, so under concurrent use it is approximate;
// when the semaphore is quiet it is exact.
func (s *ShardedSemaphore) Inflight() int64 {
	free := s.pool.Load()
	for i := range s.shards {
		free += s.shards[i].n.Load()
	}
	return s.limit.Load() - free + s.debt.Load()
}

// Available returns how many units could be admitted right now: zero while
// a shrink is being paid off. Like Inflight it is exact only when quiet.
func (s *ShardedSemaphore) Available() int64 {
	if s.debt.Load() > 0 {
		return 0
	}
	free := max(0, s.pool.Load())
	for i := range s.shards {
		free += max(0, s.shards[i].n.Load())
	}
	return free
}

// OnCapacity registers f to be called after every Release and every
// SetLimit that raises the limit, like Semaphore.OnCapacity. A second
// non-nil hook is refused with ErrHookInUse; OnCapacity(nil) removes it.
func (s *ShardedSemaphore) OnCapacity(f func()) error {
	return s.onCapacity.register(f, nil)
}

// OnCapacityWhile registers f gated by waiting, like
// Semaphore.OnCapacityWhile: f runs only when *waiting is not zero after the
// capacity was freed.
func (s *ShardedSemaphore) OnCapacityWhile(waiting *atomic.Int64, f func()) error {
	return s.onCapacity.register(f, waiting)
}
