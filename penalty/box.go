package penalty

import (
	"fmt"
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
// Check takes no lock and allocates nothing: it pins the key's entry, loads
// one word and unpins. Strike and Pardon change several words of one key's
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
	table    *concurrency.Table[entry, *entry]
	cfg      config
	strikes  atomic.Uint64
	ignored  atomic.Uint64
	timeouts atomic.Uint64
}

// entry is one key's penalty state; every field is atomic so the table can
// hold it and Check can read it without a lock.
type entry struct {
	until  atomic.Int64 // end of the current or last timeout (ns); 0 = none yet
	level  atomic.Int64 // escalation level as of anchor
	anchor atomic.Int64 // when level was last set: the end of the last timeout
	n      atomic.Int64 // strikes recorded since the last timeout (the log holds min(n, MaxStrikes))
	log    [MaxStrikes]atomic.Int64
	busy   atomic.Bool // writer flag for Strike and Pardon
}

// Reset makes e fresh.
func (e *entry) Reset() {
	e.until.Store(0)
	e.level.Store(0)
	e.anchor.Store(0)
	e.n.Store(0)
	for i := range e.log {
		e.log[i].Store(0)
	}
}

func (e *entry) lock() {
	for !e.busy.CompareAndSwap(false, true) {
		runtime.Gosched()
	}
}

func (e *entry) unlock() { e.busy.Store(false) }

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
// positive. A strike counts for exactly window after it happened.
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
// cap). Steps must be positive and never decrease.
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
// forgiven (default 6 hours). d must be positive.
func WithLevelDecay(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("penalty: level decay must be positive, got %v", d)
		}
		c.levelDecay = int64(d)
		return nil
	})
}

// NewBox returns a Box that tracks at most capacity keys, preallocating
// about 230 bytes per key of capacity (the table's slot and 1.25 entries).
// It returns an error for a non-positive capacity or an invalid option.
func NewBox(capacity int, opts ...Option) (*Box, error) {
	c := config{strikes: DefaultStrikes, window: int64(DefaultWindow), levelDecay: int64(DefaultLevelDecay)}
	for _, d := range DefaultTimeouts() {
		c.timeouts = append(c.timeouts, int64(d))
	}
	for _, o := range opts {
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
	return b, nil
}

// Check reports whether key is serving a timeout at now and how long is
// left (the Retry-After). It never inserts, takes no lock and allocates
// nothing.
func (b *Box) Check(key string, now int64) (time.Duration, bool) {
	ref, ok := b.table.Lookup(key)
	if !ok {
		return 0, false
	}
	until := ref.Value().until.Load()
	ref.Release()
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
	e.lock()
	defer e.unlock()
	st := Status{Tracked: true}
	if until := e.until.Load(); now < until {
		b.ignored.Add(1)
		st.RetryAfter = time.Duration(until - now)
		st.Level = int(b.level(e, now))
		return st
	}
	b.strikes.Add(1)
	n := e.n.Add(1)
	e.log[(n-1)%MaxStrikes].Store(now)
	st.Strikes = b.countStrikes(e, now)
	st.Level = int(b.level(e, now))
	if st.Strikes < b.cfg.strikes {
		return st
	}
	// Threshold reached: the strikes are consumed by a timeout one level
	// above the decayed level.
	lvl := b.level(e, now) + 1
	d := b.cfg.timeouts[min(lvl, int64(len(b.cfg.timeouts)))-1]
	until := now + d
	e.n.Store(0)
	for i := range e.log {
		e.log[i].Store(0)
	}
	e.level.Store(lvl)
	e.anchor.Store(until)
	e.until.Store(until)
	b.timeouts.Add(1)
	return Status{RetryAfter: time.Duration(d), Level: int(lvl), Started: true, Tracked: true}
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
	defer ref.Release()
	e := ref.Value()
	e.lock()
	e.Reset()
	e.unlock()
	return true
}

// Stats returns a snapshot of the Box's counters.
func (b *Box) Stats() Stats {
	return Stats{TableStats: b.table.Stats(), Strikes: b.strikes.Load(),
		Ignored: b.ignored.Load(), Timeouts: b.timeouts.Load()}
}

// countStrikes counts the logged strikes of e that still count at now:
// those less than window old.
func (b *Box) countStrikes(e *entry, now int64) int {
	n := min(e.n.Load(), MaxStrikes)
	c := 0
	for i := range n {
		if t := e.log[i].Load(); now-t < b.cfg.window {
			c++
		}
	}
	return c
}

// level returns e's escalation level at now: the stored level less one for
// every full levelDecay since the end of the last timeout.
func (b *Box) level(e *entry, now int64) int64 {
	lvl := e.level.Load()
	if lvl == 0 {
		return 0
	}
	elapsed := now - e.anchor.Load()
	if elapsed <= 0 {
		return lvl
	}
	return max(0, lvl-elapsed/b.cfg.levelDecay)
}

// recovered reports whether e is indistinguishable from a fresh entry at
// now: no timeout, no strike within the window, level decayed to zero. The
// table calls it only while it holds the entry exclusively.
func (b *Box) recovered(e *entry, now int64) bool {
	return now >= e.until.Load() && b.countStrikes(e, now) == 0 && b.level(e, now) == 0
}
