package shed

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/store"
)

// Counters of the whole Controller, indexes into a shard.
const (
	cAdmitted = iota
	cOverLimit
	cShedding
	cPenalized
	cDryRun
	cFailedOpen
	cStoreErrors
	cFinished // admitted attempts done: Inflight is cAdmitted - cFinished
	cStrikes
	cQueueWaits
	cQueueWaitNs
	cQueueShed
	cDoubleDone
	cPanics
	cLeaseLost
	cEarly
	cEarlyHeld
	cUnknownPeer
	cProxyPeer
	cCGNAT
	cExempt
	cTightened
	cTightenedWouldReject
	cPeeks
	cGone
	// cDeciding and the next counter are the decisions running in even
	// and odd epochs (see Controller.enter).
	cDeciding
	_
	nGlobal
)

// Counters of each rule, in its own counters.
const (
	rAllowed = iota
	rRejected
	rWouldReject
	rFailOpen
	rFailClosed
	rEarly
	rOverflowed
	rRefunded
	rRefundsLost
	rOverspent
	rWaited
	rWaitNs
	rWaitCancelled
	rTightenedWouldReject
	rOverflowPrefix
	nPerRule
)

// padWords keeps the counters of different shards off each other's cache
// lines (128 bytes, see concurrency's padding).
const padWords = 16

// counters is a set of int64 counters sharded so that the goroutines of
// different Ps rarely touch one cache line: each pooled attempt picks a
// shard when it is made, and sync.Pool keeps attempts per P. Sums are read
// by Stats only.
type counters struct {
	shards [][]atomic.Int64
	n      int
}

func newCounters(n int) counters {
	// Eight shards per P: an attempt's shard comes from its ticket's
	// number (see newTicket), and tickets move between Ps.
	k := 1
	for k < 8*runtime.GOMAXPROCS(0) && k < 256 {
		k <<= 1
	}
	c := counters{shards: make([][]atomic.Int64, k), n: n}
	for i := range c.shards {
		if n <= padWords {
			// A shard of one cache line's worth is an allocation of its
			// own 128-byte size class: aligned, alone on its lines (the
			// per-rule counters, one set per rule).
			c.shards[i] = make([]atomic.Int64, padWords)[:n]
			continue
		}
		// Padding on both sides: each shard is its own allocation, but
		// neighbours in memory must not share its first or last line.
		c.shards[i] = make([]atomic.Int64, n+2*padWords)[padWords : padWords+n]
	}
	return c
}

func (c *counters) add(shard, i int, v int64) { c.shards[shard][i].Add(v) }

func (c *counters) sum(i int) int64 {
	var s int64
	for _, sh := range c.shards {
		s += sh[i].Load()
	}
	return s
}

// Stats is a snapshot of a Controller's counters, for metrics and tests.
// Counters only grow, except Inflight and Waiting.
type Stats struct {
	// Decisions by kind: attempts admitted, rejected over a limit
	// (429), shed (503) and rejected by a penalty.
	Admitted, OverLimit, Shedding, Penalized uint64
	// DryRun counts attempts that a dry-run rule or penalty would have
	// rejected (and that were admitted).
	DryRun uint64
	// FailedOpen counts attempts admitted because the store failed and
	// every store rule involved fails open (a bypass of those rules);
	// StoreErrors counts store calls that failed, whatever followed.
	FailedOpen, StoreErrors uint64
	// Inflight is the number of admitted attempts whose Token is not done:
	// 0 on a quiet system.
	Inflight int64
	// Strikes counts strikes given to the penalty box; Penalty is the
	// box's own snapshot (keys, timeouts started) when it offers one, as
	// penalty.Box does.
	Strikes uint64
	Penalty penalty.Stats
	// StoreReports says whether the store reports its health
	// (store.HealthReporter, as a fallback.Store does); Store is that
	// report: degraded mode, the local share, fallback decisions.
	StoreReports bool
	Store        store.Health
	// QueueWaits counts attempts that went to a concurrency rule's queue,
	// QueueWait their total wait, QueueShed those the queue rejected: full
	// on arrival (a wait of zero), timed out, or shed by its discipline.
	QueueWaits uint64
	QueueWait  time.Duration
	QueueShed  uint64
	// DoubleDone counts Token.Done calls on a token already done
	// (harmless: nothing was released twice).
	DoubleDone uint64
	// Panics counts handlers that did not return under the middleware:
	// they panicked or called runtime.Goexit (their permits were returned
	// before the panic or exit went on).
	Panics uint64
	// LeasesLost counts store leases that had expired before their
	// request finished (their permits had come back by themselves).
	LeasesLost uint64
	// EarlyWarnings counts keys that passed half their limit in the first
	// fifth of their window (see WithEarlyWarning); EarlyWarningsHeld
	// those not passed to the hook and the log because more than
	// EarlyWarningBurst came in one second.
	EarlyWarnings, EarlyWarningsHeld uint64
	// UnknownPeers counts requests whose peer address (RemoteAddr) the
	// resolver could not parse, such as a unix socket's: per-IP rules
	// count them all on the one key "ip:unknown".
	//
	// It and ProxyWithoutHeader count the requests whose address was read:
	// the middleware does not read it for a request decided on Global
	// rules that never wait alone, with no exemption and none of
	// WithPenalties, WithObserver, WithClient, WithCost, WithSuspicion
	// (nothing there keys on it).
	UnknownPeers uint64
	// ProxyWithoutHeader counts requests from a trusted proxy that sent
	// none of the resolver's configured headers: keyed on the proxy.
	ProxyWithoutHeader uint64
	// CGNAT counts per-IP rule decisions for clients in carrier-grade NAT
	// ranges that raised the limit (Rule.CGNATFactor) or skipped the rule
	// for a stronger identity (Rule.CGNATDefer).
	CGNAT uint64
	// Exempt counts requests the middleware let through unlimited
	// (WithExemptions).
	Exempt uint64
	// Tightened counts decisions made on tightened limits (WithSuspicion;
	// with tightening in dry-run, decisions that would have been).
	// TightenedWouldReject counts admitted decisions that tightening in
	// dry-run (Suspicion.DryRun, WithDryRun) would have rejected.
	Tightened, TightenedWouldReject uint64
	// Peeks counts Peek and PeekRequest calls that read the rules (not
	// those that failed validation): none of them counts as a decision
	// above.
	Peeks uint64
	// Gone counts requests the middleware, and attempts Decide, did not
	// decide because their context had ended before (the client closed
	// its connection or reset its stream while the request waited in
	// front of the handler): no handler ran, no rule was charged, no
	// adaptive sample was taken. The middleware answered each 503, which
	// nobody reads; Decide returned the context's error.
	Gone uint64
	// Rules has one entry per rule in force, in the order given to New
	// or the latest Reload.
	Rules []RuleStats
}

