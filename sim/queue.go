package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/queueing"
)

// QueueConfig describes a waiting discipline in front of a fixed
// concurrency limit, for NewQueue.
type QueueConfig struct {
	// Limit is the concurrency limit (at least 1); requests beyond it wait.
	Limit int
	// Order picks the next waiter among those of equal priority; an
	// AdaptiveLIFO queue detects a standing queue with CoDel (Target and
	// Interval when CoDel is set, the queueing defaults otherwise).
	Order queueing.Order
	// MaxLength bounds the number of waiters; 0 means unbounded. A request
	// of priority p may join while fewer than queueing.Share(p, MaxLength)
	// wait; otherwise whoever would be served last is shed.
	MaxLength int
	// MaxWait, when positive, sheds a waiter once it has waited that long.
	MaxWait time.Duration
	// CoDel turns on controlled-delay shedding with Target and Interval
	// (see queueing.NewCoDel).
	CoDel            bool
	Target, Interval time.Duration
	// Priorities, when set, serves requests by priority (PriorityOf):
	// higher first, with the graded length cut-off. Otherwise every request
	// waits in one line as queueing.Critical, whatever its priority.
	Priorities bool
	// Reserve, when positive, keeps that fraction of Limit for requests of
	// priority ReserveFrom and above, as queueing.WithReserve does; it needs
	// Priorities.
	Reserve     float64
	ReserveFrom queueing.Priority
}

// PriorityOf maps a simulated request to a queueing priority: priority 0
// (critical) is queueing.Critical, every other is queueing.Sheddable.
func PriorityOf(r *Request) queueing.Priority {
	if r.Priority == 0 {
		return queueing.Critical
	}
	return queueing.Sheddable
}

// Waiter is implemented by Controllers that may hold a request before
// deciding it; reports of their runs include the wait of served work
// (Result.P99Wait).
type Waiter interface {
	Controller
	// Waits reports whether the Controller may hold requests.
	Waits() bool
}

// NewQueue returns a Controller that makes requests wait, in a model queue
// driven by the simulator's events, for a permit of a fixed concurrency
// limit. The admission itself is the real thing: a queueing.Queue over a
// concurrency.Semaphore, used only through its non-blocking
// Lane.TryAcquire and Lane.Release, so the reserve arithmetic is
// queueing's own; CoDel is queueing.CoDel and the length cut-off
// queueing.Share. The line of waiters is modelled here, because the
// queueing package keeps its own inside the blocking Queue: waiters are
// grouped by priority (highest served first) when cfg.Priorities is set,
// ordered by cfg.Order within a priority; a full queue sheds the request that would be served last (the
// newcomer, or a waiter of lower priority, or under LIFO at that moment the
// oldest of equal priority); each waiter is shed at its expiry (MaxWait or
// CoDel's Deadline, fixed while it waits), checked at every event; a
// waiter its reserve does not allow is passed over by those of other
// priorities. It returns an error for an invalid configuration.
//
// The Controller belongs to one run; it is not safe for concurrent use.
func NewQueue(cfg QueueConfig) (Controller, error) {
	switch {
	case cfg.MaxLength < 0:
		return nil, fmt.Errorf("sim: queue max length must not be negative, got %d", cfg.MaxLength)
	case cfg.MaxWait < 0:
		return nil, fmt.Errorf("sim: queue max wait must not be negative, got %v", cfg.MaxWait)
	case cfg.Reserve != 0 && !cfg.Priorities:
		return nil, fmt.Errorf("sim: a queue reserve needs priorities")
	}
	sem, err := concurrency.NewSemaphore(int64(cfg.Limit))
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	opts := []queueing.Option{queueing.WithOrder(cfg.Order)}
	if cfg.Reserve != 0 {
		opts = append(opts, queueing.WithReserve(cfg.Reserve, cfg.ReserveFrom))
	}
	gate, err := queueing.New(sem, opts...)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	q := &queueModel{cfg: cfg, sem: sem}
	if cfg.CoDel || cfg.Order == queueing.AdaptiveLIFO {
		target, interval := queueing.DefaultTarget, queueing.DefaultInterval
		if cfg.CoDel {
			target, interval = cfg.Target, cfg.Interval
		}
		if q.codel, err = queueing.NewCoDel(target, interval); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
	}
	prios := []queueing.Priority{queueing.Critical}
	if cfg.Priorities {
		prios = append(prios, queueing.Sheddable) // highest first
	}
	for _, p := range prios {
		lane, err := gate.Lane(p, "")
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		q.classes = append(q.classes, &class{prio: p, lane: lane})
	}
	return q, nil
}

type queueModel struct {
	cfg     QueueConfig
	sem     *concurrency.Semaphore
	codel   *queueing.CoDel // standing-queue detector; sheds when cfg.CoDel
	classes []*class        // highest priority first
	n       int             // waiters in all classes
	env     Env
}

// class holds the waiters of one priority, oldest first, in a deque.
type class struct {
	prio queueing.Priority
	lane queueing.Lane
	w    []waiting
	head int
}

