// Package penalty punishes repeat offenders progressively. A rejection, or
// any offence the caller reports, is a strike; enough strikes within a
// window put the client's key in a timeout; each further timeout lasts
// longer, up to a cap; and good behaviour lets both strikes and the
// escalation level decay on a fixed schedule.
//
// Box keeps that state per key in a bounded concurrency.Table that never
// forgets a client still serving a timeout, still holding strikes or still
// escalated, however many new keys arrive. Box.Check, asked before any
// other rule, answers whether a key is serving a timeout and for how long
// (the Retry-After) from a few loads, without a lock or a pin.
// SuspicionScale turns a suspicion score into a limit multiplier that
// lowers a client's limits before it earns a timeout.
package penalty
