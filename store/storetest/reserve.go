package storetest

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/store"
)

// testReserve: a token bucket or fixed window hit with MaxWait that does
// not fit now reserves the exact instant it fits (slots one emission
// interval, or one window, apart, the wait reported per hit and for the
// request); one that would wait
// longer than MaxWait is rejected with the wait until it fits at once; a
// later hit's rejection gives the reservation back; Refund cancels the
// latest reservation exactly and leaves an earlier one's slot unused; a
// hit decided after a reserving one starts no earlier; a max wait on a
// sliding window is an error (where the store keeps sliding windows). A store that cannot reserve returns an
// error matching errors.ErrUnsupported, and the test is skipped.
func testReserve(h *harness, alg store.Algorithm) {
	const iv = 10 * time.Second
	id := h.register(h.spec(alg, 1, iv)) // 1 token, one per 10 s; or 1 per window of 10 s
	other := h.register(h.spec(alg, 1, iv))
	// reserve decides hits, each with its max wait.
	reserve := func(hits ...store.Hit) (*store.Result, error) {
		h.t.Helper()
		req := &store.Request{Now: h.now}
		for _, x := range hits {
			req.Add(x.Limit, x.Key, x.Cost)
			req.Hits[req.N-1].MaxWait = x.MaxWait
		}
		res := new(store.Result)
		err := h.s.Decide(context.Background(), req, res)
		if err == nil {
			h.checkShape(req, res)
		}
		return res, err
	}
	first, err := reserve(store.Hit{Limit: id, Key: "k", Cost: 1, MaxWait: time.Minute})
	if errors.Is(err, errors.ErrUnsupported) {
		h.t.Skipf("the store does not reserve: %v", err)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	// near checks a wait: exact on the caller's clock; on a server's
	// clock, less by at most the real time the test has taken.
	near := func(what string, got, want time.Duration) {
		h.t.Helper()
		if got == want || h.cfg.serverTime && got <= want && got > want-5*time.Second {
			return
		}
		h.t.Fatalf("%s: %v, want %v", what, got, want)
	}
	if !first.Allowed || first.Wait != 0 || first.Hits[0].Wait != 0 {
		h.t.Fatalf("a full bucket: %+v", first)
	}
	// base is where the slots start: a bucket's next token comes one
	// interval on, a window's next one at its start, up to one window on.
	var base time.Duration
	var slots []*store.Result
	for k := 1; k <= 3; k++ {
		res, err := reserve(store.Hit{Limit: id, Key: "k", Cost: 1, MaxWait: time.Minute})
		if err != nil {
			h.t.Fatal(err)
		}
		if !res.Allowed {
			h.t.Fatalf("reservation %d within its max wait: rejected %+v", k, res.Decision())
		}
		if k == 1 {
			if base = res.Hits[0].Wait - iv; base > 0 || base <= -iv {
				h.t.Fatalf("the first reservation waits %v, want up to %v", res.Hits[0].Wait, iv)
			}
		}
		near("reservation wait", res.Hits[0].Wait, base+time.Duration(k)*iv)
		near("request wait", res.Wait, base+time.Duration(k)*iv)
		slots = append(slots, res)
	}
	// The next slot is 40 s on from base: beyond a max wait of 35 s.
	res, err := reserve(store.Hit{Limit: id, Key: "k", Cost: 1, MaxWait: base + 35*time.Second})
	if err != nil {
		h.t.Fatal(err)
	}
	if res.Allowed || res.Wait != 0 {
		h.t.Fatalf("beyond the max wait: %+v", res)
	}
	near("retry after", res.Decision().RetryAfter, base+4*iv)
	// All or nothing: a later hit's rejection gives the reservation back.
	// The window's hit is decided when the reservation starts, some 40 s
	// on: its window must not end before (res.Now is the server's now on a
	// server's clock).
	window := h.register(h.spec(store.FixedWindow, 1, windowBeyond(res.Now, 2*time.Minute)))
	h.decide(store.Hit{Limit: window, Key: "k", Cost: 1})
	res, err = reserve(store.Hit{Limit: id, Key: "k", Cost: 1, MaxWait: time.Minute}, store.Hit{Limit: window, Key: "k", Cost: 1})
	if err != nil {
		h.t.Fatal(err)
	}
	if res.Allowed || res.Decider != 1 || res.Wait != 0 {
		h.t.Fatalf("rejected by the window: %+v", res)
	}
	rf, refunds := h.s.(store.Refunder)
	if refunds {
		// Cancelling the latest reservation gives its slot back; the
		// middle one's stays unused.
		cancel := func(r *store.Result) error {
			req := &store.Request{Now: h.now}
			req.Add(id, "k", 1)
			req.Hits[0].MaxWait = time.Minute
			return rf.Refund(context.Background(), req, r)
		}
		err := cancel(slots[2])
		if refunds = !errors.Is(err, errors.ErrUnsupported); refunds {
			if err == nil {
				err = cancel(slots[0])
			}
			if err != nil {
				h.t.Fatal(err)
			}
		}
	}
	res, err = reserve(store.Hit{Limit: id, Key: "k", Cost: 1, MaxWait: time.Minute})
	if err != nil {
		h.t.Fatal(err)
	}
	want := base + 4*iv // the rejected request reserved nothing
	if refunds {
		want = base + 3*iv // the latest came back, the middle one did not
	}
	if !res.Allowed {
		h.t.Fatalf("after the cancellations: rejected %+v", res.Decision())
	}
	near("after the cancellations", res.Hits[0].Wait, want)
	// A hit after a reserving one starts with it: reserved on a full
	// bucket at the same instant, or admitted at once without a max wait.
	res, err = reserve(store.Hit{Limit: id, Key: "k", Cost: 1, MaxWait: 2 * time.Minute},
		store.Hit{Limit: other, Key: "k", Cost: 1, MaxWait: 2 * time.Minute})
	if err != nil {
		h.t.Fatal(err)
	}
	if !res.Allowed || res.Hits[1].Wait != res.Hits[0].Wait || res.Wait != res.Hits[0].Wait {
		h.t.Fatalf("layered: %+v", res)
	}
	near("layered", res.Wait, want+iv)
	// A request that starts later anyway (Request.Wait) reserves no
	// earlier, on a fresh key too; a hit whose max wait is shorter is
	// charged exactly then (it has room then: a fresh key).
	req := &store.Request{Now: h.now, Wait: 15 * time.Second}
	req.Add(other, "late", 1)
	req.Hits[0].MaxWait = time.Minute
	req.Add(id, "late", 1)
	req.Hits[1].MaxWait = time.Second
	res = new(store.Result)
	if err := h.s.Decide(context.Background(), req, res); err != nil {
		h.t.Fatal(err)
	}
	h.checkShape(req, res)
	if !res.Allowed {
		h.t.Fatalf("a request that starts later: %+v", res)
	}
	near("a request that starts later", res.Wait, 15*time.Second)
	near("its reserving hit", res.Hits[0].Wait, 15*time.Second)
	near("its hit of a shorter max wait", res.Hits[1].Wait, 15*time.Second)
	// A store that keeps sliding windows refuses a max wait on one.
	if sliding, err := h.s.Register(context.Background(), h.spec(store.SlidingWindow, 1, time.Hour)); err == nil {
		if _, err := reserve(store.Hit{Limit: sliding, Key: "w", Cost: 1, MaxWait: time.Second}); err == nil ||
			errors.Is(err, errors.ErrUnsupported) {
			h.t.Fatalf("a max wait on a sliding window: %v", err)
		}
	}
	if _, err := reserve(store.Hit{Limit: id, Key: "n", Cost: 1, MaxWait: -1}); err == nil {
		h.t.Fatal("a negative max wait: no error")
	}
}

// windowBeyond returns the length of a fixed window, an hour or a few
// minutes more, whose window holding now ends more than margin after now
// (windows are aligned at multiples of their length): a hit decided up to
// margin later is decided in the same window. On a server's clock a test
// cannot choose its now, and a window of exactly an hour ends in the
// minute before every full hour.
func windowBeyond(now int64, margin time.Duration) time.Duration {
	w := time.Hour
	for int64(w)-now%int64(w) <= int64(margin) {
		w += time.Minute
	}
	return w
}
