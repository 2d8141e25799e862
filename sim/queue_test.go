package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queueing"
	"pgregory.net/rapid"
)

// script is an Env driven by hand: the test offers requests, completes
// started ones and moves the clock; timers set with At fire as the clock
// passes them.
type script struct {
	t       fatalf
	now     int64
	timers  queue
	started []*Request
	permits map[uint64]Permit
	shed    []uint64
	nextID  uint64
}

type fatalf interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func newScript(t fatalf) *script {
	return &script{t: t, now: Start, permits: map[uint64]Permit{}}
}

func (s *script) Now() int64 { return s.now }

func (s *script) At(t int64, f func()) {
	if t < s.now {
		s.t.Fatalf("At(%d) before now %d", t, s.now)
	}
	s.timers.at(t, f)
}

func (s *script) Start(r *Request, p Permit) {
	s.decide(r)
	s.started = append(s.started, r)
	s.permits[r.ID] = p
}

func (s *script) Shed(r *Request) {
	s.decide(r)
	s.shed = append(s.shed, r.ID)
}

func (s *script) decide(r *Request) {
	if r.decided {
		s.t.Fatalf("request %d decided twice", r.ID)
	}
	r.decided = true
}

// offer presents a new request of priority prio (0 critical) and returns
// its ID.
func (s *script) offer(c Controller, prio int) uint64 {
	s.nextID++
	c.Offer(s, &Request{ID: s.nextID, Arrival: s.now, Deadline: s.now + int64(time.Hour), Priority: prio})
	return s.nextID
}

// done completes the started request id.
func (s *script) done(id uint64) {
	p, ok := s.permits[id]
	if !ok {
		s.t.Fatalf("request %d is not running", id)
	}
	delete(s.permits, id)
	p.Done(s.now, Good)
}

// advance moves the clock by d, firing the timers due on the way.
func (s *script) advance(d time.Duration) {
	to := s.now + int64(d)
	for len(s.timers.h) > 0 && s.timers.h[0].t <= to {
		e, _ := s.timers.next()
		s.now = e.t
		e.f()
	}
	s.now = to
}

func (s *script) startedIDs() []uint64 {
	var ids []uint64
	for _, r := range s.started {
		ids = append(ids, r.ID)
	}
	return ids
}

func mustQueue(t fatalf, cfg QueueConfig) Controller {
	t.Helper()
	c, err := NewQueue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestQueueOrders(t *testing.T) {
	for _, tc := range []struct {
		order queueing.Order
		want  []uint64 // start order
	}{
		{queueing.FIFO, []uint64{1, 2, 3, 4}},
		{queueing.LIFO, []uint64{1, 4, 3, 2}},
	} {
		s := newScript(t)
		c := mustQueue(t, QueueConfig{Limit: 1, Order: tc.order})
		for range 4 {
			s.offer(c, 1)
		}
		for i := uint64(0); i < 3; i++ {
			s.done(s.started[i].ID)
		}
		if got := s.startedIDs(); !slices.Equal(got, tc.want) {
			t.Errorf("%v: started %v, want %v", tc.order, got, tc.want)
		}
		if len(s.shed) != 0 {
			t.Errorf("%v: shed %v from an unbounded queue", tc.order, s.shed)
		}
	}
}

func TestQueueFullShedsWhoWouldBeServedLast(t *testing.T) {
	// FIFO: the newcomer; LIFO: the oldest waiter.
	for _, tc := range []struct {
		order queueing.Order
		shed  uint64
	}{{queueing.FIFO, 4}, {queueing.LIFO, 2}} {
		s := newScript(t)
		c := mustQueue(t, QueueConfig{Limit: 1, Order: tc.order, MaxLength: 2})
		for range 4 {
			s.offer(c, 1)
		}
		if !slices.Equal(s.shed, []uint64{tc.shed}) {
			t.Errorf("%v: shed %v, want [%d]", tc.order, s.shed, tc.shed)
		}
	}
}

func TestQueueMaxWait(t *testing.T) {
	s := newScript(t)
	c := mustQueue(t, QueueConfig{Limit: 1, MaxWait: 10 * time.Millisecond})
	s.offer(c, 1)
	s.offer(c, 1)
	s.advance(5 * time.Millisecond)
	s.offer(c, 1)
	s.advance(5*time.Millisecond - 1)
	if len(s.shed) != 0 {
		t.Fatalf("shed %v before the max wait", s.shed)
	}
	s.advance(1)
	if !slices.Equal(s.shed, []uint64{2}) {
		t.Fatalf("shed %v at 10ms, want [2]", s.shed)
	}
	s.done(1)
	if got := s.startedIDs(); !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("started %v", got)
	}
}

