package shed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// calls is a Global token bucket of 10 a second with no burst, whose
// requests may wait up to maxWait for their turn.
func calls(maxWait time.Duration) Rule {
	return Rule{Name: "calls", Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(10, time.Second), MaxWait: maxWait}
}

func newReserving(t *testing.T, rules ...Rule) *Controller {
	t.Helper()
	c, err := New(rules, quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestReserveFiftyWaitersGetSlotsApart: 50 requests arriving together at a
// bucket of 10 a second with room for one are all admitted, at slots exactly
// 100 ms apart (virtual time), none early, and counted as waits.
func TestReserveFiftyWaitersGetSlotsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newReserving(t, calls(5*time.Second))
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				d, tok, err := c.Decide(context.Background(), Attempt{})
				if err != nil || !d.Allowed {
					t.Errorf("%+v %v", d, err)
					return
				}
				mu.Lock()
				at = append(at, time.Since(start))
				mu.Unlock()
				tok.Done(Success)
			})
		}
		wg.Wait()
		slices.Sort(at)
		for k, got := range at {
			if want := time.Duration(k) * 100 * time.Millisecond; got != want {
				t.Fatalf("admission %d at %v, want %v (all: %v)", k, got, want, at)
			}
		}
		if len(at) != 50 {
			t.Fatalf("%d admitted, want 50", len(at))
		}
		rs := c.Stats().Rules[0]
		if rs.Allowed != 50 || rs.Waited != 49 || rs.WaitTime != 49*50/2*100*time.Millisecond || rs.WaitCancelled != 0 {
			t.Fatalf("%+v", rs)
		}
	})
}

// TestReserveDeadlineBeforeSlot: a request whose deadline falls before its
// slot is rejected at once with the exact Retry-After, and reserves nothing.
func TestReserveDeadlineBeforeSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newReserving(t, calls(time.Second))
		_, tok, _ := c.Decide(context.Background(), Attempt{})
		tok.Done(Success)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		d, _, err := c.Decide(ctx, Attempt{})
		if err != nil || d.Allowed || d.Kind != Shedding || d.RetryAfter != 100*time.Millisecond || time.Since(start) != 0 {
			t.Fatalf("%+v %v after %v", d, err, time.Since(start))
		}
		// Nothing was reserved: the next request gets the 100 ms slot, and
		// its decision speaks from then (the bucket is full again 100 ms
		// after it).
		d, tok, err = c.Decide(context.Background(), Attempt{})
		if err != nil || !d.Allowed || time.Since(start) != 100*time.Millisecond || d.Reset != 100*time.Millisecond {
			t.Fatalf("%+v %v after %v", d, err, time.Since(start))
		}
		tok.Done(Success)
	})
}

// TestReserveCancelledWhenContextEnds: a waiter whose context ends before
// its slot gets the context's error, holds nothing, and its slot goes to the
// next request.
func TestReserveCancelledWhenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newReserving(t, calls(time.Second))
		_, tok, _ := c.Decide(context.Background(), Attempt{})
		tok.Done(Success)
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() {
			_, _, err := c.Decide(ctx, Attempt{})
			errc <- err
		}()
		synctest.Wait() // waiting for the 100 ms slot
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		d, tok, err := c.Decide(context.Background(), Attempt{})
		if err != nil || !d.Allowed || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("%+v %v after %v: the cancelled slot was not given back", d, err, time.Since(start))
		}
		tok.Done(Success)
		s := c.Stats()
		if rs := s.Rules[0]; rs.WaitCancelled != 1 || rs.Waited != 1 || s.Inflight != 0 {
			t.Fatalf("%+v", s)
		}
	})
}

// TestReserveWaitersBounded: with QueueLength 2, a third waiter is decided
// as if the rule did not wait: rejected at once, with the exact Retry-After.
func TestReserveWaitersBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := calls(time.Second)
		r.QueueLength = 2
		c := newReserving(t, r)
		_, tok, _ := c.Decide(context.Background(), Attempt{})
		tok.Done(Success)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if d, tok, err := c.Decide(context.Background(), Attempt{}); err == nil && d.Allowed {
					tok.Done(Success)
				} else {
					t.Errorf("%+v %v", d, err)
				}
			})
		}
		synctest.Wait() // two waiting, for 100 ms and 200 ms
		d, _, err := c.Decide(context.Background(), Attempt{})
		if err != nil || d.Allowed || d.RetryAfter != 300*time.Millisecond {
			t.Fatalf("%+v %v", d, err)
		}
		wg.Wait()
	})
}

