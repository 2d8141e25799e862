package queueing

import "fmt"

// partition is a named share of the limit and the units it holds.
type partition struct {
	name     string
	fraction float64
	held     int64
}

// guarantee returns the units a partition is guaranteed under limit.
func (p *partition) guarantee(limit int64) int64 { return share(p.fraction, limit) }

// share returns floor(fraction·limit) for 0 < fraction <= 1 and limit >= 0,
// at most limit: near math.MaxInt64 the float product can round past the
// limit, and past MaxInt64 its conversion to int64 is undefined.
func share(fraction float64, limit int64) int64 {
	f := fraction * float64(limit)
	if f >= float64(limit) { // float64(limit) rounds, but f >= it means all of it
		return limit
	}
	return int64(f)
}

func (q *Queue) partitionIndex(name string) int {
	for i := range q.parts {
		if q.parts[i].name == name {
			return i
		}
	}
	return -1
}

// rulesOKLocked reports whether lane l may take n more units under the
// reserve and the partitions. Together with the Admitter's TryAcquire that
// follows under the same lock, it is one atomic decision: no other queue
// caller can act between the check and the acquisition (the check-then-act
// race of Netflix's partitioned limiter cannot happen).
//
// Partition rule: a partition below its guarantee may take units up to it;
// beyond that (and outside any partition) a request may only borrow what
// leaves every other partition's unused guarantee free:
// total + n + sum(unused guarantees of others) <= limit.
//
// Every comparison is written as n against what is left, never as a sum
// that n could carry past MaxInt64: the counts held are each within the
// limit, and the guarantees add up to at most the limit, so the sums of
// those alone never overflow.
func (q *Queue) rulesOKLocked(l lane, n int64) bool {
	if !q.locked {
		return true
	}
	limit := q.lim.Limit()
	if q.cfg.reserve > 0 && l.prio < q.cfg.reserveFrom {
		if n > limit-share(q.cfg.reserve, limit)-q.low {
			return false
		}
	}
	if len(q.parts) == 0 {
		return true // fair share, if any, orders the waiters (see fairShare.next)
	}
	total, others := q.unpart, int64(0)
	for i := range q.parts {
		p := &q.parts[i]
		total += p.held
		if g := p.guarantee(limit); i != l.part && p.held < g {
			others += g - p.held
		}
	}
	if l.part >= 0 {
		if p := &q.parts[l.part]; n <= p.guarantee(limit)-p.held {
			return true
		}
	}
	return n <= limit-total-others
}

// accountLocked books delta units to lane l (negative on release). It
// panics when a release would make a count negative: that release was not
// matched by an acquisition through the same lane.
func (q *Queue) accountLocked(l lane, delta int64) {
	if !q.locked {
		return
	}
	low := q.cfg.reserve > 0 && l.prio < q.cfg.reserveFrom
	var c *int64
	if len(q.parts) > 0 {
		c = &q.unpart
		if l.part >= 0 {
			c = &q.parts[l.part].held
		}
	}
	if (low && q.low+delta < 0) || (c != nil && *c+delta < 0) {
		panic(fmt.Sprintf("queueing: Release of %d units more than lane (priority %v, partition %d) holds", -delta, l.prio, l.part))
	}
	if q.fair != nil {
		if delta > 0 {
			q.fair.get(l).held += delta
		} else {
			q.fair.account(l, delta) // panics before anything changed here
		}
	}
	if low {
		q.low += delta
	}
	if c != nil {
		*c += delta
	}
}

// Held returns the units held through the queue by the named partition, or
// by requests outside every partition for "". It returns an error for an
// unknown name. It is meant for tests and metrics.
func (q *Queue) Held(partition string) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if partition == "" {
		return q.unpart, nil
	}
	i := q.partitionIndex(partition)
	if i < 0 {
		return 0, fmt.Errorf("queueing: no partition %q", partition)
	}
	return q.parts[i].held, nil
}
