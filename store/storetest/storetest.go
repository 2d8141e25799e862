package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// Option configures Run.
type Option interface{ apply(*config) }

type config struct {
	serverTime bool
	wait       time.Duration
	wrap       func(t *testing.T, body func(t *testing.T))
	skipWhy    string
	skip       []string
}

type serverTimeOption time.Duration

func (o serverTimeOption) apply(c *config) { c.serverTime, c.wait = true, time.Duration(o) }

// WithServerTime declares that the store decides on its own clock and
// ignores Request.Now, as a network store does. The harness then asserts
// nothing that needs controlled time (exact instants, RetryAfter−1ns still
// rejected), and it tests window rollover and lease expiry by sleeping for
// real, at most about maxWait per test, with windows and TTLs of maxWait/4.
// A maxWait of zero skips those tests.
func WithServerTime(maxWait time.Duration) Option { return serverTimeOption(maxWait) }

type wrapOption func(t *testing.T, body func(t *testing.T))

func (o wrapOption) apply(c *config) { c.wrap = o }

// WithWrapper runs the body of every subtest through wrap, which must call
// body once with a *testing.T that belongs to the subtest: for example
// synctest.Test, so that the sleeps of WithServerTime take no real time for
// a store that reads a clock which follows the bubble's.
func WithWrapper(wrap func(t *testing.T, body func(t *testing.T))) Option { return wrapOption(wrap) }

type skipOption struct {
	why   string
	parts []string
}

func (o skipOption) apply(c *config) { c.skipWhy, c.skip = o.why, o.parts }

// WithSkip skips every subtest whose name (t.Name(), the test's included)
// contains one of parts, before its store is made, saying why: the
// subtests of an algorithm the store refuses at Register, or of every
// algorithm ("/max_hits", "/unregister").
func WithSkip(why string, parts ...string) Option { return skipOption{why: why, parts: parts} }

// Run runs the conformance tests on the Store that newStore returns; it
// calls newStore once per subtest, for a store in which no limit is
// registered yet. Without options the store must decide at Request.Now.
//
// Covered: each algorithm's Nth request admitted and N+1th rejected, costs,
// peeks, keys kept apart, RetryAfter honoured (a retry then succeeds) and
// window rollover, all-or-nothing across layered limits in every pair of
// algorithms (a rejection by a later limit leaves earlier ones uncharged),
// 50 concurrent requests against a limit of 10 (exactly 10 admitted, also
// layered), concurrency leases (released exactly once, expiring by TTL,
// their permits conserved), Unregister (later calls naming the limit fail
// with store.ErrUnknownLimit, also while decisions race with it; the name
// is free again, the ID is not reused), bad specs and requests (errors
// starting with "store: ", nothing charged), a refund of a fixed or
// sliding window's admission made after the next window filled (it gives
// that next window nothing back), a refund of a token bucket's or sliding
// log's admission made after the bucket refilled it or the log let it
// expire (it gives nothing back to the admissions since), and for a store
// that
// implements store.Updater, Update: raising and lowering each algorithm's
// limit keeps the key's usage (3 used of 3 raised to 4: exactly 1 more), a
// token bucket's lowered rate keeps the tokens owed, reservations of a
// token bucket or fixed window hit with MaxWait (exact slots, cancelled by
// Refund, given back when a later hit rejects), a new lease TTL applies
// to new leases, what cannot change in place is refused, and decisions
// racing with Updates never admit more than the largest limit in force, nor
// past the last one once it returned.
func Run(t *testing.T, newStore func(t *testing.T) store.Store, opts ...Option) {
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.wrap == nil {
		cfg.wrap = func(t *testing.T, body func(t *testing.T)) { body(t) }
	}
	// run runs one subtest on a fresh store.
	run := func(t *testing.T, name string, test func(h *harness)) {
		t.Run(name, func(t *testing.T) {
			for _, p := range cfg.skip {
				if strings.Contains(t.Name(), p) {
					t.Skipf("%s (%s)", cfg.skipWhy, p)
				}
			}
			cfg.wrap(t, func(t *testing.T) {
				test(&harness{t: t, s: newStore(t), cfg: cfg, now: int64(1) << 40})
			})
		})
	}
	for _, alg := range algorithms {
		run(t, "limit/"+alg.String(), func(h *harness) { testLimit(h, alg) })
		run(t, "cost/"+alg.String(), func(h *harness) { testCost(h, alg) })
		run(t, "retry/"+alg.String(), func(h *harness) { testRetry(h, alg) })
		run(t, "concurrent/"+alg.String(), func(h *harness) { testConcurrent(h, alg) })
		for _, second := range algorithms {
			name := "all_or_nothing/" + alg.String() + "+" + second.String()
			run(t, name, func(h *harness) { testAllOrNothing(h, alg, second) })
		}
		run(t, "concurrent_layered/"+alg.String(), func(h *harness) { testConcurrentLayered(h, alg) })
		run(t, "reset/"+alg.String(), func(h *harness) { testReset(h, alg) })
		run(t, "refund/"+alg.String(), func(h *harness) { testRefund(h, alg) })
	}
	for _, alg := range []store.Algorithm{store.FixedWindow, store.SlidingWindow} {
		run(t, "refund_crossed/"+alg.String(), func(h *harness) { testRefundCrossed(h, alg) })
	}
	for _, alg := range []store.Algorithm{store.TokenBucket, store.SlidingLog} {
		run(t, "refund_late/"+alg.String(), func(h *harness) { testRefundLate(h, alg) })
	}
	run(t, "refund_late_partial/"+store.TokenBucket.String(), func(h *harness) { testRefundLatePartial(h) })
	for _, alg := range []store.Algorithm{store.TokenBucket, store.FixedWindow} {
		run(t, "reserve/"+alg.String(), func(h *harness) { testReserve(h, alg) })
	}
	run(t, "max_hits", func(h *harness) { testMaxHits(h) })
	run(t, "lease/release_once", func(h *harness) { testLeaseRelease(h) })
	run(t, "lease/expiry", func(h *harness) { testLeaseExpiry(h) })
	run(t, "unregister", func(h *harness) { testUnregister(h) })
	run(t, "unregister/concurrent", func(h *harness) { testUnregisterConcurrent(h) })
	run(t, "bad/specs", func(h *harness) { testBadSpecs(h) })
	run(t, "bad/requests", func(h *harness) { testBadRequests(h) })
	runUpdate(func(name string, test func(h *harness)) { run(t, name, test) })
}

var algorithms = []store.Algorithm{
	store.TokenBucket, store.FixedWindow, store.SlidingWindow, store.SlidingLog, store.Concurrency,
}

// harness is one subtest's store and clock.
type harness struct {
	t   *testing.T
	s   store.Store
	u   store.Updater // s, for the Update tests
	cfg config
	now int64 // Request.Now; a server-time store ignores it
	n   int   // spec names
}

