package ratelimit

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

// ShardedWindow is an exact fixed-window counter for global caps (the whole
// endpoint's throughput, not per client) that many cores hit at once: it
// admits at most limit units per window of the monotonic clock, and the
// common path writes only a shard-local cache line.
//
// The window's quota lives in one central word that packs the window's
// index (its low 32 bits) with the units left. Shards take batches of it
// (limit/(4·shards) units beyond the request, none for small limits) into
// shard-local words tagged with the same window index, and a caller spends
// from its shard's word (picked from its goroutine's stack address) only
// when its tag is the current window, so a
// batch left over from an old window is never spent in a new one. The first
// caller of a new window resets the central word to the full limit, once,
// with a CAS. An empty shard takes from the central word, then steals from
// other shards, and a weighted request gathers units from several, before
// it rejects.
//
// Error bound: exact per window, under any interleaving: no more than limit
// units are admitted with a now inside one window. Like any fixed window it
// can admit up to 2·limit within one window's length across a boundary
// (limit at the end of one window, limit at the start of the next); use a
// sliding window or a token bucket where that matters. A caller about to
// reject while a batch is on its way from the central word to a shard
// retries until the batch has landed, so units in flight never cause a
// rejection; units scattered over shards while a weighted request gathers
// them (and hands them back) can. A caller whose now is
// behind the current window (its clock read raced a window change) is
// charged to the current window. The words keep window indexes modulo
// 2^32; a full 64-bit index of the latest window opened (raised before the
// window opens, so never behind it) tells a caller after an idle gap of
// 2^30 windows or more from one that is behind. Only after a gap of exactly
// a multiple of 2^32 windows can callers spend what the old window left,
// during the first window after the gap: still never more than limit.
//
// AllowN takes no lock and allocates nothing. A ShardedWindow is safe for
// concurrent use. The zero value is not usable; call NewShardedWindow.
type ShardedWindow struct {
	_       [cacheLine]byte
	limit   int64
	window  int64 // nanoseconds
	batch   int64
	mask    uint64
	_       [cacheLine]byte
	central atomic.Uint64 // window tag << 32 | windowOpen | units left
	latest  atomic.Int64  // full index of the latest window opened, or more
	_       [cacheLine - 16]byte
	// transit counts units of batches taken from the central word and not
	// yet deposited in a shard. A caller about to reject while transit > 0
	// retries instead, so that a batch in flight never causes a rejection
	// while the window still has room. Slow path only. (Units a request of
	// n > 1 gathers and hands back are not counted: such a request is rare,
	// and a rejection it causes meanwhile is the documented trade-off.)
	transit atomic.Int64
	_       [cacheLine - 8]byte
	shards  []windowShard
}

// windowShard is one shard's cached quota (window tag << 32 | units) on a
// cache line of its own.
type windowShard struct {
	w atomic.Uint64
	_ [cacheLine - 8]byte
}

// NewShardedWindow returns a ShardedWindow that admits at most limit units
// per window. It returns an error when limit is not in [1, 2^31-1], window
// is not positive, is shorter than MinWindow (1 ms) or is longer than 2^59 ns (about 18 years, as for every
// rate window: the end of the window holding any supported now then fits an
// int64), or the shard count (WithShardCount) is not a power of two.
func NewShardedWindow(limit int64, window time.Duration, opts ...ShardedOption) (*ShardedWindow, error) {
	if limit <= 0 || limit > math.MaxInt32 {
		return nil, fmt.Errorf("ratelimit: window limit must be between 1 and %d, got %d", math.MaxInt32, limit)
	}
	if err := checkRateWindow(window); err != nil {
		return nil, err
	}
	n, _, err := shardCount(opts)
	if err != nil {
		return nil, err
	}
	sw := &ShardedWindow{
		limit:  limit,
		window: int64(window),
		batch:  limit / int64(4*n),
		mask:   uint64(n - 1),
		shards: make([]windowShard, n),
	}
	sw.latest.Store(math.MinInt64 / 2)
	return sw, nil // the central word is 0: no window open yet
}

// windowOpen marks a central word whose window has been opened, so that the
// zero word (window 0, no units) is not mistaken for an exhausted window 0.
const windowOpen = 1 << 31

func packWindow(tag uint32, units int64) uint64 { return uint64(tag)<<32 | uint64(units) }

func unpackWindow(w uint64) (tag uint32, units int64) {
	return uint32(w >> 32), int64(uint32(w) &^ windowOpen)
}

// Allow is shorthand for AllowN(clock.Now(), 1), with the clock of package
// internal/clock (monotonic).
func (sw *ShardedWindow) Allow() Decision { return sw.AllowN(clock.Now(), 1) }