// RuleStats is one rule's part of Stats.
type RuleStats struct {
	// Name, Category, Tier, Identity and Algorithm repeat the rule.
	Name      string
	Category  string
	Tier      string
	Identity  Identity
	Algorithm Algorithm
	// Allowed counts attempts the rule admitted; Rejected those it
	// rejected; WouldReject those it would have rejected in dry-run.
	Allowed, Rejected, WouldReject uint64
	// FailOpen and FailClosed count attempts decided by the rule's failure
	// mode because the store failed.
	FailOpen, FailClosed uint64
	// EarlyWarnings counts the rule's early warnings (WithEarlyWarning).
	EarlyWarnings uint64
	// Overflowed counts the rule's decisions of keys that did not fit the
	// store's full table (Rule.Overflow): shed with 503, or counted on the
	// shared overflow state, or decided on its network prefix.
	Overflowed uint64
	// OverflowPrefix counts those of the Overflowed decisions made on the
	// limit of the client's network prefix (OverflowPrefix), admitted or
	// not.
	OverflowPrefix uint64
	// Refunded counts charges given back when a request was done with a
	// status the rule does not count (Rule.Count); RefundsLost those the
	// store could not give back (it is no store.Refunder, or it failed).
	Refunded, RefundsLost uint64
	// Overspent counts attempts whose true cost (Token.Recost,
	// WithActualCost) the rule could not charge, or give back, any more:
	// the quota was spent by then (or the store failed).
	Overspent uint64
	// Waited counts attempts that waited for the slot a rate rule with
	// MaxWait reserved for them and then ran, WaitTime their total wait;
	// WaitCancelled those whose context ended while they waited (their
	// reservation was cancelled). MaxWait repeats the rule's.
	Waited, WaitCancelled uint64
	WaitTime, MaxWait     time.Duration
	// TightenedWouldReject counts attempts the rule's tightened limit
	// would have rejected, with tightening in dry-run (Suspicion.DryRun).
	TightenedWouldReject uint64
	// ShedByWait counts the attempts an Adaptive rule shed because they
	// had waited past its algorithm's queue bound (adaptive.QueueBounder,
	// Attempt.Queued) when it decided them; they are among Rejected.
	ShedByWait uint64
	// QueueBound is an Adaptive rule's queue bound in force: the longest
	// Attempt.Queued it admits now (adaptive.QueueBounder; Default's
	// tightens under a standing overload); zero when it has none.
	QueueBound time.Duration
	// Limit is the limit in force (an adaptive rule's current limit).
	Limit int64
	// Inflight is the permits held of a Global Concurrency or Adaptive
	// rule (of a sharded Concurrency rule, a sum of shard caches read one
	// after another: exact when no decision runs), and Waiting the
	// requests queued for one, or waiting for the slots a TokenBucket rule
	// with MaxWait reserved.
	Inflight int64
	Waiting  int
	// Table is the store's key table of a per-key rule (keys held,
	// capacity, evictions, overflows) when the store reports one (Memory
	// does); zero otherwise.
	Table concurrency.TableStats
}