// spec returns SpecOf's spec of alg admitting limit per period, under a
// name of its own.
func (h *harness) spec(alg store.Algorithm, limit int64, period time.Duration) store.Spec {
	h.n++
	return SpecOf(alg, fmt.Sprintf("%v-%d", alg, h.n), limit, period)
}

func (h *harness) register(spec store.Spec) store.LimitID {
	h.t.Helper()
	id, err := h.s.Register(context.Background(), spec)
	if err != nil {
		h.t.Fatalf("Register(%+v): %v", spec, err)
	}
	if id == 0 {
		h.t.Fatalf("Register(%+v) returned the zero LimitID", spec)
	}
	return id
}

// refunder returns the store as a store.Refunder, and skips the test
// where it is none.
func (h *harness) refunder() store.Refunder {
	h.t.Helper()
	rf, ok := h.s.(store.Refunder)
	if !ok {
		h.t.Skip("the store does not implement store.Refunder")
	}
	return rf
}

// decide decides hits at h.now and checks the result's shape.
func (h *harness) decide(hits ...store.Hit) *store.Result {
	h.t.Helper()
	req := &store.Request{Now: h.now}
	for _, x := range hits {
		req.Add(x.Limit, x.Key, x.Cost)
	}
	res := new(store.Result)
	if err := h.s.Decide(context.Background(), req, res); err != nil {
		h.t.Fatalf("Decide(%+v): %v", hits, err)
	}
	h.checkShape(req, res)
	return res
}

func (h *harness) checkShape(req *store.Request, res *store.Result) {
	h.t.Helper()
	if !h.cfg.serverTime && res.Now != req.Now {
		h.t.Fatalf("Result.Now = %d, want Request.Now %d", res.Now, req.Now)
	}
	if res.Decider < 0 || res.Decider >= req.N {
		h.t.Fatalf("Decider %d out of range for %d hits", res.Decider, req.N)
	}
	if res.Allowed {
		if res.N != req.N {
			h.t.Fatalf("allowed with N = %d, want %d", res.N, req.N)
		}
		for i := range res.Hits[:res.N] {
			d := res.Hits[i].Decision
			if !d.Allowed() || d.Reason() != ratelimit.ReasonAllowed || d.RetryAfter != 0 {
				h.t.Fatalf("allowed request, hit %d: %+v", i, d)
			}
			if d.Remaining < res.Decision().Remaining {
				h.t.Fatalf("Decider %d has Remaining %d, hit %d fewer (%d)", res.Decider, res.Decision().Remaining, i, d.Remaining)
			}
		}
		return
	}
	if res.N != res.Decider+1 {
		h.t.Fatalf("rejected with N = %d and Decider %d, want N = Decider+1", res.N, res.Decider)
	}
	d := res.Decision()
	if d.Allowed() || d.Reason() == ratelimit.ReasonAllowed || d.RetryAfter <= 0 {
		h.t.Fatalf("rejected request, deciding hit: %+v", d)
	}
	for i := range res.Hits[:res.N] {
		if res.Hits[i].Lease.Held() {
			h.t.Fatalf("rejected request holds a lease on hit %d: %+v", i, res.Hits[i].Lease)
		}
		if i < res.Decider && !res.Hits[i].Decision.Allowed() {
			h.t.Fatalf("hit %d before the decider %d rejected: %+v", i, res.Decider, res.Hits[i].Decision)
		}
	}
}

// peek returns the state of limit id for key without charging it.
func (h *harness) peek(id store.LimitID, key string) ratelimit.Decision {
	h.t.Helper()
	res := h.decide(store.Hit{Limit: id, Key: key})
	d := res.Hits[0].Decision
	if !res.Allowed || res.Hits[0].Lease.Held() {
		h.t.Fatalf("a peek was charged or rejected: %+v", res.Hits[0])
	}
	return d
}

func (h *harness) release(l store.Lease) error {
	return h.s.Release(context.Background(), l, h.now)
}

// advance moves time on by d: Request.Now for a store on the caller's
// clock, a real sleep (d plus a small margin for the server's clock
// granularity) for a server-time store.
func (h *harness) advance(d time.Duration) {
	if h.cfg.serverTime {
		time.Sleep(d + 5*time.Millisecond)
	}
	h.now += int64(d)
}

// period returns the period of a test that waits for it: long for a
// controlled clock, maxWait/4 for a server-time store (0: skip the test).
func (h *harness) period() time.Duration {
	if !h.cfg.serverTime {
		return 10 * time.Second
	}
	if h.cfg.wait <= 0 {
		h.t.Skip("needs real waiting; run with WithServerTime(maxWait > 0)")
	}
	return h.cfg.wait / 4
}

func (h *harness) releaseAll(res ...*store.Result) {
	h.t.Helper()
	for _, r := range res {
		for i := range r.Hits[:r.N] {
			if l := r.Hits[i].Lease; l.Held() {
				if err := h.release(l); err != nil {
					h.t.Fatalf("Release(%+v): %v", l, err)
				}
			}
		}
	}
}

func testLimit(h *harness, alg store.Algorithm) {
	const limit = 5
	id := h.register(h.spec(alg, limit, time.Hour))
	var held []*store.Result
	for i := 1; i <= limit; i++ {
		res := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
		if !res.Allowed {
			h.t.Fatalf("request %d of %d rejected: %+v", i, limit, res.Decision())
		}
		if d := res.Decision(); d.Limit != limit || d.Remaining != limit-int64(i) {
			h.t.Fatalf("request %d: Limit %d Remaining %d, want %d and %d", i, d.Limit, d.Remaining, limit, limit-i)
		}
		if got := res.Hits[0].Lease.Held(); got != (alg == store.Concurrency) {
			h.t.Fatalf("request %d: lease held = %v for %v", i, got, alg)
		}
		held = append(held, res)
	}
	res := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
	d := res.Decision()
	if res.Allowed || d.Reason() != ratelimit.ReasonLimited || res.Decider != 0 {
		h.t.Fatalf("request %d: %+v, want a rejection with ReasonLimited", limit+1, res)
	}
	// A sliding-window counter full early in its window admits again only
	// once the previous window's weight has decayed: up to 2 windows later.
	maxRetry := time.Hour
	if alg == store.SlidingWindow {
		maxRetry = 2 * time.Hour
	}
	if d.RetryAfter <= 0 || d.RetryAfter > maxRetry || d.Remaining != 0 || d.ResetAfter <= 0 {
		h.t.Fatalf("request %d: RetryAfter %v Remaining %d ResetAfter %v", limit+1, d.RetryAfter, d.Remaining, d.ResetAfter)
	}
	// Keys are independent.
	if res := h.decide(store.Hit{Limit: id, Key: "other", Cost: 1}); !res.Allowed {
		h.t.Fatalf("another key was rejected: %+v", res.Decision())
	} else {
		held = append(held, res)
	}
	h.releaseAll(held...)
}