// AllowN admits n units at now (monotonic nanoseconds, below 2^62+2^61 as
// for the other rate primitives) if the current window has n units left,
// and returns the Decision. n <= 0 charges nothing
// and is allowed; n > limit can never be admitted (ReasonExceedsCapacity,
// RetryAfter Never). A rejection's RetryAfter is the time to the next
// window, when the full limit is available again. Remaining is a lower
// bound: the units of the central word and of the caller's shard, not those
// cached by other shards. ResetAfter is the time to the next window.
func (sw *ShardedWindow) AllowN(now int64, n int64) Decision {
	return sw.AllowNShard(pickShard(sw.mask), now, n)
}

// AllowNShard is AllowN for a caller that names its own shard, i (taken
// modulo the shard count), as ShardedSemaphore.TryAcquireShard: a caller
// that holds a number of its own (a pooled object's, one per P) keeps its
// callers on different shards whatever their stacks.
func (sw *ShardedWindow) AllowNShard(i uint64, now int64, n int64) Decision {
	w := windowIndex(now, sw.window)
	tag := uint32(w)
	if n > sw.limit {
		return Decision{Limit: sw.limit, RetryAfter: Never, ResetAfter: sw.untilNext(w, now)}
	}
	home := &sw.shards[i&sw.mask]
	g := sw.central.Load()
	if gtag, left := unpackWindow(g); gtag == tag && g&windowOpen != 0 {
		for {
			c := home.w.Load()
			ctag, cached := unpackWindow(c)
			if ctag != tag || cached < n {
				break
			}
			if n <= 0 {
				return sw.allowed(w, now, left+cached)
			}
			// CAS c -> c-n: spend this window's cached units only while
			// the word still holds them under the same tag.
			if home.w.CompareAndSwap(c, c-uint64(n)) {
				return sw.allowed(w, now, left+cached-n)
			}
		}
	}
	// A rejection made while a batch is in transit from the central word to
	// a shard is retried: those units are this window's and may be the ones
	// the caller needs. A deposit completes in a few steps whatever the
	// other goroutines do, so the retries end.
	for {
		d, transit := sw.slow(home, now, w, n)
		if d.Allowed() || !transit {
			return d
		}
		runtime.Gosched()
	}
}

func (sw *ShardedWindow) allowed(w, now, remaining int64) Decision {
	return Decision{Limit: sw.limit, Remaining: remaining, ResetAfter: sw.untilNext(w, now)}
}

func (sw *ShardedWindow) untilNext(w, now int64) time.Duration {
	return time.Duration((w+1)*sw.window - now)
}

// slow takes units from the central word or other shards. It also reports
// whether, when it rejects, some units were in transit.
func (sw *ShardedWindow) slow(home *windowShard, now, w, n int64) (Decision, bool) {
	tag := uint32(w)
	var left int64
	for {
		g := sw.central.Load()
		gtag, units := unpackWindow(g)
		d := int32(tag - gtag)
		if d > 0 || g&windowOpen == 0 || w-sw.latest.Load() >= 1<<30 {
			sw.raiseLatest(w)
			// CAS g -> (tag, limit): open the caller's (newer) window
			// exactly once; whoever loses sees the new tag and goes on.
			sw.central.CompareAndSwap(g, packWindow(tag, sw.limit)|windowOpen)
			continue
		} else if d < 0 {
			// The caller is behind: charge the current window.
			w -= int64(d)
			tag = gtag
		}
		left = units
		if n <= 0 {
			return sw.allowed(w, now, left+sw.cachedIn(home, tag)), false
		}
		if units < n {
			break
		}
		take := min(units, n+sw.batch)
		extra := take - n
		// Announce the batch before it leaves central, so that it is never
		// invisible to a caller deciding whether to reject.
		sw.transit.Add(extra)
		// CAS g -> g-take: take this window's units only while they last.
		if sw.central.CompareAndSwap(g, g-uint64(take)) {
			left = units - take
			sw.deposit(home, tag, extra)
			sw.transit.Add(-extra)
			return sw.allowed(w, now, left+sw.cachedIn(home, tag)), false
		}
		sw.transit.Add(-extra)
	}
	start := pickShard(sw.mask)
	for i := range uint64(len(sw.shards)) {
		o := &sw.shards[(start+i)&sw.mask].w
		for {
			c := o.Load()
			if ctag, cached := unpackWindow(c); ctag != tag || cached < n {
				break
			}
			// CAS c -> c-n: steal this window's units from another shard.
			if o.CompareAndSwap(c, c-uint64(n)) {
				return sw.allowed(w, now, sw.remaining(home, tag)), false
			}
		}
	}
	if n > 1 {
		// Scattered units: gather them. Units held here are invisible to
		// others until spent or given back.
		got := sw.takeTagged(&sw.central, tag, n)
		for i := uint64(0); i < uint64(len(sw.shards)) && got < n; i++ {
			got += sw.takeTagged(&sw.shards[(start+i)&sw.mask].w, tag, n-got)
		}
		if got == n {
			return sw.allowed(w, now, sw.remaining(home, tag)), false
		}
		sw.giveBack(w, got)
	}
	rest := sw.untilNext(w, now) // > 0: window w holds now, so it ends after now
	return Decision{Limit: sw.limit, Remaining: sw.remaining(home, tag), RetryAfter: rest, ResetAfter: rest}, sw.transit.Load() > 0
}

