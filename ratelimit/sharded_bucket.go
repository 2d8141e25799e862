package ratelimit

import (
	"fmt"
	"math"
	"time"
)

// ShardedBucket is an exact token bucket for global caps (the whole
// endpoint's throughput, not per client) that many cores hit at once. It is
// split into shards, each a token bucket of its own on a cache line of its
// own: with k shards, shard i holds burst/k tokens (the first burst%k one
// more) and refills at rate/k (an emission interval k times the bucket's,
// so the refills add up to the rate exactly). A caller takes from its
// shard (picked from its goroutine's stack address), so that cores
// deciding at once write different lines; an empty shard lets the caller
// take from the others in turn, and a request larger than any one shard
// holds gathers tokens from several (giving them back if they do not add
// up), before it rejects.
//
// Guarantee: every shard is an exact GCRA bucket, so in any interval of
// length T the bucket admits at most burst + rate·T tokens (refunded ones
// aside), under any interleaving, as a TokenBucket does, when what is given
// back goes to where it came from (RefundTo, with the Origin that
// AllowNOrigin reported; for Refund, see its limit). It can admit
// less: a shard's fractional token is not lent to another, so at any
// instant up to k-1 tokens of the whole may be out of reach of a request,
// and a weighted request can be rejected while concurrent callers hold
// the tokens it was gathering; and a shard of burst/k+1 tokens takes up to
// k intervals longer than burst intervals to refill. So that this stays
// small, the default shard count is lowered (to a power of two) until every
// shard holds at least minShardTokens tokens (one shard for a burst below
// twice that: a TokenBucket with extra steps); a count set with
// WithShardCount is lowered only until every shard holds one token.
//
// Remaining of an admission is an estimate: the caller's shard's times the
// shard count (callers spread over the shards drain them alike; one
// caller alone drains its own first, and the estimate then runs low).
// ResetAfter is the caller's shard's. A rejection's RetryAfter
// is the soonest that any shard holds n tokens, or, for a request no
// single shard can hold, the time until every shard is full: never
// earlier than the truth.
//
// AllowN and Refund take no lock and allocate nothing. A ShardedBucket is
// safe for concurrent use. The zero value is not usable; call
// NewShardedBucket.
type ShardedBucket struct {
	_        [cacheLine]byte
	burst    int64
	interval int64 // of the whole bucket, ns
	mask     uint64
	// big are the shards [0, nBig) of burst/k + 1 tokens; small the others.
	big, small GCRA
	nBig       uint64
	shards     []bucketShard
}

// bucketShard is one shard's state on a cache line of its own.
type bucketShard struct {
	s GCRAState
	_ [cacheLine - 8]byte
}

// minShardTokens is the fewest tokens a shard of the default count holds:
// the k-1 tokens out of reach stay below 1/64 of the burst.
const minShardTokens = 64

// NewShardedBucket returns a full ShardedBucket of burst tokens refilled
// at rate. It returns NewGCRA's errors, and an error when the shard count
// (WithShardCount) is not a power of two or a shard's burst takes longer
// than 2^59 ns to refill at its share of the rate.
func NewShardedBucket(rate Rate, burst int64, opts ...ShardedOption) (*ShardedBucket, error) {
	g, err := NewGCRA(rate, burst)
	if err != nil {
		return nil, err
	}
	n, set, err := shardCount(opts)
	if err != nil {
		return nil, err
	}
	share := int64(minShardTokens)
	if set {
		share = 1
	}
	k := int64(n)
	for k > 1 && burst/k < share {
		k /= 2
	}
	iv := g.interval * k
	if g.interval > maxRateSpan/k || (burst/k+1) > maxRateSpan/iv {
		return nil, fmt.Errorf("ratelimit: a burst of %d at %v over %d shards takes longer than the supported %v to refill", burst, rate, k, time.Duration(maxRateSpan))
	}
	mk := func(b int64) GCRA {
		return GCRA{interval: iv, tau: b * iv, burst: b, perToken: newDivider(iv)}
	}
	return &ShardedBucket{
		burst: burst, interval: g.interval, mask: uint64(k - 1),
		big: mk(burst/k + 1), small: mk(burst / k), nBig: uint64(burst % k),
		shards: make([]bucketShard, k),
	}, nil
}