func testCost(h *harness, alg store.Algorithm) {
	id := h.register(h.spec(alg, 5, time.Hour))
	hit := func(cost int64) *store.Result { return h.decide(store.Hit{Limit: id, Key: "k", Cost: cost}) }
	if d := h.peek(id, "k"); d.Remaining != 5 || d.Limit != 5 {
		h.t.Fatalf("fresh key: %+v", d)
	}
	a := hit(3)
	if !a.Allowed || a.Decision().Remaining != 2 {
		h.t.Fatalf("cost 3 of 5: %+v", a.Decision())
	}
	if alg == store.Concurrency && a.Hits[0].Lease.Cost != 3 {
		h.t.Fatalf("lease of cost 3: %+v", a.Hits[0].Lease)
	}
	if r := hit(3); r.Allowed || r.Decision().Reason() != ratelimit.ReasonLimited {
		h.t.Fatalf("cost 3 with 2 left: %+v", r.Decision())
	}
	if d := h.peek(id, "k"); d.Remaining != 2 {
		h.t.Fatalf("a rejected request was charged: Remaining %d, want 2", d.Remaining)
	}
	b := hit(2)
	if !b.Allowed || b.Decision().Remaining != 0 {
		h.t.Fatalf("cost 2 with 2 left: %+v", b.Decision())
	}
	over := h.decide(store.Hit{Limit: id, Key: "fresh", Cost: 6})
	if d := over.Decision(); over.Allowed || d.Reason() != ratelimit.ReasonExceedsCapacity || d.RetryAfter != ratelimit.Never {
		h.t.Fatalf("cost 6 of 5: %+v, want ReasonExceedsCapacity and Never", d)
	}
	if d := h.peek(id, "fresh"); d.Remaining != 5 {
		h.t.Fatalf("an impossible request was charged: %+v", d)
	}
	h.releaseAll(a, b)
}

// testRetry checks that a rejected request retried after its RetryAfter is
// admitted (with a controlled clock: and not a nanosecond earlier), and
// that after the ResetAfter of the last admission the whole limit is back
// (window rollover, bucket refill, lease expiry). On a server-time store a
// run whose decisions took long enough, on the server's clock, to change
// what they test (a token refilled, a window boundary passed: a loaded
// machine) proves nothing either way; it is run again on a fresh limit
// whose period is twice as long, a few times at most, so that a machine
// slow enough to race one period has the time of the next.
func testRetry(h *harness, alg store.Algorithm) {
	const tries = 5
	period := h.period()
	for try := range tries {
		id := h.register(h.spec(alg, retryLimit, period))
		r := &retryRun{h: h, id: id, key: fmt.Sprint("k", try), period: period}
		msg := r.run()
		if msg == "" {
			return
		}
		if !h.cfg.serverTime || !r.raced() {
			h.t.Fatal(msg)
		}
		h.t.Logf("run %d raced the server's clock over a period of %v (%s); again over twice that", try+1, period, msg)
		period *= 2
	}
	h.t.Fatalf("all %d runs raced the server's clock", tries)
}

const retryLimit = 3

// retryRun is one run of testRetry on one key.
type retryRun struct {
	h      *harness
	id     store.LimitID
	key    string
	period time.Duration
	// mark and last are the server instants of the first and the latest
	// decision since the run last waited on purpose.
	mark, last int64
}

func (r *retryRun) decide(cost int64) *store.Result {
	r.h.t.Helper()
	res := r.h.decide(store.Hit{Limit: r.id, Key: r.key, Cost: cost})
	if r.mark == 0 {
		r.mark = res.Now
	}
	r.last = res.Now
	return res
}

func (r *retryRun) advance(d time.Duration) {
	r.h.advance(d)
	r.mark = 0
}

// raced reports whether the decisions since the last deliberate wait took
// long enough on the server's clock to change the state they test: half a
// token's refill, or across a window boundary.
func (r *retryRun) raced() bool {
	if r.last-r.mark >= int64(r.period)/retryLimit/2 {
		return true
	}
	k := store.Calendar{}.Clock(r.period)
	return k.At(r.mark)/int64(r.period) != k.At(r.last)/int64(r.period)
}

// run returns what went wrong, or "".
func (r *retryRun) run() string {
	for range retryLimit {
		if last := r.decide(1); !last.Allowed {
			return fmt.Sprintf("under the limit: rejected %+v", last.Decision())
		}
	}
	rej := r.decide(1)
	if rej.Allowed {
		return "over the limit: admitted"
	}
	wait := rej.Decision().RetryAfter
	if wait > 2*r.period {
		return fmt.Sprintf("RetryAfter %v is longer than two periods (%v)", wait, r.period)
	}
	if !r.h.cfg.serverTime && wait > 1 {
		r.advance(wait - 1)
		if res := r.decide(1); res.Allowed {
			return fmt.Sprintf("admitted 1ns before RetryAfter %v", wait)
		}
		r.advance(1)
	} else {
		r.advance(wait)
	}
	retry := r.decide(1)
	if !retry.Allowed {
		return fmt.Sprintf("retry after RetryAfter %v rejected: %+v", wait, retry.Decision())
	}
	r.advance(retry.Decision().ResetAfter)
	if d := r.decide(0).Hits[0].Decision; d.Remaining != retryLimit || d.ResetAfter != 0 {
		return fmt.Sprintf("after ResetAfter %v: Remaining %d ResetAfter %v, want %d and 0",
			retry.Decision().ResetAfter, d.Remaining, d.ResetAfter, retryLimit)
	}
	for i := range retryLimit {
		if res := r.decide(1); !res.Allowed {
			return fmt.Sprintf("after reset, request %d rejected: %+v", i+1, res.Decision())
		}
	}
	return ""
}