// raiseLatest raises latest to w before w's window opens, so that latest is
// never behind an open window and a late caller is never taken for a new
// one.
func (sw *ShardedWindow) raiseLatest(w int64) {
	for {
		l := sw.latest.Load()
		// CAS l -> w: raise only, so that a slower opener cannot lower it.
		if w <= l || sw.latest.CompareAndSwap(l, w) {
			return
		}
	}
}

// takeTagged takes at most want units of window tag from word p.
func (sw *ShardedWindow) takeTagged(p *atomic.Uint64, tag uint32, want int64) int64 {
	for {
		c := p.Load()
		ctag, units := unpackWindow(c)
		if ctag != tag || units <= 0 {
			return 0
		}
		t := min(units, want)
		// CAS c -> c-t: take no more than the word holds for this window.
		if p.CompareAndSwap(c, c-uint64(t)) {
			return t
		}
	}
}

// deposit adds m units of window tag to home's cache. A cache of an older
// window is overwritten (its units expired with their window); units of a
// window older than the cache's are dropped.
func (sw *ShardedWindow) deposit(home *windowShard, tag uint32, m int64) {
	if m <= 0 {
		return
	}
	for {
		c := home.w.Load()
		ctag, units := unpackWindow(c)
		next := packWindow(tag, m)
		switch d := int32(tag - ctag); {
		case d == 0:
			next = packWindow(tag, units+m)
		case d < 0:
			return
		}
		// CAS c -> next: add to this window's units, or replace an expired
		// window's, without losing a concurrent spend.
		if home.w.CompareAndSwap(c, next) {
			return
		}
	}
}

// remaining is what the central word and home hold for window tag.
func (sw *ShardedWindow) remaining(home *windowShard, tag uint32) int64 {
	r := sw.cachedIn(home, tag)
	if g := sw.central.Load(); uint32(g>>32) == tag {
		_, units := unpackWindow(g)
		r += units
	}
	return r
}

func (sw *ShardedWindow) cachedIn(home *windowShard, tag uint32) int64 {
	if ctag, units := unpackWindow(home.w.Load()); ctag == tag {
		return units
	}
	return 0
}

// Refund gives back n units admitted at instant at (the admitting
// decision's now, not the time of the refund), as when a later limit of an
// all-or-nothing decision rejected the request or the outcome did not
// count. They go back to the central word while it holds at's window, so
// that window admits them again, never more than its limit in all, and
// every caller's Remaining counts them whatever its shard (a refund is
// rare: one CAS on the shared word). A refund whose window is no longer
// (or not yet) the current one does nothing: the units expired with their
// window, and a later window did not count them. Refund(0) does nothing; a
// negative n panics. Refund takes no lock and allocates nothing.
func (sw *ShardedWindow) Refund(at, n int64) {
	if n <= 0 {
		if n < 0 {
			panic("ratelimit: ShardedWindow.Refund with negative n")
		}
		return
	}
	sw.giveBack(windowIndex(at, sw.window), n)
}

// giveBack returns n > 0 units of window w to the central word, while it
// holds w's window (see Refund).
func (sw *ShardedWindow) giveBack(w, n int64) {
	tag := uint32(w)
	for {
		g := sw.central.Load()
		gtag, units := unpackWindow(g)
		if gtag != tag || g&windowOpen == 0 || w-sw.latest.Load() >= 1<<30 {
			return
		}
		// No more than a window admits: the central word's count cannot
		// pass the limit (below 2^31) however the caller miscounts.
		give := min(n, sw.limit-units)
		if give <= 0 {
			return
		}
		// CAS g -> g+give: give back to this window only while it is open.
		if sw.central.CompareAndSwap(g, g+uint64(give)) {
			return
		}
	}
}

// Limit returns the number of units admitted per window.
func (sw *ShardedWindow) Limit() int64 { return sw.limit }

// Window returns the window length.
func (sw *ShardedWindow) Window() time.Duration { return time.Duration(sw.window) }

func windowIndex(a, b int64) int64 {
	q := a / b
	if a < 0 && a%b != 0 {
		q--
	}
	return q
}
