package adaptive

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/queueing"
)

// Token is the permit for one admitted unit of work. Report its end exactly
// once with Done or DoneAt; every path (error, timeout, panic) must report,
// or the permit is lost. A Token is a small value: copy it freely, but
// only one copy may report. The zero Token is not valid.
type Token struct {
	s   *tokenState
	gen uint64
}

// tokenState is pooled; gen tells a live Token from a stale copy, so that a
// second Done is detected even after the state has been reused.
type tokenState struct {
	l     *Limiter
	start int64
	lane  queueing.Lane // the request's, to give the permit back through it
	gen   atomic.Uint64
}

// Done reports the outcome now. It is shorthand for DoneAt(clock.Now(), o).
func (t Token) Done(o Outcome) { t.DoneAt(clock.Now(), o) }

// DoneAt reports the outcome at now (monotonic nanoseconds): for Success the
// latency is now minus the admission instant. It returns the permit. A
// second report of the same Token, or a report of the zero Token, is a
// programmer error and panics without touching the permits. Safe for
// concurrent use with other Tokens; never blocks.
func (t Token) DoneAt(now int64, o Outcome) {
	s := t.s
	if s == nil {
		panic("adaptive: Done on the zero Token")
	}
	if !s.gen.CompareAndSwap(t.gen, t.gen+1) {
		panic("adaptive: Token reported twice")
	}
	l, start, lane := s.l, s.start, s.lane
	s.lane = queueing.Lane{}
	l.tokens.Put(s)
	l.finish(now, now-start, o, lane)
}

// DoneWithLatency reports o with a latency the caller measured itself and
// returns the permit; the window's clock advances to the admission instant
// plus latency. A negative latency, a second report or a report of the zero
// Token panics.
func (t Token) DoneWithLatency(o Outcome, latency time.Duration) {
	if latency < 0 {
		panic("adaptive: negative latency")
	}
	if t.s == nil {
		panic("adaptive: Done on the zero Token")
	}
	t.DoneAt(t.s.start+int64(latency), o)
}