// testAllOrNothing layers a loose first limit over a tight second one.
func testAllOrNothing(h *harness, first, second store.Algorithm) {
	a := h.register(h.spec(first, 10, time.Hour))
	b := h.register(h.spec(second, 2, time.Hour))
	layered := []store.Hit{{Limit: a, Key: "ka", Cost: 1}, {Limit: b, Key: "kb", Cost: 1}}
	var held []*store.Result
	for i := range 2 {
		res := h.decide(layered...)
		if !res.Allowed {
			h.t.Fatalf("layered request %d rejected: %+v", i+1, res)
		}
		// Remaining: a 10-(i+1), b 2-(i+1): b is the closest limit.
		if res.Decider != 1 {
			h.t.Fatalf("layered request %d: Decider %d, want 1 (fewest remaining)", i+1, res.Decider)
		}
		held = append(held, res)
	}
	res := h.decide(layered...)
	if res.Allowed || res.Decider != 1 || res.N != 2 {
		h.t.Fatalf("third layered request: Allowed %v Decider %d N %d, want a rejection by hit 1", res.Allowed, res.Decider, res.N)
	}
	if !res.Hits[0].Decision.Allowed() {
		h.t.Fatalf("first limit rejected: %+v", res.Hits[0].Decision)
	}
	if d := h.peek(a, "ka"); d.Remaining != 8 {
		h.t.Fatalf("first limit after a rejection by the second: Remaining %d, want 8 (it must not stay charged)", d.Remaining)
	}
	// Rejected by the first hit: the second is not evaluated nor charged.
	c := h.register(h.spec(second, 5, time.Hour))
	rev := h.decide(store.Hit{Limit: b, Key: "kb", Cost: 1}, store.Hit{Limit: c, Key: "kc", Cost: 1})
	if rev.Allowed || rev.Decider != 0 || rev.N != 1 {
		h.t.Fatalf("rejected by the first hit: Allowed %v Decider %d N %d", rev.Allowed, rev.Decider, rev.N)
	}
	if d := h.peek(c, "kc"); d.Remaining != 5 {
		h.t.Fatalf("a hit after the rejecting one was charged: Remaining %d", d.Remaining)
	}
	h.releaseAll(held...)
	if first == store.Concurrency {
		if d := h.peek(a, "ka"); d.Remaining != 10 {
			h.t.Fatalf("permits not conserved: Remaining %d after releasing every lease", d.Remaining)
		}
	}
}

// concurrently runs n requests at once and returns the admitted results.
func (h *harness) concurrently(n int, hits ...store.Hit) []*store.Result {
	h.t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed []*store.Result
		errs    []error
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			req := &store.Request{Now: h.now}
			for _, x := range hits {
				req.Add(x.Limit, x.Key, x.Cost)
			}
			res := new(store.Result)
			<-start
			err := h.s.Decide(context.Background(), req, res)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if res.Allowed {
				allowed = append(allowed, res)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		h.t.Fatalf("%d of %d concurrent requests failed, first: %v", len(errs), n, errs[0])
	}
	return allowed
}

func testConcurrent(h *harness, alg store.Algorithm) {
	id := h.register(h.spec(alg, 10, time.Hour))
	allowed := h.concurrently(50, store.Hit{Limit: id, Key: "k", Cost: 1})
	if len(allowed) != 10 {
		h.t.Fatalf("50 concurrent requests against a limit of 10: %d admitted", len(allowed))
	}
	seen := map[uint64]bool{}
	for _, r := range allowed {
		if l := r.Hits[0].Lease; l.Held() {
			if seen[l.ID] {
				h.t.Fatalf("lease ID %d handed out twice", l.ID)
			}
			seen[l.ID] = true
		}
	}
	h.releaseAll(allowed...)
}

// testConcurrentLayered sends 50 concurrent requests through a limit of 20
// of alg and then a limit of 10: exactly 10 pass, and the first limit keeps
// exactly their 10 charges (the 40 rejected by the second are given back).
// A sliding log may lose a refund that races with an admission (its state
// then stays stricter): for it the first limit keeps at least 10.
func testConcurrentLayered(h *harness, alg store.Algorithm) {
	a := h.register(h.spec(alg, 20, time.Hour))
	b := h.register(h.spec(store.FixedWindow, 10, time.Hour))
	allowed := h.concurrently(50, store.Hit{Limit: a, Key: "k", Cost: 1}, store.Hit{Limit: b, Key: "k", Cost: 1})
	if len(allowed) != 10 {
		h.t.Fatalf("50 concurrent layered requests against limits 20 and 10: %d admitted", len(allowed))
	}
	d := h.peek(a, "k")
	if alg == store.SlidingLog {
		if d.Remaining > 10 {
			h.t.Fatalf("first limit: Remaining %d, more than 10 after 10 admissions", d.Remaining)
		}
	} else if d.Remaining != 10 {
		h.t.Fatalf("first limit: Remaining %d, want 10 (the 40 requests rejected by the second must not stay charged)", d.Remaining)
	}
	h.releaseAll(allowed...)
}

func testMaxHits(h *harness) {
	var req []store.Hit
	for i := range store.MaxHits {
		alg := algorithms[i%len(algorithms)]
		id := h.register(h.spec(alg, 3, time.Hour))
		req = append(req, store.Hit{Limit: id, Key: "k", Cost: 1})
	}
	res := h.decide(req...)
	if !res.Allowed || res.N != store.MaxHits {
		h.t.Fatalf("MaxHits hits: Allowed %v N %d", res.Allowed, res.N)
	}
	h.releaseAll(res)
}

func testLeaseRelease(h *harness) {
	const ttl = time.Hour
	id := h.register(h.spec(store.Concurrency, 3, ttl))
	var leases []store.Lease
	ids := map[uint64]bool{}
	for range 3 {
		res := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
		l := res.Hits[0].Lease
		if !res.Allowed || !l.Held() || l.Limit != id || l.Key != "k" || l.Cost != 1 {
			h.t.Fatalf("acquire: %+v", res.Hits[0])
		}
		if got := time.Duration(l.Expires - res.Now); got != ttl && (!h.cfg.serverTime || got < ttl-time.Millisecond || got > ttl+time.Millisecond) {
			h.t.Fatalf("lease expires %v after the decision, want the TTL %v", got, ttl)
		}
		if ids[l.ID] {
			h.t.Fatalf("lease ID %d handed out twice", l.ID)
		}
		ids[l.ID] = true
		leases = append(leases, l)
	}
	if err := h.release(leases[1]); err != nil {
		h.t.Fatalf("first Release: %v", err)
	}
	if err := h.release(leases[1]); !errors.Is(err, store.ErrLeaseNotHeld) {
		h.t.Fatalf("second Release: %v, want ErrLeaseNotHeld", err)
	}
	if d := h.peek(id, "k"); d.Remaining != 1 {
		h.t.Fatalf("after one release: Remaining %d, want 1 (exactly one permit back)", d.Remaining)
	}
	if err := h.release(store.Lease{}); !errors.Is(err, store.ErrLeaseNotHeld) {
		h.t.Fatalf("Release(zero Lease): %v, want ErrLeaseNotHeld", err)
	}
	forged := leases[0]
	forged.Key = "another"
	if err := h.release(forged); !errors.Is(err, store.ErrLeaseNotHeld) {
		h.t.Fatalf("Release of a lease under another key: %v, want ErrLeaseNotHeld", err)
	}
	rate := h.register(h.spec(store.FixedWindow, 3, time.Hour))
	wrong := leases[0]
	wrong.Limit = rate
	if err := h.release(wrong); err == nil {
		h.t.Fatal("Release of a lease naming a rate limit succeeded")
	}
	// A multi-permit lease gives all its permits back.
	big := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
	if !big.Allowed {
		h.t.Fatalf("one permit left: %+v", big.Decision())
	}
	for _, l := range []store.Lease{leases[0], leases[2], big.Hits[0].Lease} {
		if err := h.release(l); err != nil {
			h.t.Fatalf("Release: %v", err)
		}
	}
	two := h.decide(store.Hit{Limit: id, Key: "k", Cost: 3})
	if !two.Allowed || two.Hits[0].Lease.Cost != 3 {
		h.t.Fatalf("all permits back, cost 3: %+v", two.Hits[0])
	}
	h.releaseAll(two)
	if d := h.peek(id, "k"); d.Remaining != 3 || d.ResetAfter != 0 {
		h.t.Fatalf("quiet key: Remaining %d ResetAfter %v, want 3 and 0", d.Remaining, d.ResetAfter)
	}
}