type waiting struct {
	r      *Request
	expiry int64 // math.MaxInt64: none
}

func (c *class) len() int        { return len(c.w) - c.head }
func (c *class) oldest() waiting { return c.w[c.head] }
func (c *class) newest() waiting { return c.w[len(c.w)-1] }
func (c *class) push(w waiting)  { c.w = append(c.w, w) }

func (c *class) popNewest() waiting {
	w := c.newest()
	c.w[len(c.w)-1] = waiting{}
	c.w = c.w[:len(c.w)-1]
	if c.head == len(c.w) {
		c.w, c.head = c.w[:0], 0
	}
	return w
}

func (c *class) popOldest() waiting {
	w := c.oldest()
	c.w[c.head] = waiting{}
	c.head++
	if c.head == len(c.w) {
		c.w, c.head = c.w[:0], 0
	} else if c.head > 1024 && 2*c.head > len(c.w) {
		c.w = append(c.w[:0], c.w[c.head:]...)
		c.head = 0
	}
	return w
}

func (q *queueModel) Limit() int  { return int(q.sem.Limit()) }
func (q *queueModel) Waits() bool { return true }

func (q *queueModel) classOf(r *Request) *class {
	if !q.cfg.Priorities {
		return q.classes[0]
	}
	p := PriorityOf(r)
	for _, c := range q.classes {
		if c.prio == p {
			return c
		}
	}
	panic("sim: no class for priority " + p.String())
}

// lifo reports whether the newest waiter of a priority goes first now.
func (q *queueModel) lifo(now int64) bool {
	switch q.cfg.Order {
	case queueing.LIFO:
		return true
	case queueing.AdaptiveLIFO:
		return q.codel.Standing(now)
	}
	return false
}

// left records that a waiter left the line at now.
func (q *queueModel) left(now int64) {
	q.n--
	if q.n == 0 && q.codel != nil {
		q.codel.Empty(now)
	}
}

func (q *queueModel) Offer(env Env, r *Request) {
	q.env = env
	now := env.Now()
	q.grant(now)
	c := q.classOf(r)
	if q.n == 0 && q.codel != nil {
		q.codel.Empty(now) // an arrival into an empty queue
	}
	// Admitted at once when the waiters left after granting (none, or only
	// ones their reserve holds back) do not come first.
	if c.lane.TryAcquire(1) {
		env.Start(r, queuePermit{q, c.lane})
		return
	}
	if !q.join(c, now) {
		env.Shed(r)
		return
	}
	w := waiting{r: r, expiry: q.expiry(now)}
	c.push(w)
	q.n++
	if w.expiry != math.MaxInt64 {
		env.At(w.expiry, func() { q.grant(env.Now()) })
	}
}

// expiry returns when a waiter that joins at enq is shed.
func (q *queueModel) expiry(enq int64) int64 {
	at := int64(math.MaxInt64)
	if q.cfg.MaxWait > 0 {
		at = enq + int64(q.cfg.MaxWait)
	}
	if q.cfg.CoDel {
		at = min(at, q.codel.Deadline(enq))
	}
	return at
}

// join decides whether a request of class c may wait: the graded length
// cut-off, which may displace the waiter that would be served last.
func (q *queueModel) join(c *class, now int64) bool {
	if q.cfg.MaxLength == 0 || q.n < queueing.Share(c.prio, q.cfg.MaxLength) {
		return true
	}
	lifo := q.lifo(now)
	for i := len(q.classes) - 1; i >= 0; i-- { // the lowest priority waiting
		last := q.classes[i]
		if last.len() == 0 {
			continue
		}
		if last.prio < c.prio || (last.prio == c.prio && lifo) {
			var w waiting
			if lifo {
				w = last.popOldest()
			} else {
				w = last.popNewest()
			}
			q.left(now)
			q.env.Shed(w.r)
			return true
		}
		break
	}
	return false
}

// sweep sheds the waiters whose expiry has passed. Within a priority the
// expiry grows with the arrival, so the oldest go first.
func (q *queueModel) sweep(now int64) {
	for _, c := range q.classes {
		for c.len() > 0 && c.oldest().expiry <= now {
			w := c.popOldest()
			q.left(now)
			q.env.Shed(w.r)
		}
	}
}

// grant sheds expired waiters, then starts waiters in order while there is
// capacity; a priority its reserve holds back is passed over.
func (q *queueModel) grant(now int64) {
	if q.n == 0 {
		return
	}
	q.sweep(now)
	for _, c := range q.classes {
		for c.len() > 0 {
			if !c.lane.TryAcquire(1) {
				if q.sem.Available() == 0 {
					return // no capacity: nobody can start
				}
				break // the reserve holds this priority back
			}
			var w waiting
			if q.lifo(now) {
				w = c.popNewest()
			} else {
				w = c.popOldest()
			}
			q.left(now)
			q.env.Start(w.r, queuePermit{q, c.lane})
		}
	}
}

type queuePermit struct {
	q    *queueModel
	lane queueing.Lane
}

func (p queuePermit) Done(now int64, _ Outcome) {
	p.lane.Release(1)
	p.q.grant(now)
}