// TestReserveRolledBackOnLaterRejection: all or nothing: a request that
// reserved a slot on a Global bucket and is then rejected by a per-key rule
// gives the slot back; a Global concurrency permit is taken only after the
// wait, so a waiter holds none.
func TestReserveRolledBackOnLaterRejection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newReserving(t, calls(time.Second),
			Rule{Name: "per-ip", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: time.Hour},
			Rule{Name: "cap", Algorithm: Concurrency, Limit: 1})
		a := Attempt{IP: netip.MustParseAddr("192.0.2.1")}
		b := Attempt{IP: netip.MustParseAddr("192.0.2.2")}
		start := time.Now()
		_, tok, _ := c.Decide(context.Background(), a)
		// a again: a slot at 100 ms on calls, then rejected by per-ip.
		if d, _, err := c.Decide(context.Background(), a); err != nil || d.Allowed || d.Rule != "per-ip" || time.Since(start) != 0 {
			t.Fatalf("%+v %v after %v", d, err, time.Since(start))
		}
		// b waits for the 100 ms slot while a's first request holds the
		// permit, which it returns meanwhile.
		done := make(chan Decision)
		go func() {
			d, tok, _ := c.Decide(context.Background(), b)
			if d.Allowed {
				tok.Done(Success)
			}
			done <- d
		}()
		synctest.Wait()
		if s := c.Stats(); s.Rules[2].Inflight != 1 {
			t.Fatalf("a waiter holds a permit: %+v", s.Rules[2])
		}
		tok.Done(Success)
		if d := <-done; !d.Allowed || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("%+v after %v", d, time.Since(start))
		}
		if s := c.Stats(); s.Inflight != 0 || s.Rules[2].Inflight != 0 {
			t.Fatalf("%+v", s)
		}
	})
}

// TestReserveRuleValidation: MaxWait applies to token buckets and fixed
// windows of a fixed length, not to sliding windows nor calendar months; a
// queue length to a waiting rule only; and it is bounded.
func TestReserveRuleValidation(t *testing.T) {
	for name, r := range map[string]Rule{
		"sliding":    {Name: "w", Algorithm: SlidingWindow, Limit: 1, Window: time.Second, MaxWait: time.Millisecond},
		"months":     {Name: "m", Algorithm: FixedWindow, Limit: 1, Calendar: store.Calendar{Months: 1}, MaxWait: time.Millisecond},
		"queue":      {Name: "q", Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Second), QueueLength: 3},
		"huge":       {Name: "h", Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Second), MaxWait: ratelimit.MaxReserveWait + 1},
		"discipline": {Name: "d", Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Second), MaxWait: time.Second, Queue: Queue{Reserve: 0.5}},
	} {
		if _, err := New([]Rule{r}, quiet()); err == nil {
			t.Errorf("%s: accepted %+v", name, r)
		}
	}
}

// perIP is a per-IP token bucket of 10 a second with no burst whose
// requests may wait up to a second.
func perIP() Rule {
	return Rule{Name: "per-ip", Identity: IP, Algorithm: TokenBucket, Limit: 1,
		Rate: ratelimit.Per(10, time.Second), MaxWait: time.Second}
}

