package connguard

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a Guard's counters. Counters only grow, except
// Open.
type Stats struct {
	// Accepted counts the connections the Guard admitted, and Open those
	// of them not closed yet.
	Accepted uint64
	Open     int64
	// Shed counts the connections refused while the Signal shed, and
	// Full those refused at the bound with no idle connection to close.
	Shed, Full uint64
	// IdleClosed counts the idle connections closed to make room for a
	// new one at the bound.
	IdleClosed uint64
	// Unanswered counts the refused connections that Respond closed
	// without the 503 because their request had not arrived yet, and
	// WriteErrors the 503s, of refusals and early answers, that could not
	// be written (the client had gone, or an early answer's write found no
	// room before its deadline: a client that does not read).
	Unanswered, WriteErrors uint64
	// IdleShed counts the connections WithIdleShed closed as they went
	// idle while the Signal shed.
	IdleShed uint64
	// Pauses counts the waits of a pacing listener (WithPause) and Paused
	// is their total length.
	Pauses uint64
	Paused time.Duration
	// EarlyAnswers counts the requests WithEarlyAnswer answered in place
	// of the server (those whose answer could not be written among them,
	// counted in WriteErrors too).
	EarlyAnswers uint64
}

// counters are a Guard's counters; they change once per connection, but
// early, once per early answer.
type counters struct {
	accepted, closed, shed, full, idleClosed, unanswered, writeErrors atomic.Uint64
	idleShed, pauses, pausedNS, early                                 atomic.Uint64
}

// Stats returns a snapshot of g's counters. Safe for concurrent use.
func (g *Guard) Stats() Stats {
	closed := g.ctr.closed.Load() // before accepted: Open is never negative
	accepted := g.ctr.accepted.Load()
	return Stats{
		Accepted: accepted, Open: int64(accepted - closed),
		Shed: g.ctr.shed.Load(), Full: g.ctr.full.Load(),
		IdleClosed: g.ctr.idleClosed.Load(), Unanswered: g.ctr.unanswered.Load(), WriteErrors: g.ctr.writeErrors.Load(),
		IdleShed: g.ctr.idleShed.Load(), Pauses: g.ctr.pauses.Load(), Paused: time.Duration(g.ctr.pausedNS.Load()),
		EarlyAnswers: g.ctr.early.Load(),
	}
}
