package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// runUpdate adds the store.Updater cases to Run; each skips itself on a
// store that does not implement Updater (or, like a Faulty around such a
// store, answers errors.ErrUnsupported).
func runUpdate(run func(name string, test func(h *harness))) {
	// Each test first asks for Updater, before it starts any goroutine.
	upd := func(test func(h *harness)) func(h *harness) {
		return func(h *harness) {
			u, ok := h.s.(store.Updater)
			if !ok {
				h.t.Skip("the store does not implement store.Updater")
			}
			// A probe of an ID never handed out: ErrUnsupported says the
			// store cannot update at all.
			if err := u.Update(context.Background(), ^store.LimitID(0), h.spec(store.FixedWindow, 1, time.Hour)); errors.Is(err, errors.ErrUnsupported) {
				h.t.Skipf("Update is not supported: %v", err)
			}
			h.u = u
			test(h)
		}
	}
	for _, alg := range algorithms {
		run("update/raise/"+alg.String(), upd(func(h *harness) { testUpdateRaise(h, alg) }))
		run("update/lower/"+alg.String(), upd(func(h *harness) { testUpdateLower(h, alg) }))
		run("update/concurrent/"+alg.String(), upd(func(h *harness) { testUpdateConcurrent(h, alg) }))
	}
	run("update/token_bucket_rate", upd(testUpdateRate))
	run("update/lease_ttl", upd(testUpdateLeaseTTL))
	run("update/fixed", upd(testUpdateFixed))
}

// update calls the store's Update.
func (h *harness) update(id store.LimitID, spec store.Spec) error {
	return h.u.Update(context.Background(), id, spec)
}

func (h *harness) mustUpdate(id store.LimitID, spec store.Spec) {
	h.t.Helper()
	if err := h.update(id, spec); err != nil {
		h.t.Fatalf("Update(%d, %+v): %v", id, spec, err)
	}
}

// admitted counts how many of up to max hits of cost 1 on key are admitted,
// stopping at the first rejection; leases taken are returned too.
func (h *harness) admitted(id store.LimitID, key string, max int) (int, []*store.Result) {
	h.t.Helper()
	var held []*store.Result
	for i := range max {
		res := h.decide(store.Hit{Limit: id, Key: key, Cost: 1})
		if !res.Allowed {
			return i, held
		}
		held = append(held, res)
	}
	return max, held
}

// withLimit returns spec with limit; a token bucket keeps its rate, so
// that only the burst changes.
func withLimit(spec store.Spec, limit int64) store.Spec {
	spec.Limit = limit
	return spec
}

// testUpdateRaise: a key that used 3 of 3 gets exactly 1 more when the
// limit is raised to 4, not a fresh 4; a fresh key gets 4.
func testUpdateRaise(h *harness, alg store.Algorithm) {
	spec := h.spec(alg, 3, time.Hour)
	id := h.register(spec)
	n, held := h.admitted(id, "k", 5)
	if n != 3 {
		h.t.Fatalf("admitted %d of 3", n)
	}
	h.mustUpdate(id, withLimit(spec, 4))
	if d := h.peek(id, "k"); d.Limit != 4 || d.Remaining != 1 {
		h.t.Fatalf("3 used, raised to 4: %+v, want 1 left of 4", d)
	}
	more, held2 := h.admitted(id, "k", 5)
	if more != 1 {
		h.t.Fatalf("3 used, raised to 4: admitted %d more, want exactly 1", more)
	}
	fresh, held3 := h.admitted(id, "fresh", 6)
	if fresh != 4 {
		h.t.Fatalf("a fresh key under the raised limit: admitted %d, want 4", fresh)
	}
	h.releaseAll(held...)
	h.releaseAll(held2...)
	h.releaseAll(held3...)
}

// testUpdateLower: a key that used 4 of 10 gets exactly 1 more when the
// limit is lowered to 5, and none (Remaining 0, never negative) when it is
// lowered to 3 below what it used; leases held before still release.
func testUpdateLower(h *harness, alg store.Algorithm) {
	spec := h.spec(alg, 10, time.Hour)
	id := h.register(spec)
	four := h.decide(store.Hit{Limit: id, Key: "k", Cost: 4})
	if !four.Allowed {
		h.t.Fatalf("4 of 10: %+v", four.Decision())
	}
	h.mustUpdate(id, withLimit(spec, 5))
	more, held := h.admitted(id, "k", 5)
	if more != 1 {
		h.t.Fatalf("4 used, lowered to 5: admitted %d more, want 1", more)
	}
	h.mustUpdate(id, withLimit(spec, 3))
	if d := h.peek(id, "k"); d.Limit != 3 || d.Remaining != 0 {
		h.t.Fatalf("5 used, lowered to 3: %+v, want 0 left of 3", d)
	}
	res := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
	if res.Allowed || res.Decision().Reason() != ratelimit.ReasonLimited {
		h.t.Fatalf("5 used, lowered to 3: %+v, want ReasonLimited", res.Decision())
	}
	if alg == store.Concurrency {
		// The leases held before the changes release; 1 permit held of 3
		// leaves 2.
		h.releaseAll(four)
		if d := h.peek(id, "k"); d.Remaining != 2 {
			h.t.Fatalf("after releasing 4 of 5 held under a limit of 3: %+v, want 2 left", d)
		}
	}
	h.releaseAll(held...)
}

