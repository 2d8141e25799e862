package adaptive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/internal/clock"
)

// ErrLimited is returned when the limit is reached (for the request's class).
var ErrLimited = errors.New("adaptive: concurrency limit reached")

// ErrDeadline is returned when the request's deadline is shorter than the
// predicted service time (plus the predicted wait, for Acquire): the work
// would be wasted, so it is rejected now.
var ErrDeadline = errors.New("adaptive: deadline shorter than the predicted latency")

// Class names a class of clients for SetPressure. Class 0 is the default.
type Class uint8

// Request describes one admission attempt. The zero value is a class-0
// request without a deadline.
type Request struct {
	// Class selects the pressure factor (see SetPressure).
	Class Class
	// Deadline is the instant, in monotonic nanoseconds, after which the
	// result is useless; 0 means none. Acquire also takes the context's.
	Deadline int64
}

// Limiter enforces a limit that an Algorithm adapts from the outcomes of the
// work it admits. A drop of work admitted before the latest decrease of the
// limit is counted as Window.StaleDrops, not Window.Drops: that decrease
// already answered it, so a burst of late completions cannot shrink the
// limit again and again. Acquire hands out a Token; Token.Done returns the permit
// and records a sample. Samples are aggregated with atomics; when a window
// closes (by age and sample count, see WithWindow and WithWindowSamples) the
// goroutine that closes it steps the Algorithm under a lock that only window
// boundaries take, and resizes the semaphore.
//
// Windows close only when an outcome is reported (there is no timer
// goroutine): with no traffic the limit stays where it is. The admit and
// report paths take no lock and allocate nothing in the common case (Tokens
// come from a pool). A Limiter is safe for concurrent use; the
// zero value is not usable, call NewLimiter. It starts no goroutine.
type Limiter struct {
	sem *concurrency.Semaphore
	alg Algorithm
	cfg limiterConfig

	tokens sync.Pool

	// Window aggregates, written on every Done.
	winStart    atomic.Int64
	count       atomic.Int64
	drops       atomic.Int64
	staleDrops  atomic.Int64
	decreasedAt atomic.Int64 // the window boundary of the latest decrease
	sumNs       atomic.Int64
	minNs       atomic.Int64
	maxInflight atomic.Int64
	hist        histogram

	// Written at window boundaries only.
	winMu   sync.Mutex
	rtt     atomic.Int64 // latest window latency statistic, ns: the predicted service time
	windows atomic.Uint64
	runtime *runtimeReader

	pressure [256]atomic.Uint64 // float64 bits of each class's factor; 0 means 1

	// Blocking Acquire: a FIFO of waiters woken by the semaphore's hook.
	waitMu  sync.Mutex
	waiters []chan struct{}
	nwait   atomic.Int64
}

// NewLimiter returns a Limiter driven by alg, starting at alg.Limit(). The
// Limiter owns alg from then on: do not call alg's methods concurrently.
// It returns an error for a nil alg or an invalid option.
func NewLimiter(alg Algorithm, opts ...LimiterOption) (*Limiter, error) {
	if alg == nil {
		return nil, errors.New("adaptive: nil Algorithm")
	}
	cfg := limiterConfig{minWindow: 100 * time.Millisecond, maxWindow: time.Second,
		minSamples: 10, maxSamples: 1000, percentile: 0.5}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("adaptive: nil LimiterOption")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	sem, err := concurrency.NewSemaphore(int64(max(1, alg.Limit())))
	if err != nil {
		return nil, fmt.Errorf("adaptive: %w", err)
	}
	l := &Limiter{sem: sem, alg: alg, cfg: cfg}
	l.tokens.New = func() any { return &tokenState{l: l} }
	l.minNs.Store(math.MaxInt64)
	if cfg.runtime {
		l.runtime = newRuntimeReader()
	}
	if err := sem.OnCapacity(l.wake); err != nil {
		return nil, fmt.Errorf("adaptive: %w", err)
	}
	return l, nil
}

// SetPressure scales the limit seen by one class of clients by factor in
// (0, 1]: a request of that class is admitted only while inflight is under
// max(1, floor(factor*Limit)), and under the limit itself. It is the hook for
// fingerprint suspicion, penalties and operator overrides; factor 1 removes
// the pressure. The class bound is checked before the (exact) global
// admission, so concurrent admissions of one class may exceed it by the
// number of racing callers; the global limit is never exceeded. Safe for
// concurrent use; returns an error for a factor outside (0, 1].
func (l *Limiter) SetPressure(c Class, factor float64) error {
	if !finite(factor) || factor <= 0 || factor > 1 {
		return fmt.Errorf("adaptive: pressure factor must be in (0, 1], got %v", factor)
	}
	if factor == 1 {
		l.pressure[c].Store(0)
	} else {
		l.pressure[c].Store(math.Float64bits(factor))
	}
	return nil
}

