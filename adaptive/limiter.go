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
	"github.com/sluicehq/sluice/queueing"
)

// ErrLimited is returned when the limit is reached (for the request's class).
var ErrLimited = errors.New("adaptive: concurrency limit reached")

// ErrDeadline is returned when the request's deadline is shorter than the
// predicted service time (plus the predicted wait, for Acquire): the work
// would be wasted, so it is rejected now.
var ErrDeadline = errors.New("adaptive: deadline shorter than the predicted latency")

// ErrShed is returned when the Algorithm sheds a share of admissions (see
// Shedder) and this one is in it, or when the request waited past the
// Algorithm's queue bound (see QueueBounder). It does not match
// ErrLimited: waiting would not help, since the limit is not what is
// reached.
var ErrShed = errors.New("adaptive: shed to keep the scheduling delay short")

// weyl is the increment of the sequence that picks the admissions to shed:
// 2^64 over the golden ratio, so that successive values spread evenly over
// [0, 2^64) and any share of them falls below a threshold.
const weyl = 0x9E3779B97F4A7C15

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
	// Priority places the request in the Limiter's queue, relative to
	// queueing.Critical: 0 is Critical (the SRE default), -1
	// SheddablePlus, -2 Sheddable, 1 CriticalPlus. Higher priorities are
	// served first and shed last (see queueing.Priority).
	Priority int8
	// Tenant and Weight place the request in the fair share of a Limiter
	// whose queue shares its limit among tenants
	// (WithQueue(queueing.WithFairShare()), see Limiter.FairShare): a
	// weight of 0 counts as 1, others must be in [1, queueing.MaxWeight].
	// Without fair share they are ignored.
	Tenant string
	Weight int
	// Queued is how long the request waited in the server before it
	// reached the Limiter: from its arrival at the host (the kernel's
	// receive timestamp of its bytes) to the call; 0 when unknown. A
	// QueueBounder's Limiter sheds a request that waited past its bound.
	// shed's middleware fills it from connguard's arrival times.
	Queued time.Duration
}