// gcra returns the configuration of shard i.
func (b *ShardedBucket) gcra(i uint64) *GCRA {
	if i < b.nBig {
		return &b.big
	}
	return &b.small
}

// Origin says where an admission of a ShardedBucket took its tokens, for
// RefundTo: one shard, or none (the zero Origin) when it took nothing or
// gathered them from several shards.
type Origin uint32

// AllowN takes n tokens at now if the shards hold them, and returns the
// Decision (see ShardedBucket for its figures). n == 0 takes nothing and
// reports the caller's shard; n > Burst can never be admitted
// (ReasonExceedsCapacity, RetryAfter Never); a negative n panics. now is
// as for GCRA.AllowN.
func (b *ShardedBucket) AllowN(now, n int64) Decision {
	d, _ := b.AllowNOrigin(now, n)
	return d
}

// AllowNOrigin is AllowN that also says where the tokens of an admission
// came from, so that RefundTo can give them back there exactly.
func (b *ShardedBucket) AllowNOrigin(now, n int64) (Decision, Origin) {
	return b.AllowNShard(pickShard(b.mask), now, n)
}

// AllowNShard is AllowNOrigin for a caller that names its own shard, i
// (taken modulo the shard count), as ShardedSemaphore.TryAcquireShard: a
// caller that holds a number of its own (a pooled object's, one per P)
// keeps its callers on different shards whatever their stacks, where
// two stacks picked at random share a shard once in Shards() times.
func (b *ShardedBucket) AllowNShard(i uint64, now, n int64) (Decision, Origin) {
	home := i & b.mask
	// The common case in this frame: home has the tokens.
	if g := b.gcra(home); n > 0 && n <= g.burst {
		if next, ok := g.take(&b.shards[home].s, now, n); ok {
			// As scaled(g.AllowN(...)) says, next-now in (0, tau]. No need
			// for its min: a shard of at most burst/k+1 tokens holds at most
			// burst/k after an admission, k times that is at most burst.
			return Decision{
				Limit:      b.burst,
				Remaining:  g.perToken.div(g.tau-(next-now)) * int64(len(b.shards)),
				ResetAfter: time.Duration(next - now),
			}, Origin(home + 1)
		}
	}
	return b.allowFrom(home, now, n)
}

// allowFrom is AllowNOrigin for a caller whose shard is home, all cases
// (home's own tokens first, as in AllowNOrigin).
func (b *ShardedBucket) allowFrom(home uint64, now, n int64) (Decision, Origin) {
	if n <= 0 || n > b.burst {
		if n < 0 {
			panic("ratelimit: ShardedBucket.AllowN with negative n")
		}
		d := b.scaled(b.gcra(home).AllowN(&b.shards[home].s, now, 0))
		if n > b.burst {
			d.RetryAfter = Never
		}
		return d, 0
	}
	soonest := Never
	if g := b.gcra(home); n <= g.burst {
		d := g.AllowN(&b.shards[home].s, now, n)
		if d.Allowed() {
			return b.scaled(d), Origin(home + 1)
		}
		soonest = d.RetryAfter
	}
	return b.slow(home, now, n, soonest)
}

// slow takes n tokens from the shards other than home (whose rejection
// said soonest): whole from one, or gathered from several.
func (b *ShardedBucket) slow(home uint64, now, n int64, soonest time.Duration) (Decision, Origin) {
	for i := uint64(1); i <= b.mask; i++ {
		j := (home + i) & b.mask
		g := b.gcra(j)
		if n > g.burst {
			continue
		}
		d := g.AllowN(&b.shards[j].s, now, n)
		if d.Allowed() {
			return b.scaled(d), Origin(j + 1)
		}
		soonest = min(soonest, d.RetryAfter)
	}
	if n > 1 {
		if d, ok := b.gather(home, now, n); ok {
			return d, 0 // from several shards: not refunded
		}
	}
	if soonest == Never {
		// No single shard can hold n: wait until every shard is full,
		// when the whole burst (>= n) is there.
		soonest = max(1, b.full(now))
	}
	return Decision{Limit: b.burst, RetryAfter: soonest, ResetAfter: max(soonest, b.full(now))}, 0
}

