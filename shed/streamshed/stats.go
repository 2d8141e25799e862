package streamshed

import "sync/atomic"

// Stats is a snapshot of a Guard's counters. Counters only grow, except
// Open.
type Stats struct {
	// Opened counts the connections Open admitted.
	Opened uint64
	// Open is the number of admitted connections not ended yet.
	Open int64
	// Violations counts the connections closed for a message over their
	// limit (PolicyViolation).
	Violations uint64
	// ContextEnded counts the connections ended by the end of Open's
	// context, and LifetimeEnded those ended at WithMaxLifetime (both
	// closed with GoingAway).
	ContextEnded, LifetimeEnded uint64
	// CloseErrors counts the CloseFunc calls that returned an error (the
	// connection was gone already, or the close handshake failed).
	CloseErrors uint64
}

// counters are a Guard's counters; they change once per connection, never
// per message.
type counters struct {
	opened, ended, violations, ctxEnded, lifeEnded, closeErrors atomic.Uint64
}

// Stats returns a snapshot of g's counters. Safe for concurrent use.
func (g *Guard) Stats() Stats {
	ended := g.ctr.ended.Load() // before opened: Open is never negative
	opened := g.ctr.opened.Load()
	return Stats{
		Opened:        opened,
		Open:          int64(opened - ended),
		Violations:    g.ctr.violations.Load(),
		ContextEnded:  g.ctr.ctxEnded.Load(),
		LifetimeEnded: g.ctr.lifeEnded.Load(),
		CloseErrors:   g.ctr.closeErrors.Load(),
	}
}
