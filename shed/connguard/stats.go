package connguard

import "sync/atomic"

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
	// WriteErrors those the 503 could not be written to (the client had
	// gone).
	Unanswered, WriteErrors uint64
}

// counters are a Guard's counters; they change once per connection.
type counters struct {
	accepted, closed, shed, full, idleClosed, unanswered, writeErrors atomic.Uint64
}

// Stats returns a snapshot of g's counters. Safe for concurrent use.
func (g *Guard) Stats() Stats {
	closed := g.ctr.closed.Load() // before accepted: Open is never negative
	accepted := g.ctr.accepted.Load()
	return Stats{
		Accepted: accepted, Open: int64(accepted - closed),
		Shed: g.ctr.shed.Load(), Full: g.ctr.full.Load(),
		IdleClosed: g.ctr.idleClosed.Load(), Unanswered: g.ctr.unanswered.Load(), WriteErrors: g.ctr.writeErrors.Load(),
	}
}