// tableStatser is what Memory offers beyond Store.
type tableStatser interface {
	TableStats(id store.LimitID) concurrency.TableStats
}

// Stats returns a snapshot of the counters. It is safe for concurrent use
// and takes no lock shared with the request path; counters read while
// requests run may be mutually a little out of step.
func (c *Controller) Stats() Stats {
	u := func(i int) uint64 { return uint64(max(0, c.ctr.sum(i))) }
	set := c.set.Load()
	// Finished before admitted: every finish follows its admission on the
	// same shard, so the difference is never negative.
	finished := c.ctr.sum(cFinished)
	s := Stats{
		Admitted: u(cAdmitted), OverLimit: u(cOverLimit), Shedding: u(cShedding), Penalized: u(cPenalized),
		DryRun: u(cDryRun), FailedOpen: u(cFailedOpen), StoreErrors: u(cStoreErrors),
		Inflight: c.ctr.sum(cAdmitted) - finished, Strikes: u(cStrikes),
		QueueWaits: u(cQueueWaits), QueueWait: time.Duration(c.ctr.sum(cQueueWaitNs)), QueueShed: u(cQueueShed),
		DoubleDone: u(cDoubleDone), Panics: u(cPanics), LeasesLost: u(cLeaseLost),
		EarlyWarnings: u(cEarly), EarlyWarningsHeld: u(cEarlyHeld), UnknownPeers: u(cUnknownPeer), ProxyWithoutHeader: u(cProxyPeer), CGNAT: u(cCGNAT), Exempt: u(cExempt), Tightened: u(cTightened), TightenedWouldReject: u(cTightenedWouldReject), Peeks: u(cPeeks), Gone: u(cGone),
		Rules: make([]RuleStats, len(set.rules)),
	}
	if hr, ok := c.storage.store.(store.HealthReporter); ok {
		s.StoreReports, s.Store = true, hr.Health()
	}
	if ps, ok := c.pen.(penaltyStatser); ok {
		s.Penalty = ps.Stats()
	}
	ts, _ := c.storage.store.(tableStatser)
	for i := range set.rules {
		r := &set.rules[i]
		ru := func(j int) uint64 { return uint64(max(0, r.ctr.sum(j))) }
		rs := RuleStats{Name: r.Name, Category: r.Category, Tier: r.Tier, Identity: r.Identity, Algorithm: r.Algorithm,
			Allowed: ru(rAllowed), Rejected: ru(rRejected), WouldReject: ru(rWouldReject),
			FailOpen: ru(rFailOpen), FailClosed: ru(rFailClosed), EarlyWarnings: ru(rEarly), Overflowed: ru(rOverflowed), Refunded: ru(rRefunded), RefundsLost: ru(rRefundsLost), Overspent: ru(rOverspent),
			Waited: ru(rWaited), WaitCancelled: ru(rWaitCancelled), WaitTime: time.Duration(r.ctr.sum(rWaitNs)), MaxWait: r.MaxWait,
			TightenedWouldReject: ru(rTightenedWouldReject), OverflowPrefix: ru(rOverflowPrefix), Limit: r.Limit}
		switch {
		case r.lim != nil:
			rs.Limit, rs.Inflight, rs.Waiting = int64(r.lim.Limit()), int64(r.lim.Inflight()), r.lim.Waiting()
			rs.ShedByWait, rs.QueueBound = r.lim.ShedByWait(), r.lim.QueueBound()
		case r.sem.ok():
			rs.Inflight = r.sem.Inflight()
			if r.queue != nil {
				rs.Waiting = r.queue.Len()
			}
		case r.id != 0 && ts != nil:
			rs.Table = ts.TableStats(r.id)
		}
		if r.waits != nil {
			rs.Waiting = int(r.waits.n.Load()) // waiting for reserved rate slots
		}
		s.Rules[i] = rs
	}
	return s
}

// Shedding returns the largest share of admissions that an Adaptive rule in
// force sheds now (adaptive.Limiter.ShedFraction), in [0, 1]: zero while no
// rule's algorithm sheds (see adaptive.Shedder) and for rules in dry-run.
// It is the signal for shedding before a request exists, at a server's
// accept (package connguard). Safe for concurrent use; it neither blocks
// nor allocates, and costs one atomic load per Adaptive rule.
func (c *Controller) Shedding() float64 {
	var f float64
	set := c.set.Load()
	for i := range set.rules {
		if r := &set.rules[i]; r.lim != nil && !r.dry {
			f = max(f, r.lim.ShedFraction())
		}
	}
	return f
}
