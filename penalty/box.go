package penalty

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/internal/clock"
)

// MaxStrikes is the largest strike threshold WithStrikes accepts: the
// window keeps the times of that many recent strikes per key.
const MaxStrikes = 16

// Defaults of a Box, the usual practice: 3 limit hits within an hour earn a
// 5 minute timeout, then 15 minutes, then an hour for every further one; a
// level of escalation is forgiven after 6 hours without a timeout.
const (
	DefaultStrikes    = 3
	DefaultWindow     = time.Hour
	DefaultLevelDecay = 6 * time.Hour
)

// DefaultTimeouts returns the default escalation: 5 min, 15 min, 1 h.
func DefaultTimeouts() []time.Duration {
	return []time.Duration{5 * time.Minute, 15 * time.Minute, time.Hour}
}

// Status describes a key after a Strike.
type Status struct {
	// RetryAfter is the time left on the key's timeout, 0 when it is not
	// serving one.
	RetryAfter time.Duration
	// Strikes counts the key's strikes within the window (0 right after a
	// timeout starts, which consumes them).
	Strikes int
	// Level is the number of escalations in force: 1 while serving the
	// first timeout, and so on, decaying with good behaviour.
	Level int
	// Started reports that this strike started a timeout.
	Started bool
	// Tracked is false when the table was full of clients that may not be
	// forgotten and the strike could not be recorded.
	Tracked bool
}

// Stats is a snapshot of a Box's counters.
type Stats struct {
	concurrency.TableStats
	// Strikes counts strikes recorded; Ignored those that arrived during a
	// timeout; Timeouts the timeouts started.
	Strikes, Ignored, Timeouts uint64
}

// Box is a penalty box: strikes within a window put a key in a timeout,
// and repeated timeouts escalate (see the package doc).
//
// Check takes no lock, writes no shared memory and allocates nothing: it
// reads the key's entry (two words) without pinning it, and validates the
// read (see Check). Strike and Pardon change several words of one key's
// state and serialise on a per-key flag (spinning with runtime.Gosched for
// the few stores another writer of the same key needs); they allocate
// nothing. A strike that arrives while its key serves a timeout is ignored:
// the timeout neither grows nor shrinks, and only Pardon ends it early.
//
// Memory is bounded by the capacity given to NewBox. An entry is forgotten
// only when it is indistinguishable from a fresh one: no timeout, no strike
// within the window, level decayed to zero. When the table is full of such
// live entries, a strike for a new key is not recorded (Status.Tracked is
// false) rather than evicting an offender.
//
// A Box is safe for concurrent use, has no goroutine and needs no Close.
// The zero value is not usable; call NewBox.
type Box struct {
	table *concurrency.Table[entry, *entry]
	// history holds the rest of each key's state, by table slot
	// (Table.Index), so that the table, all that Check reads, stays small:
	// at 10^6 keys Check's cost is mostly cache and TLB misses, and with
	// the whole state in the table (168 bytes a key instead of 16) it took
	// about one and a half times as long.
	history  []history
	cfg      config
	strikes  atomic.Uint64
	ignored  atomic.Uint64
	timeouts atomic.Uint64
}

// entry is the part of a key's penalty state that the table holds: what
// Check reads. Its fields are atomic because Check reads them without a
// pin while Strike writes.
type entry struct {
	// version only grows. Reset makes it odd (a new value); Strike and
	// Pardon, holding a Ref, make it even (the next value): even means
	// "this is the key's published entry". It validates Check's unpinned
	// read (concurrency.PeekRef) and tells whether the history beside the
	// slot is this key's.
	version atomic.Uint64
	until   atomic.Int64 // end of the current or last timeout (ns); 0 = none yet
}

// Reset makes e fresh, and its history stale. Its callers write one at a
// time: the table while it holds the slot exclusively, Pardon under the
// history's flag.
func (e *entry) Reset() {
	e.version.Store((e.version.Load() + 2) | 1) // first: Check's readers give up
	e.until.Store(0)
}

// publish marks e readable by Check, for a caller that holds a Ref to e's
// key and the history's flag, and returns the version.
func (e *entry) publish() uint64 {
	v := e.version.Load()
	if v&1 == 1 {
		v++
		e.version.Store(v)
	}
	return v
}

// history is the rest of a key's state, in Box.history at the index of the
// key's table slot. Strike and Pardon change it holding a Ref to the key
// and the busy flag; the table's recovered reads it holding the slot
// exclusively (after the last holder's Release): its plain fields need no
// atomics. The table resets the entry, not the history, when it gives the
// slot to a new key: a history whose version is not the entry's is stale,
// and reads as fresh.
type history struct {
	busy    atomic.Bool // writer flag for Strike and Pardon
	version uint64      // the entry.version this history belongs to
	level   int64       // escalation level as of anchor
	anchor  int64       // when level was last set: the end of the last timeout
	n       int64       // strikes recorded since the last timeout (the log holds min(n, MaxStrikes))
	log     [MaxStrikes]int64
}