// TestReservePerKeyRule: a per-key token bucket with MaxWait reserves in
// the store: a client's second request waits for its slot, another client
// does not; a waiter whose context ends gives its slot back.
func TestReservePerKeyRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newReserving(t, perIP())
		a := Attempt{IP: netip.MustParseAddr("192.0.2.1")}
		start := time.Now()
		for k := range 3 {
			d, tok, err := c.Decide(context.Background(), a)
			if err != nil || !d.Allowed || time.Since(start) != time.Duration(k)*100*time.Millisecond {
				t.Fatalf("request %d: %+v %v after %v", k, d, err, time.Since(start))
			}
			tok.Done(Success)
		}
		start = time.Now()
		if d, tok, _ := c.Decide(context.Background(), Attempt{IP: netip.MustParseAddr("192.0.2.2")}); !d.Allowed || time.Since(start) != 0 {
			t.Fatalf("another client waited: %+v after %v", d, time.Since(start))
		} else {
			tok.Done(Success)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() {
			_, _, err := c.Decide(ctx, a)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		if d, tok, _ := c.Decide(context.Background(), a); !d.Allowed || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("the cancelled slot was not given back: %+v after %v", d, time.Since(start))
		} else {
			tok.Done(Success)
		}
		s := c.Stats()
		if rs := s.Rules[0]; rs.Allowed != 5 || rs.Waited != 3 || rs.WaitCancelled != 1 || rs.WaitTime != 300*time.Millisecond || s.Inflight != 0 {
			t.Fatalf("%+v", s)
		}
	})
}

// TestReserveRefundedWhenRejectedAfterTheWait: a Global concurrency rule
// decides after the wait; when it rejects, the store's charge is given
// back (all or nothing), so the client's next request is not held up by it.
func TestReserveRefundedWhenRejectedAfterTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newReserving(t, perIP(), Rule{Name: "cap", Algorithm: Concurrency, Limit: 1})
		a := Attempt{IP: netip.MustParseAddr("192.0.2.1")}
		start := time.Now()
		_, tok, _ := c.Decide(context.Background(), a)
		d, _, err := c.Decide(context.Background(), a) // waits 100 ms, then finds the permit taken
		if err != nil || d.Allowed || d.Rule != "cap" || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("%+v %v after %v", d, err, time.Since(start))
		}
		tok.Done(Success)
		if d, tok, _ := c.Decide(context.Background(), a); !d.Allowed || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("the rejected request's charge stayed: %+v after %v", d, time.Since(start))
		} else {
			tok.Done(Success)
		}
		if rs := c.Stats().Rules[0]; rs.RefundsLost != 0 || rs.Waited != 1 {
			t.Fatalf("%+v", rs)
		}
	})
}

// noReserve is a store that cannot reserve, as pgstore.
type noReserve struct{ *store.Memory }

func (s noReserve) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	for _, h := range req.Hits[:req.N] {
		if h.MaxWait > 0 {
			return fmt.Errorf("store: cannot reserve: %w", errors.ErrUnsupported)
		}
	}
	return s.Memory.Decide(ctx, req, res)
}

// TestReserveOnAStoreThatCannot: on a store that refuses a max wait, the
// rule decides at once rather than failing.
func TestReserveOnAStoreThatCannot(t *testing.T) {
	c, err := New([]Rule{perIP()}, quiet(), WithStore(noReserve{store.NewMemory()}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a := Attempt{IP: netip.MustParseAddr("192.0.2.1"), Now: 1 << 40}
	if d, _, _ := c.Decide(context.Background(), a); !d.Allowed {
		t.Fatalf("%+v", d)
	}
	if d, _, _ := c.Decide(context.Background(), a); d.Allowed || d.RetryAfter != 100*time.Millisecond || d.Kind != OverLimit {
		t.Fatalf("%+v", d)
	}
	if s := c.Stats(); s.FailedOpen != 0 || s.StoreErrors != 0 {
		t.Fatalf("%+v", s)
	}
}

// TestReserveGlobalRefundedWhenRejectedAfterTheWait: the same for a Global
// bucket: its charge, taken at the slot, is given back at the slot.
func TestReserveGlobalRefundedWhenRejectedAfterTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newReserving(t, calls(time.Second), Rule{Name: "cap", Algorithm: Concurrency, Limit: 1})
		start := time.Now()
		_, tok, _ := c.Decide(context.Background(), Attempt{})
		d, _, err := c.Decide(context.Background(), Attempt{})
		if err != nil || d.Allowed || d.Rule != "cap" || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("%+v %v after %v", d, err, time.Since(start))
		}
		tok.Done(Success)
		if d, tok, _ := c.Decide(context.Background(), Attempt{}); !d.Allowed || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("the rejected request's charge stayed: %+v after %v", d, time.Since(start))
		} else {
			tok.Done(Success)
		}
	})
}