// scaled is a shard's decision as the whole bucket's: its Limit, and the
// shard's Remaining times the shard count (at most the burst).
func (b *ShardedBucket) scaled(d Decision) Decision {
	d.Limit, d.Remaining = b.burst, min(b.burst, d.Remaining*int64(len(b.shards)))
	return d
}

// full returns the time until every shard is full.
func (b *ShardedBucket) full(now int64) time.Duration {
	var t time.Duration
	for j := range uint64(len(b.shards)) {
		t = max(t, time.Duration(b.shards[j].s.tat.Load()-now))
	}
	return t
}

// gather takes n tokens from the shards, from home on, what each holds,
// and reports whether they added up to n; when not, every shard gets back
// exactly what was taken from it. (Given to another shard, a token would
// be there at an earlier now, at which its own shard still owed it: callers
// whose clock reads arrive out of order could take it twice.)
func (b *ShardedBucket) gather(home uint64, now, n int64) (Decision, bool) {
	if !b.gatherFrom(home, 0, now, n) {
		return Decision{}, false
	}
	return b.scaled(b.gcra(home).AllowN(&b.shards[home].s, now, 0)), true
}

// gatherChunk is how many shards one gatherFrom frame takes from, and
// remembers what it took.
const gatherChunk = 32

// gatherFrom is gather over the shards home+from, home+from+1, ...: the
// next gatherChunk of them in this frame, the others in a call of its own
// (no allocation, whatever the shard count).
func (b *ShardedBucket) gatherFrom(home, from uint64, now, n int64) bool {
	var took [gatherChunk]int64
	end := min(from+gatherChunk, b.mask+1)
	for i := from; i < end && n > 0; i++ {
		j := (home + i) & b.mask
		g := b.gcra(j)
		have := g.AllowN(&b.shards[j].s, now, 0).Remaining
		if want := min(have, n); want > 0 && g.AllowN(&b.shards[j].s, now, want).Allowed() {
			took[i-from], n = want, n-want
		}
	}
	if n == 0 || (end <= b.mask && b.gatherFrom(home, end, now, n)) {
		return true
	}
	for i := from; i < end; i++ {
		if took[i-from] > 0 {
			j := (home + i) & b.mask
			b.gcra(j).Refund(&b.shards[j].s, now, took[i-from])
		}
	}
	return false
}

// Refund gives n tokens taken earlier back at now, as when a later limit
// of an all-or-nothing decision rejected the request: to the caller's
// shard first, and what would overflow it to the next shards in turn,
// never filling any beyond its burst (tokens beyond the whole burst are
// dropped). Refund(0) does nothing; a negative n panics.
//
// Its limit: Refund cannot tell which shards the tokens came from, and a
// token given to another shard than its own is there at earlier instants
// too, at which its own shard still owed it. So with a clock that only
// moves forwards the bound holds exactly; when callers' now values arrive
// out of order, a caller with an earlier now than the refund's can take
// up to the n refunded tokens once more than that bound allows. RefundTo,
// with the Origin of the admission, keeps it as one bucket does.
func (b *ShardedBucket) Refund(now, n int64) {
	if n <= 0 {
		if n < 0 {
			panic("ratelimit: ShardedBucket.Refund with negative n")
		}
		return
	}
	b.refundFrom(pickShard(b.mask), now, n)
}

// RefundTo gives n tokens that an admission whose Origin is o took back
// at now (the admission's own now), to o's shard only, as GCRA.Refund does
// on one bucket: never beyond that shard's burst (the excess is dropped).
// So the bound of ShardedBucket holds as on one bucket: exactly when no
// admission at a later now than the refund's was decided since the one
// refunded, as when an all-or-nothing decision gives back at once what a
// later limit rejected. A refund at an earlier now than a later admission's
// frees that one's slot, on one bucket as here, and the bucket can then
// admit up to n tokens more than its bound. A refund to the zero Origin (an admission gathered from
// several shards) is dropped: the bucket then admits less, never more.
// RefundTo(o, now, 0) does nothing; a negative n, or an Origin that is not
// one of this bucket's shards, panics. It takes no lock and allocates
// nothing.
func (b *ShardedBucket) RefundTo(o Origin, now, n int64) {
	if j, ok := b.origin("RefundTo", o, n); ok {
		b.refundShard(j, now, n, math.MaxInt64)
	}
}