// testUpdateConcurrent decides one key from several goroutines while the
// limit flips between 7 and 4: no more than 7 are admitted at one instant,
// and once the last Update (to 4) has returned, no request admits past 4.
func testUpdateConcurrent(h *harness, alg store.Algorithm) {
	spec := h.spec(alg, 4, time.Hour)
	id := h.register(spec)
	var (
		wg    sync.WaitGroup
		stop  atomic.Bool
		mu    sync.Mutex
		held  []*store.Result
		errs  = make(chan error, 4)
		start = make(chan struct{})
	)
	for range 4 {
		wg.Go(func() {
			<-start
			for !stop.Load() {
				req := &store.Request{Now: h.now}
				req.Add(id, "k", 1)
				res := new(store.Result)
				if err := h.s.Decide(context.Background(), req, res); err != nil {
					errs <- err
					return
				}
				if res.Allowed {
					mu.Lock()
					held = append(held, res)
					mu.Unlock()
				}
			}
		})
	}
	close(start)
	var updErr error
	for i := range 40 {
		if updErr = h.update(id, withLimit(spec, []int64{7, 4}[i%2])); updErr != nil {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if updErr != nil {
		h.t.Fatalf("Update racing with Decide: %v", updErr)
	}
	close(errs)
	for err := range errs {
		h.t.Fatalf("Decide racing with Update: %v", err)
	}
	if len(held) > 7 {
		h.t.Fatalf("%d admitted with the limit never above 7", len(held))
	}
	more, held2 := h.admitted(id, "k", 10)
	if len(held)+more > max(4, len(held)) {
		h.t.Fatalf("%d admitted, then %d more after the limit settled at 4", len(held), more)
	}
	h.releaseAll(held...)
	h.releaseAll(held2...)
}

// testUpdateRate lowers a token bucket's rate: the key keeps the tokens it
// owes and refills them at the new rate.
func testUpdateRate(h *harness) {
	if h.cfg.serverTime {
		h.t.Skip("needs a controlled clock")
	}
	spec := store.Spec{Name: "rate", Algorithm: store.TokenBucket, Limit: 10, Rate: ratelimit.Per(10, time.Second)}
	id := h.register(spec)
	if res := h.decide(store.Hit{Limit: id, Key: "k", Cost: 6}); !res.Allowed {
		h.t.Fatalf("6 of 10: %+v", res.Decision())
	}
	spec.Rate = ratelimit.Per(5, time.Second)
	h.mustUpdate(id, spec)
	if d := h.peek(id, "k"); d.Remaining != 4 || d.ResetAfter != 1200*time.Millisecond {
		h.t.Fatalf("6 owed at 5/s: %+v, want 4 left and full in 1.2s", d)
	}
	if n, _ := h.admitted(id, "k", 10); n != 4 {
		h.t.Fatalf("admitted %d, want the 4 left", n)
	}
	res := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
	if d := res.Decision(); res.Allowed || d.RetryAfter != 200*time.Millisecond {
		h.t.Fatalf("empty at 5/s: %+v, want RetryAfter 200ms", d)
	}
	h.advance(200 * time.Millisecond)
	if res := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1}); !res.Allowed {
		h.t.Fatalf("at RetryAfter: %+v", res.Decision())
	}
}

// testUpdateLeaseTTL: leases taken before an Update keep their expiry,
// later ones get the new TTL.
func testUpdateLeaseTTL(h *harness) {
	if h.cfg.serverTime {
		h.t.Skip("needs a controlled clock")
	}
	spec := h.spec(store.Concurrency, 5, time.Minute)
	id := h.register(spec)
	before := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
	spec.LeaseTTL = time.Hour
	h.mustUpdate(id, spec)
	after := h.decide(store.Hit{Limit: id, Key: "k", Cost: 1})
	if b, a := before.Hits[0].Lease.Expires-h.now, after.Hits[0].Lease.Expires-h.now; b != int64(time.Minute) || a != int64(time.Hour) {
		h.t.Fatalf("leases expire in %v and %v, want 1m and 1h", time.Duration(b), time.Duration(a))
	}
	h.releaseAll(before, after)
}

// testUpdateFixed: what cannot change in place is an error starting with
// "store: " and leaves the limit as it was; an unknown or unregistered
// limit is an error matching ErrUnknownLimit.
func testUpdateFixed(h *harness) {
	spec := h.spec(store.FixedWindow, 3, time.Hour)
	id := h.register(spec)
	if n, _ := h.admitted(id, "k", 2); n != 2 {
		h.t.Fatalf("admitted %d of 2", n)
	}
	for name, change := range map[string]func(s *store.Spec){
		"name":      func(s *store.Spec) { s.Name += "-renamed" },
		"algorithm": func(s *store.Spec) { s.Algorithm = store.SlidingLog },
		"window":    func(s *store.Spec) { s.Window *= 2 },
		"capacity":  func(s *store.Spec) { s.Capacity = 10 },
		"overflow":  func(s *store.Spec) { s.Overflow = concurrency.OverflowShare },
		"limit 0":   func(s *store.Spec) { s.Limit = 0 },
		"a rate":    func(s *store.Spec) { s.Rate = ratelimit.Per(1, time.Second) },
	} {
		s := spec
		change(&s)
		if err := h.update(id, s); err == nil || !strings.HasPrefix(err.Error(), "store: ") {
			h.t.Fatalf("Update changing the %s: %v, want an error starting with \"store: \"", name, err)
		}
	}
	if n, _ := h.admitted(id, "k", 5); n != 1 {
		h.t.Fatalf("after refused updates: admitted %d, want the 1 left of 3", n)
	}
	other := h.spec(store.FixedWindow, 3, time.Hour)
	otherID := h.register(other)
	h.unknown(h.update(otherID+100, other), "Update of an ID never handed out")
	if err := h.s.Unregister(context.Background(), otherID); err != nil {
		h.t.Fatalf("Unregister: %v", err)
	}
	h.unknown(h.update(otherID, other), "Update of an unregistered limit")
}
