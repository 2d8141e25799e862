package shed

import (
	"fmt"

	"github.com/sluicehq/sluice/queueing"
)

// Priority is how much an attempt matters when a Global Concurrency rule's
// queue chooses whom to serve and whom to shed: Google SRE's criticality
// classes. The zero value is Critical, the SRE default for work nobody
// marked; mark batch and prefetch work Sheddable.
type Priority int8

// The classes, lowest first.
const (
	// Sheddable work is shed first: it may wait only while the queue is
	// under a third full, and never in the reserve (Queue.Reserve).
	Sheddable Priority = iota - 2
	// SheddablePlus work may wait while the queue is under two thirds full.
	SheddablePlus
	// Critical work (the zero value) may fill the queue and the reserve.
	Critical
	// CriticalPlus work is served before Critical work.
	CriticalPlus
)

// String returns "sheddable", "sheddable_plus", "critical" or
// "critical_plus".
func (p Priority) String() string {
	switch p {
	case Sheddable:
		return "sheddable"
	case SheddablePlus:
		return "sheddable_plus"
	case Critical:
		return "critical"
	case CriticalPlus:
		return "critical_plus"
	}
	return fmt.Sprintf("Priority(%d)", int8(p))
}

// lane is p's index among a rule's queue lanes.
func (p Priority) lane() int { return int(p - Sheddable) }

// nPriorities is the number of classes.
const nPriorities = int(CriticalPlus-Sheddable) + 1

// Queue is the waiting discipline of a Global Concurrency rule with a
// MaxWait (the queueing package's): in what order waiters are served,
// whom it sheds early, and how much of the limit only critical work may
// use. Waiters of higher Priority are always served first. The zero value
// is FIFO with no CoDel, no deadline check and no reserve.
type Queue struct {
	// Order among waiters of equal priority: queueing.FIFO (zero),
	// queueing.LIFO, or queueing.AdaptiveLIFO (FIFO until a standing queue
	// forms, then newest first).
	Order queueing.Order
	// CoDel sheds waiters that have waited past queueing.DefaultTarget
	// while a standing queue lasts (queueing.DefaultInterval): short
	// waits under a blip, none under overload.
	CoDel bool
	// DeadlineAware sheds at once an attempt whose context deadline falls
	// before its expected turn, rather than letting it wait in vain.
	DeadlineAware bool
	// Reserve is the share of the limit, in [0, 1), that only Critical and
	// CriticalPlus attempts may take through the queue (Stripe keeps 0.2).
	Reserve float64
	// FairShare shares the limit among the identities it names (Tenant,
	// User, APIKey or IP; Global, the zero value, shares nothing), work
	// conserving: each busy identity is guaranteed its weight's share
	// (Attempt.Weight) of the limit, capacity that no other identity
	// waits for is lent to whoever asks, and it is taken back as permits
	// free up, for the owner's waiters are served first: within a
	// priority, the identity holding least per unit of weight (see
	// queueing.WithFairShare). A full queue sheds the newest waiter of the
	// identity with the most waiting. Attempts without that identity share
	// one share. The queue tracks an identity only while it holds or waits
	// for permits, so at most Limit plus QueueLength of them. It applies to
	// Global Concurrency rules with a MaxWait and to Adaptive rules with a
	// MaxWait whose Limiter's queue has fair share
	// (adaptive.WithQueue(queueing.WithFairShare())); for an Adaptive rule
	// it is the only Queue field that applies (the rest is the Limiter's).
	FairShare Identity
}

// options returns the queueing options of q beside the rule's max wait and
// length.
func (q Queue) options() []queueing.Option {
	var opts []queueing.Option
	if q.Order != queueing.FIFO {
		opts = append(opts, queueing.WithOrder(q.Order))
	}
	if q.CoDel {
		opts = append(opts, queueing.WithCoDel(queueing.DefaultTarget, queueing.DefaultInterval))
	}
	if q.DeadlineAware {
		opts = append(opts, queueing.WithDeadlineAware())
	}
	if q.Reserve > 0 {
		opts = append(opts, queueing.WithReserve(q.Reserve, Critical.queueing()))
	}
	if q.FairShare != Global {
		opts = append(opts, queueing.WithFairShare())
	}
	return opts
}

// queueing returns the queueing package's level of p.
func (p Priority) queueing() queueing.Priority {
	return queueing.Sheddable + queueing.Priority(p.lane())
}