func testLeaseExpiry(h *harness) {
	ttl := h.period()
	id := h.register(h.spec(store.Concurrency, 2, ttl))
	first := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
	second := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
	if !first.Allowed || !second.Allowed {
		h.t.Fatal("two leases of two rejected")
	}
	rej := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
	if rej.Allowed || rej.Decision().RetryAfter > ttl {
		h.t.Fatalf("third lease: %+v, want a rejection within the TTL", rej.Decision())
	}
	if !h.cfg.serverTime {
		h.advance(ttl - 1)
		if r := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1}); r.Allowed {
			h.t.Fatal("a lease lapsed before its TTL")
		}
		h.advance(1)
	} else {
		h.advance(ttl)
	}
	// Both holders "crashed": at the TTL their permits are back.
	if d := h.peek(id, "k"); d.Remaining != 2 || d.ResetAfter != 0 {
		h.t.Fatalf("after the TTL: Remaining %d ResetAfter %v, want 2 and 0", d.Remaining, d.ResetAfter)
	}
	// A lease is not held from its Expires on, reclaimed or not.
	if err := h.release(first.Hits[0].Lease); !errors.Is(err, store.ErrLeaseNotHeld) {
		h.t.Fatalf("Release of an expired lease: %v, want ErrLeaseNotHeld", err)
	}
	again := h.decide(store.Hit{Limit: id, Key: "k", Cost: 2})
	if !again.Allowed {
		h.t.Fatalf("after the TTL: %+v, want both permits back", again.Decision())
	}
	if err := h.release(second.Hits[0].Lease); !errors.Is(err, store.ErrLeaseNotHeld) {
		h.t.Fatalf("Release of an expired lease: %v, want ErrLeaseNotHeld", err)
	}
	if d := h.peek(id, "k"); d.Remaining != 0 {
		h.t.Fatalf("releasing an expired lease freed permits: Remaining %d, want 0", d.Remaining)
	}
	h.releaseAll(again)
	if d := h.peek(id, "k"); d.Remaining != 2 {
		h.t.Fatalf("after release: Remaining %d, want 2", d.Remaining)
	}
}

// unknown fails the test unless err is a "store: " error matching
// store.ErrUnknownLimit.
func (h *harness) unknown(err error, what string) {
	h.t.Helper()
	if !errors.Is(err, store.ErrUnknownLimit) || !strings.HasPrefix(err.Error(), "store: ") {
		h.t.Fatalf("%s: %v, want a \"store: \" error matching ErrUnknownLimit", what, err)
	}
}

// testUnregister drops a rate limit and a concurrency limit that holds a
// lease: calls naming them fail with ErrUnknownLimit and charge nothing,
// another limit carries on, the name is free again and no ID is reused.
func testUnregister(h *harness) {
	ctx := context.Background()
	rateSpec := h.spec(store.FixedWindow, 5, time.Hour)
	rate := h.register(rateSpec)
	conc := h.register(h.spec(store.Concurrency, 2, time.Hour))
	other := h.register(h.spec(store.TokenBucket, 5, time.Hour))
	held := h.decide(store.Hit{Limit: rate, Key: "k", Cost: 1}, store.Hit{Limit: conc, Key: "k", Cost: 1})
	if !held.Allowed || !held.Hits[1].Lease.Held() {
		h.t.Fatalf("before Unregister: %+v", held)
	}
	if err := h.s.Unregister(ctx, rate); err != nil {
		h.t.Fatalf("Unregister(%d): %v", rate, err)
	}
	for name, hits := range map[string][]store.Hit{
		"alone":         {{Limit: rate, Key: "k", Cost: 1}},
		"after another": {{Limit: other, Key: "k", Cost: 1}, {Limit: rate, Key: "k", Cost: 1}},
	} {
		req := store.Request{Now: h.now}
		for _, x := range hits {
			req.Add(x.Limit, x.Key, x.Cost)
		}
		var res store.Result
		h.unknown(h.s.Decide(ctx, &req, &res), "Decide naming an unregistered limit "+name)
	}
	if d := h.peek(other, "k"); d.Remaining != 5 {
		h.t.Fatalf("a request naming an unregistered limit was charged: Remaining %d, want 5", d.Remaining)
	}
	if err := h.s.Unregister(ctx, conc); err != nil {
		h.t.Fatalf("Unregister(%d) holding a lease: %v", conc, err)
	}
	h.unknown(h.release(held.Hits[1].Lease), "Release of a lease of an unregistered limit")
	h.unknown(h.s.Unregister(ctx, rate), "Unregister again")
	h.unknown(h.s.Unregister(ctx, 0), "Unregister(0)")
	h.unknown(h.s.Unregister(ctx, other+100), "Unregister of an ID never handed out")
	again := h.register(rateSpec)
	if again == rate || again == conc || again == other {
		h.t.Fatalf("the name registered again got ID %d, reused (handed out: %d %d %d)", again, rate, conc, other)
	}
	if res := h.decide(store.Hit{Limit: again, Key: "fresh", Cost: 1}); !res.Allowed {
		h.t.Fatalf("the name registered again: %+v", res.Decision())
	}
	if res := h.decide(store.Hit{Limit: other, Key: "k", Cost: 1}); !res.Allowed || res.Decision().Remaining != 4 {
		h.t.Fatalf("the limit kept: %+v", res.Decision())
	}
}