// reset makes h fresh, for the entry version v.
func (h *history) reset(v uint64) {
	h.version, h.level, h.anchor, h.n = v, 0, 0, 0 // the log is read only up to n
}

func (h *history) lock() {
	for !h.busy.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
}

func (h *history) unlock() { h.busy.Store(false) }

type config struct {
	strikes    int
	window     int64
	timeouts   []int64
	levelDecay int64
}

// Option configures NewBox.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithStrikes sets how many strikes within window start a timeout
// (default 3 within an hour). n must be in [1, MaxStrikes] and window
// positive. A strike counts for exactly window after it happened; any
// length is honoured (time.Duration(math.MaxInt64): strikes never expire).
func WithStrikes(n int, window time.Duration) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > MaxStrikes {
			return fmt.Errorf("penalty: strikes must be in [1, %d], got %d", MaxStrikes, n)
		}
		if window <= 0 {
			return fmt.Errorf("penalty: strike window must be positive, got %v", window)
		}
		c.strikes, c.window = n, int64(window)
		return nil
	})
}

// WithTimeouts sets the escalation: the first timeout lasts steps[0], the
// second steps[1], and every one past the end lasts the last step (the
// cap). Steps must be positive and never decrease. Any length is honoured:
// a timeout that would end past math.MaxInt64 on the monotonic clock (a
// step of about 146 years or more, time.Duration(math.MaxInt64) for
// instance) lasts until Pardon, and its Status.RetryAfter is the time left
// to math.MaxInt64.
func WithTimeouts(steps ...time.Duration) Option {
	return optionFunc(func(c *config) error {
		if len(steps) == 0 {
			return fmt.Errorf("penalty: WithTimeouts needs at least one step")
		}
		out := make([]int64, len(steps))
		for i, d := range steps {
			if d <= 0 {
				return fmt.Errorf("penalty: timeout step %d must be positive, got %v", i, d)
			}
			if i > 0 && d < steps[i-1] {
				return fmt.Errorf("penalty: timeout step %d (%v) shorter than step %d (%v)", i, d, i-1, steps[i-1])
			}
			out[i] = int64(d)
		}
		c.timeouts = out
		return nil
	})
}

// WithLevelDecay sets how long a key must go without a timeout, counted
// from the end of its last one, for each level of escalation to be
// forgiven (default 6 hours). d must be positive; any length is honoured
// (time.Duration(math.MaxInt64): levels never decay).
func WithLevelDecay(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("penalty: level decay must be positive, got %v", d)
		}
		c.levelDecay = int64(d)
		return nil
	})
}

// MaxCapacity is the largest capacity NewBox accepts, that of the table
// it builds on (concurrency.MaxTableCapacity, 2^24 keys). At about 250
// bytes per key that is about 4 GiB, preallocated: size a Box for the
// clients it must remember, not for the address space.
const MaxCapacity = concurrency.MaxTableCapacity

// NewBox returns a Box that tracks at most capacity keys, preallocating
// about 250 bytes per key of capacity (1.25 table slots, each with its
// entry and history).
// It returns an error, before allocating anything, for a capacity that is
// not positive or is above MaxCapacity, or for an invalid option.
func NewBox(capacity int, opts ...Option) (*Box, error) {
	c := config{strikes: DefaultStrikes, window: int64(DefaultWindow), levelDecay: int64(DefaultLevelDecay)}
	for _, d := range DefaultTimeouts() {
		c.timeouts = append(c.timeouts, int64(d))
	}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("penalty: nil Option")
		}
		if err := o.apply(&c); err != nil {
			return nil, err
		}
	}
	b := &Box{cfg: c}
	t, err := concurrency.NewTable[entry](capacity, b.recovered, concurrency.WithOverflow(concurrency.OverflowReject))
	if err != nil {
		return nil, fmt.Errorf("penalty: %w", err)
	}
	b.table = t
	b.history = make([]history, t.Slots())
	return b, nil
}

// Check reports whether key is serving a timeout at now and how long is
// left (the Retry-After). It never inserts, takes no lock, writes no shared
// memory and allocates nothing.
//
// It reads the end of the key's timeout without pinning the entry, as a
// seqlock reader (concurrency.PeekRef): the entry's version (even: a
// published entry), the slot's key (still this key), until, the version
// again (unchanged). Then until is the key's own, as it was at the instant
// of that load: another key's timeout is never reported. When the slot is
// being inserted, evicted or pardoned meanwhile, Check asks again pinned.
func (b *Box) Check(key string, now int64) (time.Duration, bool) {
	p, ok := b.table.Peek(key)
	if !ok {
		return 0, false
	}
	e := p.Value()
	if v := e.version.Load(); v&1 == 0 && p.Current() {
		until := e.until.Load()
		if e.version.Load() == v {
			return left(until, now)
		}
	}
	ref, ok := b.table.Lookup(key)
	if !ok {
		return 0, false
	}
	until := ref.Value().until.Load()
	ref.Release()
	return left(until, now)
}

