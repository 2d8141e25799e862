package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Start is the virtual instant, in nanoseconds, at which every run begins;
// Env.Now() is never below it. Offsets in a Scenario are from Start.
const Start = int64(time.Second)

// Run simulates s with controller c and seed, and returns the measurements.
// It is deterministic: the same scenario, controller state and seed give the
// same Result. It returns an error for an invalid scenario or a controller
// that breaks the Controller contract (two decisions for one request).
func Run(s Scenario, c Controller, seed uint64) (res Result, err error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	if c == nil {
		return Result{}, fmt.Errorf("sim: %s: nil controller", s.Name)
	}
	r := &runner{s: s, c: c,
		arrivals: rand.New(rand.NewPCG(seed, 0x61727269)), // "arri"
		retries:  rand.New(rand.NewPCG(seed, 0x72657472)), // "retr"
		buckets:  make([]bucket, int((s.Duration+s.Bucket-1)/s.Bucket)),
		end:      Start + int64(s.Duration),
	}
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(contractError); ok {
				err = e
				return
			}
			panic(p)
		}
	}()
	r.now = Start
	r.classFrom, r.classTo = Start+int64(s.Warmup), r.end-int64(s.Clients.horizon())
	r.maxRate = r.peakRate()
	if r.maxRate > 0 {
		r.q.at(Start+r.interarrival(), r.arrive)
	}
	for i := range r.buckets {
		r.q.at(Start+int64(i+1)*int64(s.Bucket)-1, func() { r.buckets[i].limit = c.Limit() })
	}
	for {
		e, ok := r.q.next()
		if !ok || e.t > r.end {
			break
		}
		r.now = e.t
		e.f()
	}
	return r.result(), nil
}

type contractError struct{ error }

type bucket struct {
	originals, attempts, good, late, shed int
	lat                                   []int64
	limit                                 int
}

type runner struct {
	s        Scenario
	c        Controller
	q        queue
	now, end int64
	arrivals *rand.Rand
	retries  *rand.Rand
	maxRate  float64
	nextID   uint64
	busy     int
	fifo     []*Request
	head     int
	tokens   float64
	buckets  []bucket
	lat      []int64 // admitted-work latencies completed after warm-up
	wait     []int64 // their waits before admission
	pending  int     // requests offered and not yet decided
	// Per-priority counts of first attempts arriving in [classFrom,
	// classTo) and of those served within a deadline by some attempt.
	classFrom, classTo int64
	classOrig          [2]int
	classGood          [2]int
}

// env is the Env the controller sees; a distinct type keeps runner's
// methods out of the controller's reach.
type env struct{ r *runner }

func (e env) Now() int64 { return e.r.now }

func (e env) At(t int64, f func()) {
	if t < e.r.now {
		panic(contractError{fmt.Errorf("sim: %s: Env.At in the past", e.r.s.Name)})
	}
	e.r.q.at(t, f)
}

func (e env) Start(req *Request, p Permit) {
	r := e.r
	r.decide(req)
	if p == nil {
		panic(contractError{fmt.Errorf("sim: %s: Env.Start with a nil Permit", r.s.Name)})
	}
	req.admitted, req.permit = r.now, p
	r.fifo = append(r.fifo, req)
	r.serve()
}

func (e env) Shed(req *Request) {
	r := e.r
	r.decide(req)
	r.bucketAt(r.now).shed++
	r.retry(req)
}

func (r *runner) decide(req *Request) {
	if req.decided {
		panic(contractError{fmt.Errorf("sim: %s: request %d decided twice", r.s.Name, req.ID)})
	}
	req.decided = true
	r.pending--
}

func (r *runner) offset() time.Duration { return time.Duration(r.now - Start) }

func (r *runner) bucketAt(t int64) *bucket {
	i := min(max(0, int((t-Start)/int64(r.s.Bucket))), len(r.buckets)-1)
	return &r.buckets[i]
}

func (r *runner) peakRate() float64 {
	var m float64
	for _, s := range r.s.Clients.Rate {
		m = max(m, s.Rate)
	}
	if b := r.s.Clients.Burst; b.Every > 0 && b.Factor > 1 {
		m *= b.Factor
	}
	return m
}

func (r *runner) interarrival() int64 {
	return max(1, int64(r.arrivals.ExpFloat64()/r.maxRate*1e9))
}