// TestQueueCoDel checks the waiters' expiries against queueing.CoDel's own
// Deadline: the interval while the queue drains, the target once it has
// not been empty for an interval.
func TestQueueCoDel(t *testing.T) {
	const target, interval = 5 * time.Millisecond, 100 * time.Millisecond
	s := newScript(t)
	c := mustQueue(t, QueueConfig{Limit: 1, CoDel: true, Target: target, Interval: interval})
	s.offer(c, 1) // runs until the end
	s.offer(c, 1) // waits into an empty queue: shed after the interval
	s.advance(interval - 1)
	if len(s.shed) != 0 {
		t.Fatalf("shed %v before the interval", s.shed)
	}
	// A second waiter keeps the queue from emptying when the first goes.
	s.offer(c, 1)
	s.advance(1)
	if !slices.Equal(s.shed, []uint64{2}) {
		t.Fatalf("shed %v after the interval, want [2]", s.shed)
	}
	// The queue is standing since waiter 3 joined (1ns ago): its deadline
	// is the target after its arrival.
	s.advance(target - 2)
	if len(s.shed) != 1 {
		t.Fatalf("shed %v before the target", s.shed)
	}
	s.advance(1)
	if !slices.Equal(s.shed, []uint64{2, 3}) {
		t.Fatalf("shed %v, want [2 3]", s.shed)
	}
	// The queue emptied when 3 left: a new waiter gets the interval again.
	s.offer(c, 1)
	s.advance(interval - 1)
	if len(s.shed) != 2 {
		t.Fatalf("shed %v: the queue was empty, yet the waiter went early", s.shed)
	}
	s.advance(1)
	if len(s.shed) != 3 {
		t.Fatalf("shed %v after the interval", s.shed)
	}
}

func TestQueueAdaptiveLIFO(t *testing.T) {
	s := newScript(t)
	c := mustQueue(t, QueueConfig{Limit: 1, Order: queueing.AdaptiveLIFO})
	s.offer(c, 1)
	s.offer(c, 1)
	s.offer(c, 1)
	s.done(1) // the queue is not standing: the oldest goes
	s.offer(c, 1)
	s.advance(queueing.DefaultInterval) // standing now: the newest goes
	s.done(2)
	if got := s.startedIDs(); !slices.Equal(got, []uint64{1, 2, 4}) {
		t.Fatalf("started %v, want [1 2 4]", got)
	}
}

func TestQueuePriorities(t *testing.T) {
	s := newScript(t)
	c := mustQueue(t, QueueConfig{Limit: 1, Priorities: true, MaxLength: 3})
	s.offer(c, 1) // 1 runs
	s.offer(c, 1) // 2 waits: Share(Sheddable, 3) = 1
	s.offer(c, 1) // 3 is cut off
	s.offer(c, 0) // 4 critical waits
	s.offer(c, 0) // 5 critical waits: the queue is full now
	s.offer(c, 0) // 6 critical displaces sheddable 2
	s.offer(c, 0) // 7 critical is shed: nobody below it
	if !slices.Equal(s.shed, []uint64{3, 2, 7}) {
		t.Fatalf("shed %v, want [3 2 7]", s.shed)
	}
	s.done(1)
	s.done(4)
	if got := s.startedIDs(); !slices.Equal(got, []uint64{1, 4, 5}) {
		t.Fatalf("started %v, want [1 4 5]", got)
	}
	// Without priorities, a critical request waits its turn.
	s = newScript(t)
	c = mustQueue(t, QueueConfig{Limit: 1})
	s.offer(c, 1)
	s.offer(c, 1)
	s.offer(c, 0)
	s.done(1)
	if got := s.startedIDs(); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("started %v, want [1 2]", got)
	}
}

