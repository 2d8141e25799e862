package shed

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/sfv"
	"github.com/sluicehq/sluice/ratelimit"
	"pgregory.net/rapid"
)

// TestPermitsConserved: under any sequence of attempts, completions (with
// any outcome, done twice or not) and clock moves, the Controller's
// inflight count and the global semaphore's equal what the live tokens
// hold; once every token is done, everything is back (inflight 0, every
// lease released so a full-cost attempt fits again). Every limit and cost
// is scaled by m: at m = 1 the global semaphore is one word, at the m
// that makes its limit reach shardedFrom it is sharded.
func TestPermitsConserved(t *testing.T) {
	scales := []int64{1}
	if from := shardedFrom(); from > 0 {
		scales = append(scales, (from+3)/4)
	}
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(scales).Draw(t, "scale")
		clk := newFakeClock()
		c, err := New([]Rule{
			{Name: "cap", Algorithm: TokenBucket, Limit: 20 * m, Rate: ratelimit.Per(10*m, time.Second)},
			{Name: "conc", Algorithm: Concurrency, Limit: 4 * m},
			{Name: "lease", Identity: IP, Algorithm: Concurrency, Limit: 2 * m, LeaseTTL: time.Hour, Capacity: 16},
			{Name: "log", Identity: IP, Algorithm: SlidingLog, Limit: 5 * m, Window: time.Second, Capacity: 16, DryRun: rapid.Bool().Draw(t, "dry")},
		}, WithClock(clk.now), quiet())
		if err != nil {
			t.Fatal(err)
		}
		if sharded := c.set.Load().rules[1].sem.sharded != nil; sharded != (m > 1) {
			t.Fatalf("scale %d: the global semaphore sharded %v", m, sharded)
		}
		type live struct {
			tok  Token
			cost int64
		}
		var toks []live
		ips := []netip.Addr{ipA, ipB}
		held := func() (n, cost int64) {
			for _, l := range toks {
				n, cost = n+1, cost+l.cost
			}
			return
		}
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				cost := rapid.Int64Range(1, 2*m).Draw(t, "cost")
				ip := ips[rapid.IntRange(0, 1).Draw(t, "ip")]
				d, tok, err := c.Decide(context.Background(), Attempt{IP: ip, Cost: cost})
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					toks = append(toks, live{tok, cost})
				} else if tok != (Token{}) {
					t.Fatal("a rejection came with a token")
				}
			case 2:
				if len(toks) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(toks)-1).Draw(t, "tok")
				o := Outcome(rapid.IntRange(0, 2).Draw(t, "outcome"))
				toks[i].tok.Done(o)
				if rapid.Bool().Draw(t, "twice") {
					toks[i].tok.Done(o)
				}
				toks = append(toks[:i], toks[i+1:]...)
			case 3:
				clk.add(time.Duration(rapid.Int64Range(0, int64(2*time.Second)).Draw(t, "dt")))
			}
			n, cost := held()
			s := c.Stats()
			if s.Inflight != n || s.Rules[1].Inflight != cost {
				t.Fatalf("inflight %d/%d, tokens hold %d/%d", s.Inflight, s.Rules[1].Inflight, n, cost)
			}
		}
		for _, l := range toks {
			l.tok.Done(Success)
		}
		clk.add(time.Hour / 2) // refill the cap and the log; leases are not expired
		for _, ip := range ips {
			d, tok, _ := c.Decide(context.Background(), Attempt{IP: ip, Cost: 2 * m})
			if !d.Allowed {
				t.Fatalf("after all done, %v: %+v", ip, d)
			}
			tok.Done(Success)
		}
		if s := c.Stats(); s.Inflight != 0 || s.Rules[1].Inflight != 0 {
			t.Fatalf("%+v", s)
		}
	})
}

// TestDroppedReachesAdaptive: a 5xx from the handler is a drop for the
// adaptive limit, which lowers it.
func TestDroppedReachesAdaptive(t *testing.T) {
	alg, err := adaptive.NewAIMD(adaptive.WithInitialLimit(10), adaptive.WithLimits(1, 10))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := adaptive.NewLimiter(alg, adaptive.WithWindowSamples(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock()
	c, err := New([]Rule{{Name: "adaptive", Algorithm: Adaptive, Limiter: lim}}, WithClock(clk.now), quiet())
	if err != nil {
		t.Fatal(err)
	}
	h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clk.add(time.Millisecond)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	for range 4 {
		send(h, "192.0.2.1")
	}
	if lim.Limit() >= 10 || lim.Inflight() != 0 {
		t.Fatalf("limit %d inflight %d after drops", lim.Limit(), lim.Inflight())
	}
	if s := c.Stats(); s.Rules[0].Limit != int64(lim.Limit()) || s.Rules[0].Allowed != 4 {
		t.Fatalf("%+v", s.Rules[0])
	}
}

// countHandler counts log records.
type countHandler struct{ n atomic.Int64 }

func (h *countHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h *countHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h *countHandler) WithGroup(string) slog.Handler             { return h }

// TestLogRateLimited: dry-run rejections are logged at most once a second,
// however many there are.
func TestLogRateLimited(t *testing.T) {
	logs := &countHandler{}
	_, h, clk := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Hour}},
		WithDryRun(), WithLogger(slog.New(logs)))
	for range 100 {
		send(h, "192.0.2.1")
	}
	if n := logs.n.Load(); n != 1 {
		t.Fatalf("%d log lines in one second", n)
	}
	clk.add(time.Second)
	for range 100 {
		send(h, "192.0.2.1")
	}
	if n := logs.n.Load(); n != 2 {
		t.Fatalf("%d log lines in two seconds", n)
	}
}

