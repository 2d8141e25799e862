package shed

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/store"
)

// Count says which finished requests a rate rule's charge stands for
// (Rule.Count). The charge is made up front, as for every rule, and given
// back when the request is done with a status the rule does not count: a
// login rule that counts only failures lets the real user in after four
// wrong guesses, and the success costs nothing.
type Count uint8

const (
	// CountAll counts every admitted request (the zero value).
	CountAll Count = iota
	// CountFailures counts requests answered with a status of 400 or more.
	CountFailures
	// CountClientErrors counts requests answered with a 4xx status.
	CountClientErrors
	// CountAuthFailures counts requests answered 401 or 403: failed logins.
	CountAuthFailures
)

// String returns "all", "failures", "client_errors" or "auth_failures".
func (k Count) String() string {
	switch k {
	case CountAll:
		return "all"
	case CountFailures:
		return "failures"
	case CountClientErrors:
		return "client_errors"
	case CountAuthFailures:
		return "auth_failures"
	}
	return fmt.Sprintf("Count(%d)", uint8(k))
}

// counts reports whether a request done with status counts under k.
func (k Count) counts(status int) bool {
	switch k {
	case CountFailures:
		return status >= 400
	case CountClientErrors:
		return status >= 400 && status < 500
	case CountAuthFailures:
		return status == 401 || status == 403
	}
	return true
}

// refundUncounted gives back the charges of the rules of a's set
// that do not count a request done with status: Global rate rules in this
// process, per-key ones in one store call (store.Refunder; a store that
// cannot refund keeps the charge, counted in RuleStats.RefundsLost). It
// runs before a's permits are released, while its keys are still valid.
func (c *Controller) refundUncounted(a *ticket, now int64, status int) {
	for _, ch := range a.rated {
		if r := &a.set.rules[ch.rule]; !r.Count.counts(status) {
			// To the window or shard that counted it, what it still weighs.
			r.rate.RefundLate(ch.from, a.now, now, a.charged, ch.until)
			r.ctr.add(a.shard, rRefunded, 1)
		}
	}
	// The store hits of the admission are a.req's, decided into a.res:
	// keep those to refund, in place (neither is read again).
	n := 0
	for j := range a.req.N {
		i := a.hitRule[j]
		r := &a.set.rules[i]
		if r.Count.counts(status) || r.Algorithm == Concurrency {
			continue
		}
		a.req.Hits[n], a.res.Hits[n], a.hitRule[n] = a.req.Hits[j], a.res.Hits[j], i
		n++
	}
	if n == 0 {
		return
	}
	a.req.N, a.res.N, a.req.Now = n, n, now
	rf, ok := c.storage.store.(store.Refunder)
	err := fmt.Errorf("shed: the store (%T) cannot refund", c.storage.store)
	if ok {
		err = rf.Refund(context.Background(), &a.req, &a.res)
	}
	for _, i := range a.hitRule[:n] {
		if err != nil {
			a.set.rules[i].ctr.add(a.shard, rRefundsLost, 1)
		} else {
			a.set.rules[i].ctr.add(a.shard, rRefunded, 1)
		}
	}
}