// arrive handles a candidate arrival of the peak-rate process, thinned to
// the rate in force (so the process is Poisson with a time-varying rate).
func (r *runner) arrive() {
	r.q.at(r.now+r.interarrival(), r.arrive)
	if r.arrivals.Float64()*r.maxRate >= rateAt(r.s.Clients.Rate, r.s.Clients.Burst, r.offset()) {
		return
	}
	service := r.drawService(r.arrivals)
	prio := 1
	if r.arrivals.Float64() < r.s.Clients.Critical {
		prio = 0
	}
	r.tokens = min(10, r.tokens+r.s.Clients.Retry.Budget)
	r.bucketAt(r.now).originals++
	if r.inClassWindow(r.now) {
		r.classOrig[prio]++
	}
	r.offer(&Request{Priority: prio, service: service, origin: r.now})
}

func (r *runner) drawService(rng *rand.Rand) time.Duration {
	m := r.s.Server.MinFraction
	// The conversion stops the compiler fusing a multiply-add (allowed on
	// arm64 and others), so that a seed gives the same numbers everywhere.
	return time.Duration(float64(r.s.Server.Service) * (m + float64((1-m)*rng.ExpFloat64())))
}

func (r *runner) offer(req *Request) {
	r.nextID++
	req.ID, req.Arrival, req.Deadline = r.nextID, r.now, r.now+int64(r.s.Clients.Deadline)
	r.bucketAt(r.now).attempts++
	r.pending++
	if r.s.Clients.Retry.OnTimeout {
		r.q.at(req.Deadline, func() {
			if !req.done() {
				r.retry(req) // the client gave up on it
			}
		})
	}
	r.c.Offer(env{r}, req)
}

func (r *runner) inClassWindow(t int64) bool { return t >= r.classFrom && t < r.classTo }

// horizon is the longest a request can take from its first attempt to the
// end of its last: every attempt's deadline plus the longest backoffs.
func (c Clients) horizon() time.Duration {
	h := c.Deadline * time.Duration(c.Retry.Max+1)
	for n := range c.Retry.Max {
		h += c.Retry.Backoff << n
	}
	return h
}

// done reports whether an admitted request has completed; completion sets
// admitted to -1.
func (req *Request) done() bool { return req.admitted < 0 }

// retry sends the next attempt of req if the policy and budget allow.
func (r *runner) retry(req *Request) {
	p := r.s.Clients.Retry
	if req.Attempt >= p.Max || req.retried() {
		return
	}
	if p.Budget > 0 {
		if r.tokens < 1 {
			return
		}
		r.tokens--
	}
	req.markRetried()
	backoff := float64(p.Backoff) * math.Pow(2, float64(req.Attempt)) * r.retries.Float64()
	next := &Request{Priority: req.Priority, Attempt: req.Attempt + 1, service: r.drawService(r.retries), origin: req.origin}
	r.q.at(r.now+int64(backoff), func() { r.offer(next) })
}

// An attempt is retried at most once (on shed or on timeout, whichever
// comes first).
func (req *Request) retried() bool { return req.wasRetried }
func (req *Request) markRetried()  { req.wasRetried = true }

func (r *runner) serve() {
	for r.busy < r.s.Server.Workers && r.head < len(r.fifo) {
		req := r.fifo[r.head]
		r.fifo[r.head] = nil
		r.head++
		r.busy++
		st := time.Duration(float64(req.service) * factorAt(r.s.Server.Slowdown, r.offset()))
		r.q.at(r.now+max(1, int64(st)), func() {
			r.busy--
			if d := delayAt(r.s.Server.Dependency, r.offset()); d > 0 {
				r.q.at(r.now+int64(d), func() { r.complete(req) })
			} else {
				r.complete(req)
			}
			r.serve()
		})
	}
	if r.head > 1024 && r.head*2 > len(r.fifo) {
		r.fifo = append(r.fifo[:0], r.fifo[r.head:]...)
		r.head = 0
	}
}

func (r *runner) complete(req *Request) {
	o := Good
	if r.now > req.Deadline {
		o = Late
	}
	b := r.bucketAt(r.now)
	lat := r.now - req.Arrival
	b.lat = append(b.lat, lat)
	if r.now >= Start+int64(r.s.Warmup) {
		r.lat = append(r.lat, lat)
		r.wait = append(r.wait, req.admitted-req.Arrival)
	}
	if o == Good {
		b.good++
		if r.inClassWindow(req.origin) {
			r.classGood[req.Priority]++
		}
	} else {
		b.late++
	}
	req.admitted = -1
	req.permit.Done(r.now, o)
}
