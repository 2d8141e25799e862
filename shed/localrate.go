package shed

import (
	"math"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// localRate is what a Global rate rule decides with, in this process.
type localRate interface {
	AllowN(now, n int64) ratelimit.Decision
	// AllowNShard is AllowN for a charge that may be given back, by a
	// caller whose shard is i (its ticket's semShard: a sharded rate
	// takes from, and caches in, that shard, as ShardedSemaphore's
	// TryAcquireShard; one-word rates ignore it). It also says where a
	// sharded bucket took the tokens, for RefundTo (the zero Origin from
	// every other rate).
	AllowNShard(i uint64, now, n int64) (ratelimit.Decision, ratelimit.Origin)
	// RefundTo gives back n that a charge at now took from o (what
	// AllowNShard said), to the window or shard that counted them: a
	// sharded bucket's refund to the zero Origin (a charge gathered from
	// several shards) is dropped, as ratelimit.ShardedBucket.RefundTo
	// says; every other rate ignores o.
	RefundTo(o ratelimit.Origin, now, n int64)
	// RefundLate is RefundTo(o, at, n) for a refund at now, after the
	// charge at at (Rule.Count at the end of a request): a bucket gives
	// back only what the n still weigh at now (until: at plus the charge's
	// ResetAfter; ratelimit.GCRA.RefundLate, with its limit); a window or
	// log is RefundTo's, which already never reaches what was counted
	// since.
	RefundLate(o ratelimit.Origin, at, now, n, until int64)
	// adopt makes this rate, just built for a changed rule, count on the
	// state of old, the rate of the rule it replaces, so that the usage
	// carries over (Reload keeps what was counted). It reports false,
	// keeping its fresh state, when old counts in another way (another
	// algorithm, window or calendar).
	adopt(old localRate, now int64) bool
}

// rateAlgo is a ratelimit package configuration deciding on per-key
// state S: GCRA, FixedWindow, SlidingWindow, SlidingLog.
type rateAlgo[S any] interface {
	AllowN(s *S, now, n int64) ratelimit.Decision
	Refund(s *S, now, n int64)
}

// padded keeps a state, which every decision writes, off the cache lines
// of whatever is allocated beside it.
type padded[S any] struct {
	_ [128]byte
	s S
	_ [128]byte
}

// stateRate is a Global window or log rule: a configuration and a state
// that a later configuration of the same window may take over, reading it
// as it is (fixed and sliding windows are built Widened, so that any limit
// the window allows shares their state format; a sliding log rebuilds its
// ring for a new limit by itself).
type stateRate[S any, A rateAlgo[S]] struct {
	algo   A
	window int64 // what must match for adopt
	state  *padded[S]
}

func newStateRate[S any, A rateAlgo[S]](algo A, window int64) *stateRate[S, A] {
	return &stateRate[S, A]{algo: algo, window: window, state: new(padded[S])}
}

func (r *stateRate[S, A]) AllowN(now, n int64) ratelimit.Decision {
	return r.algo.AllowN(&r.state.s, now, n)
}

func (r *stateRate[S, A]) AllowNShard(_ uint64, now, n int64) (ratelimit.Decision, ratelimit.Origin) {
	return r.algo.AllowN(&r.state.s, now, n), 0
}

func (r *stateRate[S, A]) RefundTo(_ ratelimit.Origin, now, n int64) {
	r.algo.Refund(&r.state.s, now, n)
}

func (r *stateRate[S, A]) RefundLate(o ratelimit.Origin, at, _, n, _ int64) { r.RefundTo(o, at, n) }

func (r *stateRate[S, A]) adopt(old localRate, now int64) bool {
	if o, ok := old.(*shardedRate); ok {
		// A fixed window whose limit grew past a ShardedWindow's.
		if _, fixed := any(r).(*stateRate[ratelimit.FixedWindowState, *ratelimit.FixedWindow]); !fixed || int64(o.w.Window()) != r.window {
			return false
		}
		chargeUsed(r, old, now)
		return true
	}
	o, ok := old.(*stateRate[S, A])
	if !ok || o.window != r.window {
		return false
	}
	r.state = o.state
	return true
}

// bucketRate is a Global token bucket rule. A new burst reads the old
// state as it is (the debt, a time, is the same number of tokens); a new
// rate converts the tokens owed once, at adopt, into a state of its own.
type bucketRate struct {
	g     *ratelimit.GCRA
	state *padded[ratelimit.GCRAState]
}

func (r *bucketRate) AllowN(now, n int64) ratelimit.Decision { return r.g.AllowN(&r.state.s, now, n) }
func (r *bucketRate) AllowNShard(_ uint64, now, n int64) (ratelimit.Decision, ratelimit.Origin) {
	return r.g.AllowN(&r.state.s, now, n), 0
}
func (r *bucketRate) RefundTo(_ ratelimit.Origin, now, n int64) { r.g.Refund(&r.state.s, now, n) }
func (r *bucketRate) RefundLate(_ ratelimit.Origin, at, now, n, until int64) {
	r.g.RefundLate(&r.state.s, at, now, n, until)
}

// adopt takes over old's state when the rate is the same; otherwise it
// charges its fresh state with the tokens old's bucket owes at now,
// rounded up (never fewer), and at most its own burst: a debt above the
// new burst is forgiven beyond an empty bucket. Decisions that still run on
// old's rule set after that are not carried over.
func (r *bucketRate) adopt(old localRate, now int64) bool {
	if o, ok := old.(*shardedBucketRate); ok {
		// A burst lowered below what shards: the tokens the old one owes.
		if owed := min(o.b.Burst()-o.b.Available(now), r.g.Burst()); owed > 0 {
			r.g.AllowN(&r.state.s, now, owed)
		}
		return true
	}
	o, ok := old.(*bucketRate)
	if !ok {
		return false
	}
	if o.g.Interval() == r.g.Interval() {
		r.state = o.state
		return true
	}
	peek := o.g.AllowN(&o.state.s, now, 0)
	iv := int64(o.g.Interval())
	owed := (int64(peek.ResetAfter) + iv - 1) / iv
	if owed = min(owed, r.g.Burst()); owed > 0 {
		r.g.AllowN(&r.state.s, now, owed)
	}
	return true
}

// shardedBucketRate is a Global TokenBucket rule with a burst large enough
// to shard (ratelimit.ShardedBucket: at least 64 tokens a shard): its
// shards are token buckets of their own on lines of their own, so that the
// cores deciding at once do not all write one word. It is exact like the
// single bucket (never more than burst + rate·T in any T); it may admit up
// to shards-1 tokens less at an instant, and its Remaining is an estimate
// (the caller's shard's times the shard count), which the soft-limit
// warning and the headers use. What an attempt is given back (a later
// rule's rejection, Rule.Count, a Recost down) goes to the shard its
// charge came from, whichever goroutine gives it back, so that the bound
// holds as on one bucket (ratelimit.ShardedBucket.RefundTo).
type shardedBucketRate struct{ b *ratelimit.ShardedBucket }

func (r *shardedBucketRate) AllowN(now, n int64) ratelimit.Decision { return r.b.AllowN(now, n) }
func (r *shardedBucketRate) AllowNShard(i uint64, now, n int64) (ratelimit.Decision, ratelimit.Origin) {
	return r.b.AllowNShard(i, now, n)
}
func (r *shardedBucketRate) RefundTo(o ratelimit.Origin, now, n int64) { r.b.RefundTo(o, now, n) }
func (r *shardedBucketRate) RefundLate(o ratelimit.Origin, at, now, n, until int64) {
	r.b.RefundLateTo(o, at, now, n, until)
}

// adopt takes over old's bucket when rate, burst and shards are the same;
// otherwise it takes from its fresh bucket the tokens old owes at now (its
// burst less what its shards hold), at most its own burst. Decisions that
// still run on old's rule set after that are not carried over.
func (r *shardedBucketRate) adopt(old localRate, now int64) bool {
	var owed int64
	switch o := old.(type) {
	case *shardedBucketRate:
		if o.b.Interval() == r.b.Interval() && o.b.Burst() == r.b.Burst() && o.b.Shards() == r.b.Shards() {
			r.b = o.b
			return true
		}
		owed = o.b.Burst() - o.b.Available(now)
	case *bucketRate:
		p := o.AllowN(now, 0)
		owed = p.Limit - p.Remaining
	default:
		return false
	}
	if owed = min(owed, r.b.Burst()); owed > 0 {
		r.b.Take(now, owed)
	}
	return true
}

// shardedRate is a Global FixedWindow rule: a ShardedWindow, whose quota
// shard-local caches hand out, so that the cores deciding at once do not
// all write one word (on the 2-core machine the single word took 29 ns a
// decision in parallel, the sharded window 7). It is exact per window like
// the single word; only Remaining differs, a lower bound (the units cached
// by other cores' shards are not counted).
type shardedRate struct{ w *ratelimit.ShardedWindow }

func (r *shardedRate) AllowN(now, n int64) ratelimit.Decision { return r.w.AllowN(now, n) }
func (r *shardedRate) AllowNShard(i uint64, now, n int64) (ratelimit.Decision, ratelimit.Origin) {
	return r.w.AllowNShard(i, now, n), 0
}

// RefundTo gives n back to the window's central word, which every shard
// counts (ratelimit.ShardedWindow.Refund): a window has no Origin.
func (r *shardedRate) RefundTo(_ ratelimit.Origin, now, n int64)        { r.w.Refund(now, n) }
func (r *shardedRate) RefundLate(o ratelimit.Origin, at, _, n, _ int64) { r.RefundTo(o, at, n) }

// adopt takes over old's window when the limit is the same; otherwise (or
// from a single-word fixed window of the same length, the form of limits
// above a ShardedWindow's) it charges its fresh window with what old used
// in the current window, at most its own limit. Used is then an upper
// bound (old's Remaining is a lower bound), so the new limit is never
// exceeded; decisions that still run on old's rule set after that are not
// carried over.
func (r *shardedRate) adopt(old localRate, now int64) bool {
	switch o := old.(type) {
	case *shardedRate:
		if o.w.Window() != r.w.Window() {
			return false
		}
		if o.w.Limit() == r.w.Limit() {
			r.w = o.w
			return true
		}
	case *stateRate[ratelimit.FixedWindowState, *ratelimit.FixedWindow]:
		if o.window != int64(r.w.Window()) {
			return false
		}
	default:
		return false
	}
	chargeUsed(r, old, now)
	return true
}

// chargeUsed charges r, a fresh fixed window, with what old, one of the
// same length, used in the window holding now, at most r's limit.
func chargeUsed(r, old localRate, now int64) {
	p := old.AllowN(now, 0)
	if used := min(p.Limit-p.Remaining, r.AllowN(now, 0).Limit); used > 0 {
		r.AllowN(now, used)
	}
}

// calendarRate runs a Global window rule's limiter on its calendar's
// window clock, as the store runs a per-key one.
type calendarRate struct {
	rate  localRate
	clock store.WindowClock
}

// AllowN serves peeks and reloads; decisions take AllowNShard, which has
// the direct call to the usual global window.
func (c *calendarRate) AllowN(now, n int64) ratelimit.Decision {
	at := c.clock.At(now)
	return c.clock.Decision(now, at, c.rate.AllowN(at, n))
}

func (c *calendarRate) AllowNShard(i uint64, now, n int64) (ratelimit.Decision, ratelimit.Origin) {
	at := c.clock.At(now)
	var rd ratelimit.Decision
	if w, ok := c.rate.(*shardedRate); ok { // the usual global window: a direct call
		rd = w.w.AllowNShard(i, at, n)
	} else {
		rd, _ = c.rate.AllowNShard(i, at, n)
	}
	return c.clock.Decision(now, at, rd), 0
}

func (c *calendarRate) RefundTo(o ratelimit.Origin, now, n int64) {
	c.rate.RefundTo(o, c.clock.At(now), n)
}

// RefundLate is RefundTo: a calendar places windows, which give back in
// the window that counted the charge.
func (c *calendarRate) RefundLate(o ratelimit.Origin, at, _, n, _ int64) { c.RefundTo(o, at, n) }

func (c *calendarRate) adopt(old localRate, now int64) bool {
	o, ok := old.(*calendarRate)
	return ok && o.clock == c.clock && c.rate.adopt(o.rate, c.clock.At(now))
}

// newLocalRate builds the rate of Global rate rule r (validated as a
// store spec).
func newLocalRate(r Rule) (localRate, error) {
	clock := r.Calendar.Clock(r.Window)
	switch r.Algorithm {
	case TokenBucket:
		g, err := ratelimit.NewGCRA(r.Rate, r.Limit)
		if err != nil {
			return nil, err
		}
		// A burst too small to shard, or one whose shards' refill would
		// overflow the supported span, stays one bucket; so does one that
		// reserves slots (MaxWait): shards cannot tell the next slot.
		if b, err := ratelimit.NewShardedBucket(r.Rate, r.Limit); err == nil && b.Shards() > 1 && !r.reserves() {
			return &shardedBucketRate{b}, nil
		}
		return &bucketRate{g: g, state: new(padded[ratelimit.GCRAState])}, nil
	case FixedWindow:
		if r.Limit <= math.MaxInt32 && !r.reserves() { // what a ShardedWindow holds; one that reserves stays one window
			w, err := ratelimit.NewShardedWindow(r.Limit, clock.Span())
			if err != nil {
				return nil, err
			}
			return &calendarRate{&shardedRate{w}, clock}, nil
		}
		f, err := ratelimit.NewFixedWindow(r.Limit, clock.Span())
		if err != nil {
			return nil, err
		}
		return &calendarRate{newStateRate[ratelimit.FixedWindowState](f.Widened(), int64(clock.Span())), clock}, nil
	case SlidingWindow:
		sw, err := ratelimit.NewSlidingWindow(r.Limit, clock.Span())
		if err != nil {
			return nil, err
		}
		return &calendarRate{newStateRate[ratelimit.SlidingWindowState](sw.Widened(), int64(clock.Span())), clock}, nil
	default: // SlidingLog
		l, err := ratelimit.NewSlidingLog(r.Limit, r.Window)
		if err != nil {
			return nil, err
		}
		return newStateRate[ratelimit.SlidingLogState](l, int64(r.Window)), nil
	}
}
