package shed

import (
	"runtime"

	"github.com/sluicehq/sluice/concurrency"
)

// permits is the semaphore of a Global Concurrency rule: one word
// (concurrency.Semaphore) or shard-local caches
// (concurrency.ShardedSemaphore), exactly one of them set. Both bound the
// permits held exactly (never more than the limit in force at each
// admission, a lowered limit admitting nothing until fewer are held); the
// sharded one spares the cores admitting at once one contended word, at
// the price of a slower serial round trip, so newPermits picks it only
// where it pays (see shardedFrom). The zero value is no semaphore (ok
// reports false). Safe for concurrent use, as its semaphore is.
type permits struct {
	one     *concurrency.Semaphore
	sharded *concurrency.ShardedSemaphore
}

// minShardCache is the fewest permits a shard cache of a sharded rule
// holds at its high-water mark (limit / (2·shards)): below that, with the
// permits held near the limit, admissions mostly miss their shard and scan
// the others, losing what sharding wins.
const minShardCache = 4

// shardedFrom returns the smallest limit at which a Global Concurrency rule
// without a queue decides on the sharded semaphore at the current
// GOMAXPROCS, and 0 when none does: with one P no two cores admit at once,
// and the single word, faster serially, stays.
func shardedFrom() int64 {
	if runtime.GOMAXPROCS(0) == 1 {
		return 0
	}
	s, err := concurrency.NewShardedSemaphore(1)
	if err != nil {
		return 0 // a limit of 1 and the default count: never
	}
	return int64(2 * minShardCache * s.Shards())
}

// newPermits returns the semaphore of Global Concurrency rule r: sharded
// when r has no queue (MaxWait 0) and its limit reaches shardedFrom. A rule
// with a queue keeps the single word, which the queue calls without an
// interface call and which its lanes, reserves and fair share were measured
// on. It returns the concurrency package's error for a limit out of range.
func newPermits(r Rule) (permits, error) {
	if from := shardedFrom(); from > 0 && r.Limit >= from && r.MaxWait == 0 {
		s, err := concurrency.NewShardedSemaphore(r.Limit)
		return permits{sharded: s}, err
	}
	s, err := concurrency.NewSemaphore(r.Limit)
	return permits{one: s}, err
}

func (p permits) ok() bool { return p.one != nil || p.sharded != nil }

// TryAcquire admits n units, on shard i of a sharded semaphore: the
// attempt's ticket's, so that Release, made at another stack depth (in
// Token.Done), gives them back to the cache they came from. Picked from
// the stack instead, the two sides of a round trip through the Controller
// met on one shard so rarely that in a serial run every acquire went to
// the central pool.
func (p permits) TryAcquire(i uint64, n int64) bool {
	if p.sharded != nil {
		return p.sharded.TryAcquireShard(i, n)
	}
	return p.one.TryAcquire(n)
}

// Release gives back n units acquired on shard i.
func (p permits) Release(i uint64, n int64) {
	if p.sharded != nil {
		p.sharded.ReleaseShard(i, n)
		return
	}
	p.one.Release(n)
}

// SetLimit changes the limit in place, keeping the permits held (see the
// semaphores' SetLimit).
func (p permits) SetLimit(limit int64) error {
	if p.sharded != nil {
		return p.sharded.SetLimit(limit)
	}
	return p.one.SetLimit(limit)
}

// Inflight returns the permits held: exact when the semaphore is quiet.
func (p permits) Inflight() int64 {
	if p.sharded != nil {
		return p.sharded.Inflight()
	}
	return p.one.Inflight()
}

// Limit returns the current limit.
func (p permits) Limit() int64 {
	if p.sharded != nil {
		return p.sharded.Limit()
	}
	return p.one.Limit()
}