// testUnregisterConcurrent unregisters a concurrency limit while requests
// through a rate limit and it run: each is decided on the limit as it was
// or fails with ErrUnknownLimit (every one that starts after Unregister
// returned fails), failed ones charge nothing, and leases released in the
// race come back or fail with ErrUnknownLimit.
func testUnregisterConcurrent(h *harness) {
	const workers, rounds, limit = 8, 25, 1000
	ctx := context.Background()
	rate := h.register(h.spec(store.FixedWindow, limit, time.Hour))
	conc := h.register(h.spec(store.Concurrency, limit, time.Hour))
	var (
		wg           sync.WaitGroup
		unregistered atomic.Bool
		admitted     atomic.Int64
		errs         = make(chan error, workers)
	)
	start := make(chan struct{})
	for range workers {
		wg.Go(func() {
			<-start
			for range rounds {
				after := unregistered.Load()
				req := &store.Request{Now: h.now}
				req.Add(rate, "k", 1)
				req.Add(conc, "k", 1)
				var res store.Result
				err := h.s.Decide(ctx, req, &res)
				switch {
				case err != nil && !errors.Is(err, store.ErrUnknownLimit):
					errs <- fmt.Errorf("Decide racing with Unregister: %w", err)
					return
				case err != nil:
					continue
				case after:
					errs <- errors.New("Decide succeeded after Unregister returned")
					return
				case !res.Allowed:
					errs <- fmt.Errorf("rejected under the limit: %+v", res.Decision())
					return
				}
				admitted.Add(1)
				if err := h.release(res.Hits[1].Lease); err != nil && !errors.Is(err, store.ErrUnknownLimit) {
					errs <- fmt.Errorf("Release racing with Unregister: %w", err)
					return
				}
			}
		})
	}
	close(start)
	if err := h.s.Unregister(ctx, conc); err != nil {
		h.t.Fatalf("Unregister: %v", err)
	}
	unregistered.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Error(err)
	}
	if d := h.peek(rate, "k"); d.Remaining != limit-admitted.Load() {
		h.t.Fatalf("rate limit: Remaining %d after %d admissions, want %d (failed requests charge nothing)",
			d.Remaining, admitted.Load(), limit-admitted.Load())
	}
}

func testBadSpecs(h *harness) {
	good := h.spec(store.FixedWindow, 5, time.Minute)
	rate := ratelimit.Per(5, time.Minute)
	bad := map[string]store.Spec{
		"no name":            {Algorithm: store.FixedWindow, Limit: 5, Window: time.Minute},
		"no algorithm":       {Name: "x", Limit: 5, Window: time.Minute},
		"unknown algorithm":  {Name: "x", Algorithm: 99, Limit: 5, Window: time.Minute},
		"zero limit":         {Name: "x", Algorithm: store.FixedWindow, Window: time.Minute},
		"negative limit":     {Name: "x", Algorithm: store.SlidingLog, Limit: -1, Window: time.Minute},
		"zero window":        {Name: "x", Algorithm: store.FixedWindow, Limit: 5},
		"negative window":    {Name: "x", Algorithm: store.SlidingWindow, Limit: 5, Window: -time.Second},
		"log zero window":    {Name: "x", Algorithm: store.SlidingLog, Limit: 5},
		"no rate":            {Name: "x", Algorithm: store.TokenBucket, Limit: 5},
		"zero rate count":    {Name: "x", Algorithm: store.TokenBucket, Limit: 5, Rate: ratelimit.Per(0, time.Second)},
		"negative rate":      {Name: "x", Algorithm: store.TokenBucket, Limit: 5, Rate: ratelimit.Per(-5, time.Second)},
		"zero rate period":   {Name: "x", Algorithm: store.TokenBucket, Limit: 5, Rate: ratelimit.Per(5, 0)},
		"bucket zero burst":  {Name: "x", Algorithm: store.TokenBucket, Rate: rate},
		"rate on window":     {Name: "x", Algorithm: store.FixedWindow, Limit: 5, Window: time.Minute, Rate: rate},
		"window on bucket":   {Name: "x", Algorithm: store.TokenBucket, Limit: 5, Rate: rate, Window: time.Minute},
		"ttl on bucket":      {Name: "x", Algorithm: store.TokenBucket, Limit: 5, Rate: rate, LeaseTTL: time.Minute},
		"no ttl":             {Name: "x", Algorithm: store.Concurrency, Limit: 5},
		"negative ttl":       {Name: "x", Algorithm: store.Concurrency, Limit: 5, LeaseTTL: -time.Second},
		"window on leases":   {Name: "x", Algorithm: store.Concurrency, Limit: 5, LeaseTTL: time.Minute, Window: time.Minute},
		"huge lease limit":   {Name: "x", Algorithm: store.Concurrency, Limit: store.MaxLeaseLimit + 1, LeaseTTL: time.Minute},
		"negative capacity":  {Name: "x", Algorithm: store.FixedWindow, Limit: 5, Window: time.Minute, Capacity: -1},
		"unknown overflow":   {Name: "x", Algorithm: store.FixedWindow, Limit: 5, Window: time.Minute, Overflow: 7},
		"window too short":   {Name: "x", Algorithm: store.SlidingWindow, Limit: 1 << 20, Window: time.Microsecond},
		"duplicate name":     good,
		"duplicate name, ok": {Name: good.Name, Algorithm: store.SlidingLog, Limit: 1, Window: time.Second},
	}
	h.register(good)
	for name, spec := range bad {
		if err := spec.Validate(); err == nil && !strings.HasPrefix(name, "duplicate") {
			h.t.Errorf("%s: Validate accepted %+v", name, spec)
		}
		id, err := h.s.Register(context.Background(), spec)
		if err == nil {
			h.t.Errorf("%s: Register accepted %+v as %d", name, spec, id)
			continue
		}
		if !strings.HasPrefix(err.Error(), "store: ") {
			h.t.Errorf("%s: error %q does not start with \"store: \"", name, err)
		}
		if errors.Is(err, store.ErrUnavailable) {
			h.t.Errorf("%s: a bad spec reported as unavailable: %v", name, err)
		}
	}
}