// Limiter enforces a limit that an Algorithm adapts from the outcomes of the
// work it admits. A drop of work admitted before the latest decrease of the
// limit is counted as Window.StaleDrops, not Window.Drops: that decrease
// already answered it, so a burst of late completions cannot shrink the
// limit again and again. Acquire hands out a Token; Token.Done returns the permit
// and records a sample. Samples are aggregated with atomics; when a window
// closes (by age and sample count, see WithWindow and WithWindowSamples) the
// goroutine that closes it steps the Algorithm under a lock that only window
// boundaries take, and resizes the semaphore. When the Algorithm is a
// Shedder, the Limiter also sheds its share of admissions (ErrShed), picked
// by a deterministic sequence that spreads them evenly; when it asks for
// them (Default does), or with WithRuntimeSignals, the Limiter reads the Go
// runtime's signals at each window boundary.
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

	// shedBelow is the Shedder's share of admissions to shed, scaled to
	// 2^64 (0: none); shedSeq picks them (a Weyl sequence, see weyl).
	shedBelow atomic.Uint64
	shedSeq   atomic.Uint64
	shedCount atomic.Int64 // shed in the current window
	shedder   Shedder
	// queueBound is the QueueBounder's bound on Request.Queued, ns, read
	// from bounder after each Update; 0: none. shedByWait counts the
	// requests shed past it, ever, waitShed those of the current window.
	queueBound atomic.Int64
	shedByWait atomic.Uint64
	waitShed   atomic.Int64
	bounder    QueueBounder

	// q is the queue of the callers that wait in Acquire (FIFO unless
	// WithQueue says otherwise): the queueing package's, over sem.
	q *queueing.Queue
	// lanes are q's ways in for the priorities -2 to 1 (Request.Priority),
	// made once: the admit path does not build one.
	lanes [4]queueing.Lane
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
	if ru, ok := alg.(runtimeUser); cfg.runtime || (ok && ru.usesRuntime()) {
		l.runtime = newRuntimeReader()
	}
	l.shedder, _ = alg.(Shedder)
	l.setShed()
	if qb, ok := alg.(QueueBounder); ok && qb.QueueBound() > 0 {
		l.bounder = qb
		l.setQueueBound()
	}
	if l.q, err = queueing.New(sem, cfg.queue...); err != nil {
		return nil, fmt.Errorf("adaptive: %w", err)
	}
	for i := range l.lanes {
		l.lanes[i], _ = l.q.Lane(queueing.Sheddable+queueing.Priority(i), "") // no partitions: never an error
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
// window's latency statistic), ErrShed when the Algorithm sheds a share of
// admissions (Shedder) and r is in it or r waited past the Algorithm's
// queue bound (QueueBounder) (neither for a request of a priority above
// Critical), and ErrLimited when there is no room. On success the Token must
// be reported exactly once. Safe for concurrent use.
func (l *Limiter) TryAcquireAt(now int64, r Request) (Token, error) {
	if r.Deadline != 0 && r.Deadline-now < l.rtt.Load() {
		return Token{}, ErrDeadline
	}
	// One load when nothing is shed; else one add on a shared word, paid
	// only during an overload.
	if below := l.shedBelow.Load(); below != 0 && r.Priority <= 0 && l.shedSeq.Add(weyl) < below {
		l.shedCount.Add(1)
		return Token{}, ErrShed
	}
	if r.Priority <= 0 && l.ShedWaited(r.Queued) {
		return Token{}, ErrShed
	}
	if l.overPressure(r.Class) {
		return Token{}, ErrLimited
	}
	lane, err := l.lane(r)
	if err != nil {
		return Token{}, err
	}
	if !lane.TryAcquire(1) { // never ahead of a waiter the queue serves first
		return Token{}, ErrLimited
	}
	return l.issue(now, lane), nil
}

// lane is the queue's way in for r: its priority (relative to Critical)
// and, with fair share, its tenant. The error is a weight out of range.
func (l *Limiter) lane(r Request) (queueing.Lane, error) {
	var ln queueing.Lane
	if i := int(r.Priority) + 2; i >= 0 && i < len(l.lanes) {
		ln = l.lanes[i]
	} else {
		ln, _ = l.q.Lane(queueing.Critical+queueing.Priority(r.Priority), "") // no partitions: never an error
	}
	if !l.q.FairShare() {
		return ln, nil
	}
	w := r.Weight
	if w == 0 {
		w = 1
	}
	ln, err := ln.Tenant(r.Tenant, w)
	if err != nil {
		return queueing.Lane{}, fmt.Errorf("adaptive: %w", err)
	}
	return ln, nil
}

// FairShare reports whether the Limiter's queue shares the limit among
// tenants (WithQueue(queueing.WithFairShare())): then Request.Tenant and
// Request.Weight place each request in it.
func (l *Limiter) FairShare() bool { return l.q.FairShare() }

func (l *Limiter) issue(now int64, lane queueing.Lane) Token {
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
	s.start, s.lane = now, lane
	return Token{s: s, gen: s.gen.Load()}
}

// Acquire admits r, waiting while the limit is reached, until ctx is done.
// The deadline is the earlier of ctx's and r.Deadline. It returns
// ErrDeadline at once when the deadline leaves less than the predicted
// service time plus the predicted wait (the latest window latency times the
// waiters it would wait behind, over the limit), ErrLimited at once when r's class is over
// its pressure bound (SetPressure), ctx.Err() when ctx ends first, and an
// error matching queueing.ErrShed when the queue sheds it (full, or by
// its discipline: WithQueue); the Limiter is unchanged then. Waiters wait
// in the queueing package's queue over the Limiter's semaphore, woken when
// a permit is returned or the limit rises, served by priority and in the
// queue's order. Safe for concurrent use.
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
	if err != ErrLimited || l.overPressure(r.Class) {
		return t, err
	}
	lane, err := l.lane(r) // no error: TryAcquireAt made the same lane
	if err != nil {
		return Token{}, err
	}
	if r.Deadline != 0 {
		rtt := l.rtt.Load()
		wait := rtt * (lane.Ahead() + 1) / max(1, l.sem.Limit())
		if r.Deadline-now < rtt+wait {
			return Token{}, ErrDeadline
		}
	}
	if err := lane.Acquire(ctx, 1); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return Token{}, cerr
		}
		return Token{}, err
	}
	return l.issue(clock.Now(), lane), nil
}