// TestReserveFixedWindow: a fixed window rule with MaxWait admits the
// requests that do not fit its window at the start of the next ones, the
// limit in each: Global and per key alike.
func TestReserveFixedWindow(t *testing.T) {
	for _, id := range []Identity{Global, IP} {
		t.Run(id.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newReserving(t, Rule{Name: "w", Identity: id, Algorithm: FixedWindow, Limit: 2,
					Window: 100 * time.Millisecond, MaxWait: time.Second})
				// Start on a window's start: the bubble's clock starts at
				// midnight UTC, a multiple of the window.
				start := time.Now()
				var mu sync.Mutex
				var at []time.Duration
				var wg sync.WaitGroup
				for range 5 {
					wg.Go(func() {
						d, tok, err := c.Decide(context.Background(), Attempt{IP: netip.MustParseAddr("192.0.2.1")})
						if err != nil || !d.Allowed {
							t.Errorf("%+v %v", d, err)
							return
						}
						mu.Lock()
						at = append(at, time.Since(start))
						mu.Unlock()
						tok.Done(Success)
					})
				}
				wg.Wait()
				slices.Sort(at)
				want := []time.Duration{0, 0, 100 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
				if !slices.Equal(at, want) {
					t.Fatalf("admitted at %v, want %v", at, want)
				}
			})
		})
	}
}

// TestReserveThroughTheMiddleware: the middleware waits on the request's
// context: a second request within the max wait is served 100 ms later, and
// one whose deadline falls before its slot is shed at once with
// Retry-After.
func TestReserveThroughTheMiddleware(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newReserving(t, calls(time.Second))
		h := c.Middleware(http.HandlerFunc(ok))
		start := time.Now()
		if w := send(h, "192.0.2.1"); w.Code != http.StatusOK || time.Since(start) != 0 {
			t.Fatalf("first: %d after %v", w.Code, time.Since(start))
		}
		if w := send(h, "192.0.2.1"); w.Code != http.StatusOK || time.Since(start) != 100*time.Millisecond ||
			w.Header().Get("RateLimit") != `"calls";r=0;t=1` {
			t.Fatalf("second: %d %v after %v", w.Code, w.Header(), time.Since(start))
		}
		start = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		w := send(h, "192.0.2.1", func(r *http.Request) { *r = *r.WithContext(ctx) })
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || time.Since(start) != 0 {
			t.Fatalf("past its deadline: %d %v after %v", w.Code, w.Header(), time.Since(start))
		}
	})
}