func testBadRequests(h *harness) {
	id := h.register(h.spec(store.FixedWindow, 5, time.Hour))
	over := store.Request{Now: h.now}
	for range store.MaxHits + 1 {
		over.Add(id, "k", 1)
	}
	bad := map[string]store.Request{
		"no hits":       {Now: h.now},
		"too many hits": over,
		"no limit":      {Now: h.now, N: 1, Hits: [store.MaxHits]store.Hit{{Key: "k", Cost: 1}}},
		"unknown limit": {Now: h.now, N: 1, Hits: [store.MaxHits]store.Hit{{Limit: id + 100, Key: "k", Cost: 1}}},
		"negative cost": {Now: h.now, N: 1, Hits: [store.MaxHits]store.Hit{{Limit: id, Key: "k", Cost: -1}}},
		// The first hit is fine: nothing may be charged for it either.
		"second hit bad": {Now: h.now, N: 2, Hits: [store.MaxHits]store.Hit{{Limit: id, Key: "k", Cost: 1}, {Limit: id + 100, Key: "k", Cost: 1}}},
		"second neg":     {Now: h.now, N: 2, Hits: [store.MaxHits]store.Hit{{Limit: id, Key: "k", Cost: 1}, {Limit: id, Key: "k", Cost: -2}}},
	}
	for name, req := range bad {
		var res store.Result
		err := h.s.Decide(context.Background(), &req, &res)
		if err == nil {
			h.t.Errorf("%s: Decide accepted %+v", name, req)
			continue
		}
		if !strings.HasPrefix(err.Error(), "store: ") {
			h.t.Errorf("%s: error %q does not start with \"store: \"", name, err)
		}
		if unknown := name == "unknown limit" || name == "second hit bad"; unknown != errors.Is(err, store.ErrUnknownLimit) {
			h.t.Errorf("%s: errors.Is(%v, ErrUnknownLimit) = %v", name, err, !unknown)
		}
	}
	if d := h.peek(id, "k"); d.Remaining != 5 {
		h.t.Fatalf("bad requests charged the limit: Remaining %d, want 5", d.Remaining)
	}
	if err := h.s.Release(context.Background(), store.Lease{Limit: id + 100, Key: "k", ID: 1, Cost: 1}, h.now); !errors.Is(err, store.ErrUnknownLimit) {
		h.t.Fatalf("Release of a lease of an unknown limit: %v, want ErrUnknownLimit", err)
	}
}

// testReset checks store.Resetter, on a store that implements it: a reset
// key has its whole limit back at once, and another key keeps its usage.
func testReset(h *harness, alg store.Algorithm) {
	r, ok := h.s.(store.Resetter)
	if !ok {
		h.t.Skip("the store does not implement store.Resetter")
	}
	const limit = 2
	id := h.register(h.spec(alg, limit, time.Hour))
	for _, key := range []string{"a", "a", "b", "b"} {
		if res := h.decide(store.Hit{Limit: id, Key: key, Cost: 1}); !res.Allowed {
			h.t.Fatalf("%s under the limit: rejected", key)
		}
	}
	if err := r.Reset(context.Background(), id, "a"); errors.Is(err, errors.ErrUnsupported) {
		h.t.Skipf("Reset is not supported: %v", err)
	} else if err != nil {
		h.t.Fatal(err)
	}
	for i := range limit {
		if res := h.decide(store.Hit{Limit: id, Key: "a", Cost: 1}); !res.Allowed {
			h.t.Fatalf("after a reset, request %d of a key rejected: %+v", i+1, res.Decision())
		}
	}
	if res := h.decide(store.Hit{Limit: id, Key: "b", Cost: 1}); res.Allowed {
		h.t.Fatal("resetting one key gave another its limit back")
	}
	if err := r.Reset(context.Background(), id, "never-seen"); err != nil {
		h.t.Fatalf("resetting a key with no state: %v", err)
	}
	if err := r.Reset(context.Background(), id+1000, "a"); !errors.Is(err, store.ErrUnknownLimit) {
		h.t.Fatalf("resetting a key of an unknown limit: %v, want ErrUnknownLimit", err)
	}
}

// testRefund checks store.Refunder, on a store that implements it: what
// an admitted decision charged comes back, one unit for one unit, on that
// key only; a concurrency hit is left to its lease.
func testRefund(h *harness, alg store.Algorithm) {
	rf := h.refunder()
	if alg == store.Concurrency {
		h.t.Skip("a concurrency hit is given back by its lease")
	}
	const limit = 3
	id := h.register(h.spec(alg, limit, time.Hour))
	var admitted []*store.Result
	for range limit {
		res := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
		if !res.Allowed {
			h.t.Fatalf("under the limit: rejected %+v", res.Decision())
		}
		admitted = append(admitted, res)
	}
	h.decide(store.Hit{Limit: id, Key: "other", Cost: 1})
	req := &store.Request{Now: h.now}
	req.Add(id, "k", 1)
	if err := rf.Refund(context.Background(), req, admitted[1]); errors.Is(err, errors.ErrUnsupported) {
		h.t.Skipf("Refund is not supported: %v", err)
	} else if err != nil {
		h.t.Fatal(err)
	}
	if res := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1}); !res.Allowed {
		h.t.Fatalf("after a refund of one: rejected %+v", res.Decision())
	}
	if res := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1}); res.Allowed {
		h.t.Fatal("a refund of one gave back more than one")
	}
	if d := h.peek(id, "other"); d.Remaining != limit-1 {
		h.t.Fatalf("another key's usage changed: Remaining %d, want %d", d.Remaining, limit-1)
	}
	bad := &store.Request{Now: h.now}
	bad.Add(id, "k", 1)
	if err := rf.Refund(context.Background(), bad, &store.Result{}); err == nil {
		h.t.Fatal("a refund of a decision that admitted nothing: no error")
	}
}

// testRefundCrossed checks that a refund goes to the window that counted
// the admission (store.Refunder): two units admitted in one window and
// refunded after the next window has been filled give that next window
// nothing back (a fixed window stays full; a sliding window loses only
// the previous window's weight). On a server-time store the windows are
// a period long, the test waits for the server's clock to cross into the
// next window, and a run whose decisions in the next window straddled
// its end proves nothing: it is run again on a fresh limit whose period is
// twice as long, a few times at most.
func testRefundCrossed(h *harness, alg store.Algorithm) {
	rf := h.refunder()
	const tries = 5
	period := h.period()
	for try := range tries {
		id := h.register(h.spec(alg, crossedLimit, period))
		msg, raced := h.refundCrossed(rf, alg, id, fmt.Sprint("k", try), period)
		if msg == "" {
			return
		}
		if !raced {
			h.t.Fatal(msg)
		}
		h.t.Logf("run %d raced the server's clock over a period of %v (%s); again over twice that", try+1, period, msg)
		period *= 2
	}
	h.t.Fatalf("all %d runs raced the server's clock", tries)
}

const crossedLimit = 4