// left is Check's answer for a timeout that ends at until.
func left(until, now int64) (time.Duration, bool) {
	if now < until {
		return time.Duration(until - now), true
	}
	return 0, false
}

// CheckNow is shorthand for Check(key, clock.Now()).
func (b *Box) CheckNow(key string) (time.Duration, bool) { return b.Check(key, clock.Now()) }

// Strike records an offence of key at now and returns the key's status: a
// strike that completes the threshold within the window starts a timeout,
// one level longer than the last unless the level has decayed. Strikes
// during a timeout are ignored.
func (b *Box) Strike(key string, now int64) Status {
	ref, ok := b.table.Get(key, now)
	if !ok {
		return Status{}
	}
	defer ref.Release()
	e := ref.Value()
	h := &b.history[b.table.Index(e)]
	h.lock()
	defer h.unlock()
	// The version cannot change under us: the table resets the entry only
	// when nobody pins it, and Pardon only under the flag.
	if v := e.publish(); h.version != v {
		h.reset(v) // the slot changed hands since the history was written
	}
	st := Status{Tracked: true}
	if until := e.until.Load(); now < until {
		b.ignored.Add(1)
		st.RetryAfter = time.Duration(until - now)
		st.Level = int(b.level(h, now))
		return st
	}
	b.strikes.Add(1)
	h.n++
	h.log[(h.n-1)%MaxStrikes] = now
	st.Strikes = b.countStrikes(h, now)
	st.Level = int(b.level(h, now))
	if st.Strikes < b.cfg.strikes {
		return st
	}
	// Threshold reached: the strikes are consumed by a timeout one level
	// above the decayed level.
	lvl := b.level(h, now) + 1
	d := b.cfg.timeouts[min(lvl, int64(len(b.cfg.timeouts)))-1]
	until := int64(math.MaxInt64) // a step of centuries: until Pardon
	if now <= math.MaxInt64-d {
		until = now + d
	}
	h.n, h.level, h.anchor = 0, lvl, until
	e.until.Store(until)
	b.timeouts.Add(1)
	return Status{RetryAfter: time.Duration(until - now), Level: int(lvl), Started: true, Tracked: true}
}

// StrikeNow is shorthand for Strike(key, clock.Now()).
func (b *Box) StrikeNow(key string) Status { return b.Strike(key, clock.Now()) }

// Pardon forgives key: its timeout ends, its strikes and level are
// cleared. It reports whether the key had state.
func (b *Box) Pardon(key string) bool {
	ref, ok := b.table.Lookup(key)
	if !ok {
		return false
	}
	b.pardon(ref.Value())
	ref.Release()
	return true
}

// pardon clears e, an entry the caller pins, and its history.
func (b *Box) pardon(e *entry) {
	h := &b.history[b.table.Index(e)]
	h.lock()
	e.Reset()
	h.reset(e.publish())
	h.unlock()
}

// Stats returns a snapshot of the Box's counters.
func (b *Box) Stats() Stats {
	return Stats{TableStats: b.table.Stats(), Strikes: b.strikes.Load(),
		Ignored: b.ignored.Load(), Timeouts: b.timeouts.Load()}
}

// countStrikes counts the logged strikes of h that still count at now:
// those less than window old.
func (b *Box) countStrikes(h *history, now int64) int {
	c := 0
	for _, t := range h.log[:min(h.n, MaxStrikes)] {
		if now-t < b.cfg.window {
			c++
		}
	}
	return c
}

// level returns h's escalation level at now: the stored level less one for
// every full levelDecay since the end of the last timeout.
func (b *Box) level(h *history, now int64) int64 {
	if h.level == 0 {
		return 0
	}
	elapsed := now - h.anchor
	if elapsed <= 0 {
		return h.level
	}
	return max(0, h.level-elapsed/b.cfg.levelDecay)
}

// recovered reports whether e is indistinguishable from a fresh entry at
// now: no timeout, no strike within the window, level decayed to zero. The
// table calls it only while it holds the entry exclusively, so nobody
// writes e or its history meanwhile. A stale history (the entry was reset
// and not struck since) has no strikes and no level.
func (b *Box) recovered(e *entry, now int64) bool {
	if now < e.until.Load() {
		return false
	}
	h := &b.history[b.table.Index(e)]
	return h.version != e.version.Load() || b.countStrikes(h, now) == 0 && b.level(h, now) == 0
}