func TestQueueReserve(t *testing.T) {
	s := newScript(t)
	c := mustQueue(t, QueueConfig{Limit: 10, Priorities: true, Reserve: 0.2, ReserveFrom: queueing.Critical})
	for range 9 {
		s.offer(c, 1)
	}
	// Sheddable work holds at most 10 - floor(0.2*10) = 8; the ninth waits
	// although a permit is free, and a critical request passes it.
	if len(s.started) != 8 {
		t.Fatalf("%d sheddable started, want 8", len(s.started))
	}
	crit := s.offer(c, 0)
	if s.started[len(s.started)-1].ID != crit {
		t.Fatal("a critical request did not start on the reserve")
	}
	s.done(1)
	if got := s.started[len(s.started)-1].ID; got != 9 {
		t.Fatalf("after a sheddable release, %d started, want the waiting 9", got)
	}
	if c.Limit() != 10 {
		t.Fatalf("limit %d", c.Limit())
	}
}

func TestQueueConfigErrors(t *testing.T) {
	for name, cfg := range map[string]QueueConfig{
		"limit":        {},
		"length":       {Limit: 1, MaxLength: -1},
		"wait":         {Limit: 1, MaxWait: -1},
		"order":        {Limit: 1, Order: 9},
		"codel":        {Limit: 1, CoDel: true, Target: time.Second, Interval: time.Millisecond},
		"reserve":      {Limit: 1, Priorities: true, Reserve: 1.5},
		"reserve only": {Limit: 1, Reserve: 0.2},
	} {
		if _, err := NewQueue(cfg); err == nil || !strings.HasPrefix(err.Error(), "sim: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := StandardQueue("nope", 1); err == nil {
		t.Error("unknown queue accepted")
	}
	for _, name := range QueueNames {
		cfg, err := StandardQueue(name, StdWorkers)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewQueue(cfg); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestQueueProperties drives random configurations through random
// arrivals, completions and clock steps: every request is decided at most
// once, inflight never exceeds the limit, and nobody waits while a permit is
// free (without a reserve, which may hold a waiter back on purpose).
func TestQueueProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := QueueConfig{
			Limit:      rapid.IntRange(1, 5).Draw(t, "limit"),
			Order:      queueing.Order(rapid.IntRange(0, 2).Draw(t, "order")),
			MaxLength:  rapid.IntRange(0, 6).Draw(t, "maxLen"),
			Priorities: rapid.Bool().Draw(t, "priorities"),
		}
		if rapid.Bool().Draw(t, "maxWait") {
			cfg.MaxWait = time.Duration(rapid.IntRange(1, 50).Draw(t, "wait")) * time.Millisecond
		}
		if rapid.Bool().Draw(t, "codel") {
			cfg.CoDel, cfg.Target, cfg.Interval = true, 5*time.Millisecond, 20*time.Millisecond
		}
		reserve := cfg.Priorities && rapid.Bool().Draw(t, "reserve")
		if reserve {
			cfg.Reserve, cfg.ReserveFrom = 0.4, queueing.Critical
		}
		s := newScript(t)
		c := mustQueue(t, cfg)
		offered := 0
		for range rapid.IntRange(1, 80).Draw(t, "steps") {
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				s.offer(c, rapid.IntRange(0, 1).Draw(t, "prio"))
				offered++
			case 1:
				if len(s.permits) > 0 {
					ids := make([]uint64, 0, len(s.permits))
					for id := range s.permits {
						ids = append(ids, id)
					}
					slices.Sort(ids)
					s.done(ids[rapid.IntRange(0, len(ids)-1).Draw(t, "which")])
				}
			case 2:
				s.advance(time.Duration(rapid.IntRange(0, 30).Draw(t, "ms")) * time.Millisecond)
			}
			if len(s.permits) > cfg.Limit {
				t.Fatalf("%d in flight over a limit of %d", len(s.permits), cfg.Limit)
			}
			waiting := offered - len(s.started) - len(s.shed)
			if waiting < 0 {
				t.Fatalf("%d decisions for %d requests", len(s.started)+len(s.shed), offered)
			}
			if !reserve && waiting > 0 && len(s.permits) < cfg.Limit {
				t.Fatalf("%d waiting while %d of %d permits are free", waiting, cfg.Limit-len(s.permits), cfg.Limit)
			}
			if cfg.MaxLength > 0 && waiting > cfg.MaxLength {
				t.Fatalf("%d waiting in a queue of %d", waiting, cfg.MaxLength)
			}
		}
	})
}