// testRefundLatePartial checks that a token bucket's late refund gives
// back what the admission still owes, no more: on a bucket of 8 per 4h (a
// token every 30m), an admission of 2 (60m of debt on a full bucket) is
// refunded after 3 tokens were taken (90m of debt). Admitted 3h before the
// take, the bucket refilled its 2 before it: nothing comes back. Admitted
// 30m before, it still owed 1 when the take added 3: that 1 (30m) comes
// back, not 2, which would hand the take's tokens out again. The admitting
// Result is made by hand, as the admission an instant ago said.
func testRefundLatePartial(h *harness) {
	rf := h.refunder()
	id := h.register(store.Spec{Name: "partial", Algorithm: store.TokenBucket, Limit: 8,
		Rate: ratelimit.Rate{Count: 8, Per: 4 * time.Hour}})
	for _, c := range []struct {
		key       string
		ago       time.Duration // of the refunded admission, before the take
		remaining int64         // after the refund
		reset     time.Duration // after the refund, at the take's instant
	}{
		{key: "refilled", ago: 3 * time.Hour, remaining: 5, reset: 90 * time.Minute},
		{key: "half_refilled", ago: 30 * time.Minute, remaining: 6, reset: 60 * time.Minute},
	} {
		take := h.decide(store.Hit{Limit: id, Key: c.key, Cost: 3})
		if !take.Allowed {
			h.t.Fatalf("%s: 3 of 8 refused: %+v", c.key, take.Decision())
		}
		first := &store.Result{Now: take.Now - int64(c.ago), N: 1, Allowed: true}
		first.Hits[0].Decision = ratelimit.Decision{Limit: 8, Remaining: 6, ResetAfter: time.Hour}
		req := &store.Request{Now: h.now}
		req.Add(id, c.key, 2)
		if err := rf.Refund(context.Background(), req, first); errors.Is(err, errors.ErrUnsupported) {
			h.t.Skipf("Refund is not supported: %v", err)
		} else if err != nil {
			h.t.Fatalf("%s: %v", c.key, err)
		}
		peek := h.decide(store.Hit{Limit: id, Key: c.key})
		d := peek.Hits[0].Decision
		// The debt shrinks with the time since the take, at most peek.Now -
		// take.Now: the refund came between them.
		since := time.Duration(peek.Now - take.Now)
		if d.Remaining != c.remaining || d.ResetAfter > c.reset || d.ResetAfter < c.reset-since {
			h.t.Errorf("%s: after a refund of 2 admitted %v before 3 taken: Remaining %d, ResetAfter %v; want %d and %v less at most %v",
				c.key, c.ago, d.Remaining, d.ResetAfter, c.remaining, c.reset, since)
		}
	}
}

// testRefundLate checks that a refund gives back only what the refunded
// admission still weighs when it comes (store.Refunder), as a rule that
// counts only failures refunds a success once it is known: 2 of 4
// admitted, then, once the bucket has refilled them or the log has let
// them expire, more taken, then the first 2 refunded. What was taken since
// stands: a token bucket gains only what it refilled since, a sliding log
// nothing. (The bucket's take, 1, leaves it less than a burst ahead of the
// first admission, so that a refund as of that admission's instant would
// give the 2 back; the log's, all 4, overwrites the entries of the first,
// so that a refund of the latest admissions, or of the oldest counting at
// the refund, would give back 2 of the 4.)
func testRefundLate(h *harness, alg store.Algorithm) {
	rf := h.refunder()
	const limit = 4
	p := h.period()
	wait, take := p/2+p/8, int64(1) // the bucket refills the 2 in p/2
	if alg == store.SlidingLog {
		wait, take = p+p/8, limit
	}
	id := h.register(h.spec(alg, limit, p))
	first := h.decide(store.Hit{Limit: id, Key: "k", Cost: 2})
	if !first.Allowed {
		h.t.Fatalf("2 of %d refused: %+v", limit, first.Decision())
	}
	h.advance(wait)
	if d := h.peek(id, "k"); d.Remaining != limit {
		h.t.Fatalf("%v after 2 of %d: Remaining %d, want all", wait, limit, d.Remaining)
	}
	since := h.decide(store.Hit{Limit: id, Key: "k", Cost: take})
	if !since.Allowed {
		h.t.Fatalf("%d of %d refused: %+v", take, limit, since.Decision())
	}
	req := &store.Request{Now: h.now}
	req.Add(id, "k", 2)
	if err := rf.Refund(context.Background(), req, first); errors.Is(err, errors.ErrUnsupported) {
		h.t.Skipf("Refund is not supported: %v", err)
	} else if err != nil {
		h.t.Fatal(err)
	}
	peek := h.decide(store.Hit{Limit: id, Key: "k"})
	// A bucket refills a token every p/limit: on a server's clock some
	// may have come back between the take and the peek.
	want := limit - take
	if alg == store.TokenBucket {
		want = min(limit, want+(peek.Now-since.Now)/int64(p/limit))
	}
	if got := peek.Hits[0].Decision.Remaining; got > want {
		h.t.Fatalf("a refund of 2 admitted %v before, after %d taken since: Remaining %d, want at most %d",
			time.Duration(since.Now-first.Now), take, got, want)
	}
}

// refundCrossed is one run of testRefundCrossed on key. It returns what
// went wrong, or "", and whether the run raced the server's clock.
func (h *harness) refundCrossed(rf store.Refunder, alg store.Algorithm, id store.LimitID, key string, p time.Duration) (string, bool) {
	h.t.Helper()
	k := store.Calendar{}.Clock(p)
	window := func(now int64) int64 { return k.At(now) / int64(p) }
	first := h.decide(store.Hit{Limit: id, Key: key, Cost: 2})
	if !first.Allowed {
		return fmt.Sprintf("2 of %d refused: %+v", crossedLimit, first.Decision()), false
	}
	w := window(first.Now)
	// Into the middle of the next window, where a sliding window's
	// previous count weighs about half: on the server's clock by waiting,
	// checked by peeking (bounded).
	mid := (w+1)*int64(p) + int64(p)/2
	if !h.cfg.serverTime {
		h.now = k.Real(mid)
	} else {
		h.advance(time.Duration(mid - k.At(first.Now)))
		for range 10 {
			if window(h.decide(store.Hit{Limit: id, Key: key}).Now) > w {
				break
			}
			h.advance(p / 10)
		}
	}
	// The next window takes what is left; then the refund of the first two.
	peek := h.decide(store.Hit{Limit: id, Key: key})
	left := peek.Decision().Remaining
	fill := h.decide(store.Hit{Limit: id, Key: key, Cost: left})
	if window(peek.Now) != w+1 {
		return fmt.Sprintf("the next window %d not reached (at %d)", w+1, window(peek.Now)), true
	}
	if !fill.Allowed {
		return fmt.Sprintf("the next window's %d refused: %+v", left, fill.Decision()), window(fill.Now) != w+1
	}
	req := &store.Request{Now: h.now}
	req.Add(id, key, 2)
	if err := rf.Refund(context.Background(), req, first); errors.Is(err, errors.ErrUnsupported) {
		h.t.Skipf("Refund is not supported: %v", err)
	} else if err != nil {
		h.t.Fatal(err)
	}
	after := h.decide(store.Hit{Limit: id, Key: key})
	// A fixed window: its own count stands, nothing fits. A sliding
	// window: the previous window's weight is gone, what it weighed fits.
	want := int64(0)
	if alg == store.SlidingWindow {
		want = crossedLimit - left
	}
	if got := after.Decision().Remaining; got != want {
		return fmt.Sprintf("after the refund of the previous window's 2 (the next took %d): Remaining %d, want %d",
			left, got, want), window(fill.Now) != w+1 || window(after.Now) != w+1
	}
	return "", false
}