// TryAcquire admits one class-0 request without a deadline if the limit
// allows, and never blocks. It is shorthand for TryAcquireAt(clock.Now(),
// Request{}).
func (l *Limiter) TryAcquire() (Token, bool) {
	t, err := l.TryAcquireAt(clock.Now(), Request{})
	return t, err == nil
}

// TryAcquireAt admits r at now (monotonic nanoseconds) if its class's
// pressure and the limit allow, and never blocks. It returns ErrDeadline when
// r's deadline leaves less than the predicted service time (the latest
// window's latency statistic), and ErrLimited when there is no room. On
// success the Token must be reported exactly once. Safe for concurrent use.
func (l *Limiter) TryAcquireAt(now int64, r Request) (Token, error) {
	if r.Deadline != 0 && r.Deadline-now < l.rtt.Load() {
		return Token{}, ErrDeadline
	}
	if bits := l.pressure[r.Class].Load(); bits != 0 {
		bound := max(1, int64(math.Float64frombits(bits)*float64(l.sem.Limit())))
		if l.sem.Inflight() >= bound {
			return Token{}, ErrLimited
		}
	}
	if !l.sem.TryAcquire(1) {
		return Token{}, ErrLimited
	}
	return l.issue(now), nil
}

func (l *Limiter) issue(now int64) Token {
	// One load and, only when it is a new maximum, a CAS: most admissions
	// do not write the shared line.
	in := l.sem.Inflight()
	for {
		m := l.maxInflight.Load()
		if in <= m || l.maxInflight.CompareAndSwap(m, in) {
			break
		}
	}
	s := l.tokens.Get().(*tokenState)
	s.start = now
	return Token{s: s, gen: s.gen.Load()}
}

// Acquire admits r, waiting while the limit is reached, until ctx is done.
// The deadline is the earlier of ctx's and r.Deadline. It returns
// ErrDeadline at once when the deadline leaves less than the predicted
// service time plus the predicted wait (the latest window latency times the
// waiters ahead, over the limit), and ctx.Err() when ctx ends first; the
// Limiter is unchanged then. Waiters are woken in FIFO order when a permit
// is returned or the limit rises, but a TryAcquire arriving at that moment
// may take the permit first (no strict fairness: the queueing package
// provides disciplines). Safe for concurrent use.
func (l *Limiter) Acquire(ctx context.Context, r Request) (Token, error) {
	now := clock.Now()
	if dl, ok := ctx.Deadline(); ok {
		d := now + int64(time.Until(dl))
		if r.Deadline == 0 || d < r.Deadline {
			r.Deadline = d
		}
	}
	if err := ctx.Err(); err != nil {
		return Token{}, err
	}
	t, err := l.TryAcquireAt(now, r)
	if err != ErrLimited {
		return t, err
	}
	if r.Deadline != 0 {
		rtt := l.rtt.Load()
		wait := rtt * (l.nwait.Load() + 1) / max(1, l.sem.Limit())
		if r.Deadline-now < rtt+wait {
			return Token{}, ErrDeadline
		}
	}
	ch := make(chan struct{}, 1)
	l.enqueue(ch, false)
	for {
		if t, err := l.TryAcquireAt(clock.Now(), Request{Class: r.Class}); err == nil {
			l.dequeue(ch)
			if l.sem.Available() > 0 {
				// A raised limit wakes one waiter; pass the wake on while
				// there is room, so that every free slot finds its waiter.
				l.wake()
			}
			return t, nil
		}
		select {
		case <-ch:
			// Woken and popped: try again, first in line.
			l.enqueue(ch, true)
		case <-ctx.Done():
			l.dequeue(ch)
			return Token{}, ctx.Err()
		}
	}
}

func (l *Limiter) enqueue(ch chan struct{}, front bool) {
	l.waitMu.Lock()
	if front {
		l.waiters = append(l.waiters, nil)
		copy(l.waiters[1:], l.waiters)
		l.waiters[0] = ch
	} else {
		l.waiters = append(l.waiters, ch)
	}
	l.nwait.Add(1)
	l.waitMu.Unlock()
}