// RefundLateTo is RefundTo(o, at, n) for a refund that comes at now, after
// the admission at at whose Origin is o: it gives o's shard back only what
// the n tokens still weigh there at now, as GCRA.RefundLate does on one
// bucket, with its limit (until is at plus the admission's ResetAfter,
// which for an admission from one shard is that shard's). A refund to the
// zero Origin is dropped; RefundLateTo(o, at, now, 0, until) does nothing;
// a negative n, or an Origin that is not one of this bucket's shards,
// panics. It takes no lock and allocates nothing.
func (b *ShardedBucket) RefundLateTo(o Origin, at, now, n, until int64) {
	if j, ok := b.origin("RefundLateTo", o, n); ok && until > now {
		b.refundShard(j, at, n, until-now)
	}
}

// origin returns the shard of o for method's refund of n, and whether
// there is anything to give back there (not for n == 0 or the zero
// Origin). A negative n, or an Origin of another bucket, panics.
func (b *ShardedBucket) origin(method string, o Origin, n int64) (uint64, bool) {
	if n < 0 {
		panic("ratelimit: ShardedBucket." + method + " with negative n")
	}
	if uint64(o) > b.mask+1 {
		panic("ratelimit: ShardedBucket." + method + " with an Origin of another bucket")
	}
	return uint64(o) - 1, n > 0 && o != 0
}

// refundFrom is Refund for a caller whose shard is home; n > 0.
func (b *ShardedBucket) refundFrom(home uint64, now, n int64) {
	for i := uint64(0); i <= b.mask && n > 0; i++ {
		j := (home + i) & b.mask
		n -= b.refundShard(j, now, n, math.MaxInt64)
	}
}

// refundShard gives shard j up to n tokens at now, and at most most ns of
// debt, and returns how many tokens it took: the whole tokens it lacked,
// at most n.
func (b *ShardedBucket) refundShard(j uint64, now, n, most int64) int64 {
	g, s := b.gcra(j), &b.shards[j].s
	for {
		tat := s.tat.Load()
		if tat <= now {
			return 0 // full
		}
		// Whole tokens missing, rounded up: the last one partly refilled.
		lack := (tat - now + g.interval - 1) / g.interval
		give := min(n, lack)
		// CAS tat -> tat - give·interval, clamped at now (exactly full).
		if s.tat.CompareAndSwap(tat, max(tat-min(give*g.interval, most), now)) {
			return give
		}
	}
}

// Available returns the whole tokens the shards hold at now, all together:
// a walk over every shard, for a reload or a report, not for the hot path.
func (b *ShardedBucket) Available(now int64) int64 {
	var n int64
	for j := range uint64(len(b.shards)) {
		n += b.gcra(j).AllowN(&b.shards[j].s, now, 0).Remaining
	}
	return n
}

// Take takes up to n tokens at now from the shards, as many as they hold,
// and returns how many it took: for carrying usage over to a new bucket,
// not for admission (it never rejects). A negative n panics.
func (b *ShardedBucket) Take(now, n int64) int64 {
	if n < 0 {
		panic("ratelimit: ShardedBucket.Take with negative n")
	}
	got := int64(0)
	for j := uint64(0); j <= b.mask && got < n; j++ {
		g := b.gcra(j)
		for {
			want := min(g.AllowN(&b.shards[j].s, now, 0).Remaining, n-got)
			if want <= 0 {
				break
			}
			if g.AllowN(&b.shards[j].s, now, want).Allowed() {
				got += want
				break
			}
		}
	}
	return got
}

// Burst returns the bucket's capacity in tokens, all shards together.
func (b *ShardedBucket) Burst() int64 { return b.burst }

// Interval returns the time one token of the whole bucket takes to refill.
func (b *ShardedBucket) Interval() time.Duration { return time.Duration(b.interval) }

// Shards returns the number of shards.
func (b *ShardedBucket) Shards() int { return len(b.shards) }