// TestReserveUnderLoadKeepsTheBoundAndLeavesNothing: in each of 40 runs,
// 200 attempts in virtual time arrive over two seconds, some giving up
// after a random time, on a Global bucket and a per-IP bucket that both
// wait (and a per-IP window, charged at the attempt's slot, that rejects
// some after they reserved). The instants the admitted attempts start at
// keep each bucket's bound (burst + rate·T), whichever rule set the slot;
// no attempt starts before its arrival nor later than the max wait after
// it; afterwards nothing is held or waiting.
func TestReserveUnderLoadKeepsTheBoundAndLeavesNothing(t *testing.T) {
	const iv = 20 * time.Millisecond // 50 a second
	global := Rule{Name: "global", Algorithm: TokenBucket, Limit: 3, Rate: ratelimit.Per(1, iv), MaxWait: 300 * time.Millisecond}
	perIP := Rule{Name: "per-ip", Identity: IP, Algorithm: TokenBucket, Limit: 2, Rate: ratelimit.Per(1, 3*iv),
		MaxWait: 200 * time.Millisecond, QueueLength: 4}
	window := Rule{Name: "window", Identity: IP, Algorithm: FixedWindow, Limit: 12, Window: time.Second}
	var total [3]RuleStats
	for seed := range uint64(40) {
		synctest.Test(t, func(t *testing.T) {
			c := newReserving(t, global, perIP, window)
			r := rand.New(rand.NewPCG(seed, 3))
			start := time.Now()
			var mu sync.Mutex
			starts := map[string][]time.Duration{}
			var wg sync.WaitGroup
			for k := range 200 {
				arrive := time.Duration(r.Int64N(int64(2 * time.Second)))
				ip := netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + k%4)})
				giveUp := time.Duration(0)
				if r.IntN(4) == 0 {
					giveUp = time.Duration(1 + r.Int64N(int64(250*time.Millisecond)))
				}
				wg.Go(func() {
					<-time.After(arrive) // virtual time: the arrival
					ctx := context.Background()
					if giveUp > 0 {
						// A caller that gives up with no deadline known
						// beforehand: it waits, then cancels.
						var cancel context.CancelFunc
						ctx, cancel = context.WithCancel(ctx)
						defer time.AfterFunc(giveUp, cancel).Stop()
						defer cancel()
					}
					d, tok, err := c.Decide(ctx, Attempt{IP: ip})
					if err != nil || !d.Allowed {
						return
					}
					at := time.Since(start)
					if at < arrive || at > arrive+global.MaxWait {
						t.Errorf("seed %d: started at %v, arrived at %v", seed, at, arrive)
					}
					mu.Lock()
					starts["global"] = append(starts["global"], at)
					starts[ip.String()] = append(starts[ip.String()], at)
					mu.Unlock()
					tok.Done(Success)
				})
			}
			wg.Wait()
			check := func(name string, at []time.Duration, burst int64, interval time.Duration) {
				slices.Sort(at)
				for i := range at {
					for j := i; j < len(at); j++ {
						if most := burst + int64((at[j]-at[i])/interval); int64(j-i+1) > most {
							t.Fatalf("seed %d: %s: %d started in [%v, %v], bound %d", seed, name, j-i+1, at[i], at[j], most)
						}
					}
				}
			}
			check("global", starts["global"], global.Limit, iv)
			for k := range 4 {
				ip := netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + k)}).String()
				check(ip, starts[ip], perIP.Limit, 3*iv)
			}
			s := c.Stats()
			if s.Inflight != 0 || s.Rules[0].Waiting != 0 || s.Rules[1].Waiting != 0 {
				t.Fatalf("seed %d: left behind: %+v", seed, s)
			}
			for i := range total {
				total[i].Waited += s.Rules[i].Waited
				total[i].WaitCancelled += s.Rules[i].WaitCancelled
				total[i].Rejected += s.Rules[i].Rejected
			}
		})
	}
	g, p := total[0], total[1]
	if g.Waited == 0 || p.Waited == 0 || g.WaitCancelled == 0 || p.WaitCancelled == 0 || total[2].Rejected == 0 {
		t.Fatalf("the runs did not exercise waits, cancellations and rejections: %+v", total)
	}
	t.Logf("waits %d+%d, cancelled %d+%d, rejected by the window %d", g.Waited, p.Waited, g.WaitCancelled, p.WaitCancelled, total[2].Rejected)
}

// TestReserveBigBurstAndShardedRules: a Global bucket of a burst that would
// be sharded reserves when it has MaxWait (it stays one bucket); a sharded
// one without MaxWait, in the same attempt as one that waits, is charged at
// once.
func TestReserveBigBurstAndShardedRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := Rule{Name: "big", Algorithm: TokenBucket, Limit: 256, Rate: ratelimit.Per(256, time.Second), MaxWait: time.Second}
		sharded := Rule{Name: "sharded", Algorithm: TokenBucket, Limit: 1024, Rate: ratelimit.Per(1024, time.Second)}
		window := Rule{Name: "window", Algorithm: FixedWindow, Limit: 1 << 20, Window: time.Minute}
		c := newReserving(t, big, sharded, window)
		start := time.Now()
		for range 256 {
			if d, tok, err := c.Decide(context.Background(), Attempt{}); err != nil || !d.Allowed || time.Since(start) != 0 {
				t.Fatalf("within the burst: %+v %v after %v", d, err, time.Since(start))
			} else {
				tok.Done(Success)
			}
		}
		d, tok, err := c.Decide(context.Background(), Attempt{})
		if err != nil || !d.Allowed || time.Since(start) != time.Second/256 {
			t.Fatalf("past the burst: %+v %v after %v, want %v", d, err, time.Since(start), time.Second/256)
		}
		tok.Done(Success)
	})
}
