package queueing

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

// Pacer lets work out at exactly n per period, evenly spaced and with no
// bursts: a leaky bucket of depth one. Slot k of a busy run starts at
// anchor + floor(k*period/n), so any window of one period holds exactly n
// slots and consecutive slots are period/n apart (rounded to nanoseconds,
// never drifting). An idle Pacer builds up no credit: the next request after
// a pause gets a slot at once and the spacing starts again from there.
//
// Use it in front of a fragile downstream (an SMS gateway, a third-party
// API). A Pacer is safe for concurrent use; it takes a short lock per
// reservation. The zero value is not usable; call NewPacer.
type Pacer struct {
	n, period int64

	mu     sync.Mutex
	anchor int64 // start of the current run of slots
	k      int64 // next slot index in the run, 0 <= k < n
	active bool  // a run exists (some slot was handed out)
	seq    uint64
	undo   pacerState // state before the latest reservation
}

type pacerState struct {
	anchor, k int64
	active    bool
}

// NewPacer returns a Pacer that hands out n slots per period. It returns an
// error unless n and period are positive, period/n is at least a nanosecond
// and n*period fits in an int64. Any period is honoured: a slot that would
// start past math.MaxInt64 (a period of centuries, or slots reserved that
// far ahead) starts at math.MaxInt64, that is never, so the schedule never
// wraps into the past.
func NewPacer(n int64, period time.Duration) (*Pacer, error) {
	if n <= 0 || period <= 0 {
		return nil, fmt.Errorf("queueing: pacer needs a positive count and period, got %d per %v", n, period)
	}
	if int64(period) < n {
		return nil, fmt.Errorf("queueing: pacer spacing %v/%d is below a nanosecond", period, n)
	}
	if hi, lo := bits.Mul64(uint64(n), uint64(period)); hi != 0 || lo > math.MaxInt64 {
		return nil, fmt.Errorf("queueing: pacer %d per %v overflows", n, period)
	}
	return &Pacer{n: n, period: int64(period)}, nil
}

// slot returns the start of slot k of the current run, MaxInt64 (never)
// when that is past it.
func (p *Pacer) slot(k int64) int64 {
	return addSat(p.anchor, k*p.period/p.n) // k < n and n*period fits: the product cannot overflow
}

// reserveLocked hands out the next slot at or after now.
func (p *Pacer) reserveLocked(now int64) int64 {
	p.undo = pacerState{p.anchor, p.k, p.active}
	p.seq++
	if !p.active || p.slot(p.k) < now {
		// Idle since the last slot: no credit, a new run starts now.
		p.anchor, p.k, p.active = now, 0, true
	}
	at := p.slot(p.k)
	if p.k++; p.k == p.n {
		// Slot n of this run is exactly one period after slot 0.
		p.anchor, p.k = addSat(p.anchor, p.period), 0
	}
	return at
}

// ReserveAt takes the next slot and returns the instant it starts, never
// before now (math.MaxInt64, never, for a slot past it); the caller must
// not start its work before then. A
// reservation made this way cannot be given back. ReserveAt is the pure
// form for a simulator: it reads no clock.
func (p *Pacer) ReserveAt(now int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reserveLocked(now)
}

// AllowAt takes the next slot only if it starts at or before now, and
// reports whether it did. It never waits.
func (p *Pacer) AllowAt(now int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active && p.slot(p.k) > now {
		return false
	}
	p.reserveLocked(now)
	return true
}

// Allow is shorthand for AllowAt(clock.Now()).
func (p *Pacer) Allow() bool { return p.AllowAt(clock.Now()) }

// Wait blocks until the caller's slot starts. It returns ErrDeadline at
// once, taking no slot, when ctx's deadline falls before the slot, and
// ctx.Err() when ctx ends while waiting; then the slot is given back if no
// later slot was handed out meanwhile (otherwise it stays a gap: the Pacer
// may run below its rate, never above it).
func (p *Pacer) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	now := clock.Now()
	at := p.reserveLocked(now)
	seq := p.seq
	if dl, ok := ctx.Deadline(); ok && at > now && time.Until(dl) < time.Duration(at-now) {
		p.cancelLocked(seq)
		p.mu.Unlock()
		return ErrDeadline
	}
	p.mu.Unlock()
	if at <= now {
		return nil
	}
	t := time.NewTimer(time.Duration(at - now))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		p.cancelLocked(seq)
		p.mu.Unlock()
		return ctx.Err()
	}
}

// cancelLocked gives back reservation seq if it is still the latest.
func (p *Pacer) cancelLocked(seq uint64) {
	if p.seq != seq {
		return
	}
	p.anchor, p.k, p.active = p.undo.anchor, p.undo.k, p.undo.active
	p.seq++ // the undo state is spent
}