// TestHeadersParse: for any valid rule name (quotes and backslashes
// included), limit and traffic, the header fields parse as Structured
// Fields, name the rule, and agree with X-RateLimit-*.
func TestHeadersParse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.StringMatching(`[ -~]{1,64}`).Draw(t, "name")
		limit := rapid.Int64Range(1, 50).Draw(t, "limit")
		alg := rapid.SampledFrom([]Algorithm{TokenBucket, FixedWindow, SlidingWindow, SlidingLog}).Draw(t, "alg")
		r := Rule{Name: name, Identity: IP, Algorithm: alg, Limit: limit, Capacity: 4096}
		if alg == TokenBucket {
			r.Rate = ratelimit.Per(rapid.Int64Range(1, 100).Draw(t, "rate"), time.Minute)
		} else {
			r.Window = time.Duration(rapid.Int64Range(1, 3600).Draw(t, "window")) * time.Second
		}
		clk := newFakeClock()
		c, err := New([]Rule{r}, WithClock(clk.now), quiet())
		if err != nil {
			t.Fatal(err)
		}
		h := c.Middleware(http.HandlerFunc(ok))
		for range rapid.IntRange(1, 60).Draw(t, "requests") {
			w := send(h, "192.0.2.1")
			hd := w.Header()
			pol, err := sfv.ParseList(hd.Get("RateLimit-Policy"), math.MaxInt)
			if err != nil || len(pol) != 1 || pol[0].Value != (sfv.Value{Kind: sfv.String, S: name}) {
				t.Fatalf("RateLimit-Policy %q: %v", hd.Get("RateLimit-Policy"), err)
			}
			if q, _ := pol[0].Param("q"); q != (sfv.Value{Kind: sfv.Integer, N: limit}) {
				t.Fatalf("q %v, limit %d", q, limit)
			}
			items, err := sfv.ParseList(hd.Get("RateLimit"), math.MaxInt)
			if err != nil || len(items) != 1 || items[0].Value != (sfv.Value{Kind: sfv.String, S: name}) {
				t.Fatalf("RateLimit %q: %v", hd.Get("RateLimit"), err)
			}
			rem, ok := items[0].IntParam("r")
			if !ok || fmt.Sprint(rem) != hd.Get("X-RateLimit-Remaining") || rem > limit {
				t.Fatalf("r=%v, X-RateLimit-Remaining %q", rem, hd.Get("X-RateLimit-Remaining"))
			}
			if w.Code == http.StatusTooManyRequests && hd.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			clk.add(time.Duration(rapid.Int64Range(0, int64(time.Minute)).Draw(t, "dt")))
		}
		if s := c.Stats(); s.Rules[0].Table.Entries != 1 || s.Inflight != 0 {
			t.Fatalf("%+v", s.Rules[0])
		}
	})
}

// TestChargesMatchWhatCounts: whatever the estimates, true costs and
// statuses, what a rate rule has recorded when every attempt is done is the
// sum of the true costs of the attempts it counts (Rule.Count), on a Global
// rule in this process and on a per-key rule in the store alike; nothing
// is held.
func TestChargesMatchWhatCounts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const limit = 1 << 40 // never reached: every attempt is admitted
		count := Count(rapid.IntRange(0, 3).Draw(t, "count"))
		// One rule at a time, so that the headers' figures are that rule's.
		rule := rapid.SampledFrom([]Rule{
			{Name: "global", Algorithm: FixedWindow, Limit: limit, Window: 24 * time.Hour, Count: count},
			{Name: "tenant", Identity: Tenant, Algorithm: FixedWindow, Limit: limit, Window: 24 * time.Hour, Count: count},
			{Name: "bucket", Identity: Tenant, Algorithm: TokenBucket, Limit: limit, Rate: ratelimit.Per(1, time.Nanosecond), Count: count}, // the clock stands still: no refill
		}).Draw(t, "rule")
		c, err := New([]Rule{rule}, WithClock(func() int64 { return int64(1) << 40 }), quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var want int64
		n := rapid.IntRange(1, 30).Draw(t, "attempts")
		for range n {
			estimate := rapid.Int64Range(1, 1000).Draw(t, "estimate")
			d, tok, err := c.Decide(context.Background(), Attempt{Tenant: "acme", Cost: estimate})
			if err != nil || !d.Allowed {
				t.Fatalf("attempt: %+v %v", d, err)
			}
			charged := estimate
			if rapid.Bool().Draw(t, "recost") {
				charged = rapid.Int64Range(0, 2000).Draw(t, "actual")
				if err := tok.Recost(charged); err != nil {
					t.Fatal(err)
				}
			}
			switch rapid.IntRange(0, 2).Draw(t, "ending") {
			case 0: // a status
				status := rapid.SampledFrom([]int{200, 204, 401, 403, 404, 429, 500, 503}).Draw(t, "status")
				tok.DoneStatus(status)
				if count.counts(status) {
					want += charged
				}
			default: // no status: every charge stands
				tok.Done(Success)
				want += charged
			}
		}
		peek, tok, err := c.Decide(context.Background(), Attempt{Tenant: "acme", Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		tok.Done(Success)
		for _, r := range c.Stats().Rules {
			if r.Overspent != 0 || r.RefundsLost != 0 {
				t.Fatalf("%s: overspent %d, refunds lost %d", r.Name, r.Overspent, r.RefundsLost)
			}
		}
		if got := limit - peek.Remaining - 1; got != want { // the peek charged its 1
			t.Fatalf("recorded %d, want %d (count %v)", got, want, count)
		}
		if s := c.Stats(); s.Inflight != 0 {
			t.Fatalf("inflight %d", s.Inflight)
		}
	})
}