// dequeue removes ch; if ch was already popped by a wake it did not use, the
// wake is passed on so that no capacity is left idle with waiters queued.
func (l *Limiter) dequeue(ch chan struct{}) {
	l.waitMu.Lock()
	for i, w := range l.waiters {
		if w == ch {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			l.nwait.Add(-1)
			l.waitMu.Unlock()
			return
		}
	}
	l.waitMu.Unlock()
	select {
	case <-ch:
		l.wake()
	default:
	}
}

// wake is the semaphore's capacity hook: it pops the first waiter and
// signals it. One load when nobody waits.
func (l *Limiter) wake() {
	if l.nwait.Load() == 0 {
		return
	}
	l.waitMu.Lock()
	if len(l.waiters) > 0 {
		ch := l.waiters[0]
		l.waiters = l.waiters[1:]
		l.nwait.Add(-1)
		select {
		case ch <- struct{}{}: // cap 1, and a popped waiter holds no signal yet
		default:
		}
	}
	l.waitMu.Unlock()
}

// finish records one outcome, returns the permit and closes the window when
// it is due.
func (l *Limiter) finish(now, latency int64, o Outcome) {
	switch o {
	case Success:
		latency = max(0, latency)
		l.count.Add(1)
		l.sumNs.Add(latency)
		l.hist.add(latency)
		for {
			m := l.minNs.Load()
			if latency >= m || l.minNs.CompareAndSwap(m, latency) {
				break
			}
		}
	case Dropped:
		if now-latency < l.decreasedAt.Load() {
			l.staleDrops.Add(1)
		} else {
			l.drops.Add(1)
		}
	}
	l.sem.Release(1)
	if o == Ignore {
		return
	}
	l.maybeClose(now)
}

func (l *Limiter) due(now int64) bool {
	age := time.Duration(now - l.winStart.Load())
	n := int(l.count.Load() + l.drops.Load() + l.staleDrops.Load())
	return n >= l.cfg.maxSamples ||
		(age >= l.cfg.minWindow && n >= l.cfg.minSamples) ||
		(age >= l.cfg.maxWindow && n > 0)
}

func (l *Limiter) maybeClose(now int64) {
	if l.winStart.Load() == 0 {
		// The first report opens the first window.
		l.winStart.CompareAndSwap(0, now)
		return
	}
	if !l.due(now) || !l.winMu.TryLock() {
		return
	}
	defer l.winMu.Unlock()
	if !l.due(now) {
		return // another goroutine closed it
	}
	w := Window{Start: l.winStart.Swap(now), End: now}
	count := l.count.Swap(0)
	w.Count = int(count)
	w.Drops = int(l.drops.Swap(0))
	w.StaleDrops = int(l.staleDrops.Swap(0))
	sum := l.sumNs.Swap(0)
	minNs := l.minNs.Swap(math.MaxInt64)
	w.MaxInflight = int(l.maxInflight.Swap(l.sem.Inflight()))
	w.RTT = l.hist.takePercentile(l.cfg.percentile)
	if count > 0 {
		w.MinRTT = time.Duration(minNs)
		w.MeanRTT = time.Duration(sum / count)
		l.rtt.Store(int64(w.RTT))
	}
	if l.runtime != nil {
		w.Runtime = l.runtime.read()
	}
	l.windows.Add(1)
	limit := int64(max(1, l.alg.Update(w)))
	if limit < l.sem.Limit() {
		l.decreasedAt.Store(now)
	}
	_ = l.sem.SetLimit(limit) // never fails for a positive limit
}

// Limit returns the limit in force.
func (l *Limiter) Limit() int { return int(l.sem.Limit()) }

// Waiting returns the callers blocked in Acquire, waiting for a permit.
func (l *Limiter) Waiting() int { return int(max(0, l.nwait.Load())) }

// Inflight returns the number of Tokens not yet reported. A quiet system
// must show 0: anything else is a Token that was never reported.
func (l *Limiter) Inflight() int { return int(l.sem.Inflight()) }

// PredictedLatency returns the latency statistic of the latest window, the
// service time that deadline-aware admission predicts; zero before the
// first window closes.
func (l *Limiter) PredictedLatency() time.Duration { return time.Duration(l.rtt.Load()) }

// Windows returns how many sampling windows have closed.
func (l *Limiter) Windows() uint64 { return l.windows.Load() }