// overPressure reports whether class c holds its pressure bound already.
func (l *Limiter) overPressure(c Class) bool {
	bits := l.pressure[c].Load()
	if bits == 0 {
		return false
	}
	return l.sem.Inflight() >= max(1, int64(math.Float64frombits(bits)*float64(l.sem.Limit())))
}

// finish records one outcome, returns the permit and closes the window when
// it is due.
func (l *Limiter) finish(now, latency int64, o Outcome, lane queueing.Lane) {
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
	lane.Release(1) // through the queue: its next waiter gets it
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
	w.Shed = int(l.shedCount.Swap(0))
	w.ShedByWait = int(l.waitShed.Swap(0))
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
	l.setShed()
	l.setQueueBound()
}

// setQueueBound publishes the QueueBounder's bound.
func (l *Limiter) setQueueBound() {
	if l.bounder != nil {
		l.queueBound.Store(max(0, int64(l.bounder.QueueBound())))
	}
}

// setShed publishes the Shedder's share of admissions to shed.
func (l *Limiter) setShed() {
	if l.shedder == nil {
		return
	}
	var below uint64
	switch f := l.shedder.ShedFraction(); {
	case f >= 1:
		below = math.MaxUint64
	case f > 0: // NaN and negative shares shed nothing
		below = uint64(math.Ldexp(f, 64))
	}
	l.shedBelow.Store(below)
}

// QueueBound returns the longest Request.Queued the Limiter admits now
// (see QueueBounder); zero for none.
func (l *Limiter) QueueBound() time.Duration { return time.Duration(l.queueBound.Load()) }

// ShedWaited reports whether the Limiter sheds a request of a priority up
// to Critical that has waited queued (Request.Queued) for its wait, and
// counts the shed when it does, as TryAcquireAt does (ShedByWait, the
// window's Shed and ShedByWait): for a caller that answers such a request
// before it could ask with a whole Request. Safe for concurrent use.
func (l *Limiter) ShedWaited(queued time.Duration) bool {
	if b := l.queueBound.Load(); b == 0 || int64(queued) <= b {
		return false
	}
	l.shedCount.Add(1)
	l.waitShed.Add(1)
	l.shedByWait.Add(1)
	return true
}

// ShedByWait returns how many requests the Limiter has shed because they
// had waited past its queue bound (see QueueBounder). Safe for concurrent
// use.
func (l *Limiter) ShedByWait() uint64 { return l.shedByWait.Load() }

// ShedFraction returns the share of admissions the Limiter sheds now (see
// Shedder); zero for an Algorithm that is not a Shedder.
func (l *Limiter) ShedFraction() float64 {
	return math.Ldexp(float64(l.shedBelow.Load()), -64)
}

// Limit returns the limit in force.
func (l *Limiter) Limit() int { return int(l.sem.Limit()) }

// Waiting returns the callers blocked in Acquire, waiting for a permit.
func (l *Limiter) Waiting() int { return l.q.Len() }

// Inflight returns the number of Tokens not yet reported. A quiet system
// must show 0: anything else is a Token that was never reported. While
// callers acquire concurrently it may count, for an instant, an attempt
// being turned away (see concurrency.Semaphore.Inflight), and read above
// the limit.
func (l *Limiter) Inflight() int { return int(l.sem.Inflight()) }

// PredictedLatency returns the latency statistic of the latest window, the
// service time that deadline-aware admission predicts; zero before the
// first window closes.
func (l *Limiter) PredictedLatency() time.Duration { return time.Duration(l.rtt.Load()) }

// Windows returns how many sampling windows have closed.
func (l *Limiter) Windows() uint64 { return l.windows.Load() }
