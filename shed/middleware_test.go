package shed

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/sfv"
	"github.com/sluicehq/sluice/ratelimit"
)

// rateCases are the rate algorithms with a limit of 5 and how long each
// takes to admit again after it is exhausted.
func rateCases() []struct {
	rule    Rule
	recover time.Duration
} {
	return []struct {
		rule    Rule
		recover time.Duration
	}{
		{Rule{Name: "tb", Algorithm: TokenBucket, Limit: 5, Rate: ratelimit.Per(1, time.Minute)}, time.Minute},
		{Rule{Name: "fw", Algorithm: FixedWindow, Limit: 5, Window: time.Minute}, time.Minute},
		{Rule{Name: "sw", Algorithm: SlidingWindow, Limit: 5, Window: time.Minute}, 2 * time.Minute},
		{Rule{Name: "sl", Algorithm: SlidingLog, Limit: 5, Window: time.Minute}, time.Minute},
	}
}

// TestRateRulesEndToEnd: for every rate algorithm, per IP (store) and
// global (in process), the 5th request succeeds, the 6th is rejected with
// the right status and Retry-After, and after the window rolls over
// requests succeed again.
func TestRateRulesEndToEnd(t *testing.T) {
	for _, id := range []Identity{IP, Global} {
		for _, tc := range rateCases() {
			rule := tc.rule
			rule.Identity = id
			t.Run(rule.Algorithm.String()+"/"+id.String(), func(t *testing.T) {
				c, h, clk := newTest(t, []Rule{rule})
				for i := 1; i <= 5; i++ {
					if w := send(h, "192.0.2.1"); w.Code != http.StatusOK {
						t.Fatalf("request %d: %d", i, w.Code)
					}
				}
				want := http.StatusTooManyRequests
				if id == Global {
					want = http.StatusServiceUnavailable
				}
				w := send(h, "192.0.2.1")
				if w.Code != want || w.Header().Get("Retry-After") == "" {
					t.Fatalf("6th request: %d, Retry-After %q; want %d", w.Code, w.Header().Get("Retry-After"), want)
				}
				if id == IP {
					// Another client has its own limit.
					if w := send(h, "192.0.2.2"); w.Code != http.StatusOK {
						t.Fatalf("other client: %d", w.Code)
					}
				}
				clk.add(tc.recover)
				if w := send(h, "192.0.2.1"); w.Code != http.StatusOK {
					t.Fatalf("after rollover: %d", w.Code)
				}
				s := c.Stats()
				if s.Rules[0].Rejected != 1 || s.Inflight != 0 {
					t.Fatalf("stats %+v", s)
				}
			})
		}
	}
}

// TestConcurrencyRulesEndToEnd: per-key leases, a global semaphore and an
// adaptive limit of 5 admit 5 requests at once and reject the 6th while
// they run; once they finish, requests are admitted again and nothing is
// left held.
func TestConcurrencyRulesEndToEnd(t *testing.T) {
	newLimiter := func(t *testing.T) *adaptive.Limiter {
		alg, err := adaptive.NewAIMD(adaptive.WithInitialLimit(5), adaptive.WithLimits(5, 5))
		if err != nil {
			t.Fatal(err)
		}
		l, err := adaptive.NewLimiter(alg)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	cases := []struct {
		name string
		rule func(t *testing.T) Rule
		want int
	}{
		{"leases/ip", func(*testing.T) Rule {
			return Rule{Name: "c", Identity: IP, Algorithm: Concurrency, Limit: 5, LeaseTTL: time.Minute}
		}, http.StatusTooManyRequests},
		{"semaphore/global", func(*testing.T) Rule {
			return Rule{Name: "c", Algorithm: Concurrency, Limit: 5}
		}, http.StatusServiceUnavailable},
		{"adaptive/global", func(t *testing.T) Rule {
			return Rule{Name: "c", Algorithm: Adaptive, Limiter: newLimiter(t)}
		}, http.StatusServiceUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			c, err := New([]Rule{tc.rule(t)}, WithClock(clk.now), quiet())
			if err != nil {
				t.Fatal(err)
			}
			entered, release := make(chan struct{}), make(chan struct{})
			h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				entered <- struct{}{}
				<-release
			}))
			var wg sync.WaitGroup
			codes := make([]int, 5)
			for i := range 5 {
				wg.Go(func() { codes[i] = send(h, "192.0.2.1").Code })
			}
			for range 5 {
				<-entered
			}
			// A full concurrency limit, per key or global, sends the 1 s
			// hint (a lease's TTL, a minute here, would be far too long).
			if w := send(h, "192.0.2.1"); w.Code != tc.want || w.Header().Get("Retry-After") != "1" {
				t.Fatalf("6th: %d (Retry-After %q), want %d and 1", w.Code, w.Header().Get("Retry-After"), tc.want)
			}
			close(release)
			wg.Wait()
			for i, code := range codes {
				if code != http.StatusOK {
					t.Fatalf("request %d: %d", i, code)
				}
			}
			if s := c.Stats(); s.Inflight != 0 || s.Rules[0].Inflight != 0 || s.Rules[0].Rejected != 1 {
				t.Fatalf("stats %+v", s)
			}
			// Admitted again: run one through with the handler free.
			go func() { <-entered }()
			if w := send(h, "192.0.2.1"); w.Code != http.StatusOK {
				t.Fatalf("after release: %d", w.Code)
			}
		})
	}
}

// TestFiftyAgainstTen: 50 concurrent requests against a limit of 10
// admit exactly 10, for a per-IP rate and for a global concurrency limit.
func TestFiftyAgainstTen(t *testing.T) {
	t.Run("rate", func(t *testing.T) {
		c, h, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 10, Window: time.Hour}})
		codes := fire(50, func() int { return send(h, "192.0.2.9").Code })
		if codes[200] != 10 || codes[429] != 40 {
			t.Fatalf("codes %v", codes)
		}
		if s := c.Stats(); s.Admitted != 10 || s.OverLimit != 40 {
			t.Fatalf("stats %+v", s)
		}
	})
	t.Run("concurrency", func(t *testing.T) {
		// Admitted handlers hold their permit until every request has
		// been decided.
		var decided sync.WaitGroup
		decided.Add(50)
		c2, err := New([]Rule{{Name: "cap", Algorithm: Concurrency, Limit: 10}}, quiet(),
			WithDecisionHook(func(Decision) { decided.Done() }))
		if err != nil {
			t.Fatal(err)
		}
		h := c2.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { decided.Wait() }))
		codes := fire(50, func() int { return send(h, "192.0.2.9").Code })
		if codes[200] != 10 || codes[503] != 40 {
			t.Fatalf("codes %v", codes)
		}
		if s := c2.Stats(); s.Inflight != 0 || s.Rules[0].Inflight != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// fire runs f n times at once and counts the results.
func fire(n int, f func() int) map[int]int {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
		out   = map[int]int{}
	)
	for range n {
		wg.Go(func() {
			<-start
			code := f()
			mu.Lock()
			out[code]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return out
}

// TestHeaders: the fields parse as Structured Fields and agree with each
// other: Remaining decrements, the reset is in the future, and a retry at
// Retry-After succeeds while one a second earlier does not.
func TestHeaders(t *testing.T) {
	c, h, clk := newTest(t, []Rule{
		{Name: "burst", Identity: IP, Algorithm: TokenBucket, Limit: 3, Rate: ratelimit.Per(1, 10*time.Second)},
		{Name: "daily", Identity: IP, Algorithm: FixedWindow, Limit: 1000, Window: 24 * time.Hour},
	})
	wallNow := func() int64 { return c.wallAnchor + clk.now() - c.monoAnchor }
	prev := int64(-1)
	for i := range 3 {
		w := send(h, "192.0.2.7")
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: %d", i, w.Code)
		}
		hd := w.Header()
		policies, err := sfv.ParseList(hd.Get("RateLimit-Policy"), math.MaxInt)
		if err != nil || len(policies) != 2 {
			t.Fatalf("RateLimit-Policy %q: %v", hd.Get("RateLimit-Policy"), err)
		}
		if q, _ := policies[0].Param("q"); q != (sfv.Value{Kind: sfv.Integer, N: 3}) {
			t.Fatalf("burst q = %v", q)
		}
		if wnd, _ := policies[0].Param("w"); wnd != (sfv.Value{Kind: sfv.Integer, N: 30}) {
			t.Fatalf("burst w = %v", wnd)
		}
		items, err := sfv.ParseList(hd.Get("RateLimit"), math.MaxInt)
		if err != nil || len(items) != 1 || items[0].Value != (sfv.Value{Kind: sfv.String, S: "burst"}) {
			t.Fatalf("RateLimit %q: %v", hd.Get("RateLimit"), err)
		}
		r, okR := items[0].IntParam("r")
		tt, okT := items[0].IntParam("t")
		rem, _ := strconv.ParseInt(hd.Get("X-RateLimit-Remaining"), 10, 64)
		reset, _ := strconv.ParseInt(hd.Get("X-RateLimit-Reset"), 10, 64)
		if !okR || r != rem || rem != int64(2-i) || (prev >= 0 && rem != prev-1) {
			t.Fatalf("request %d: r=%v remaining=%d prev=%d", i, r, rem, prev)
		}
		prev = rem
		if hd.Get("X-RateLimit-Limit") != "3" {
			t.Fatalf("X-RateLimit-Limit %q", hd.Get("X-RateLimit-Limit"))
		}
		if reset*int64(time.Second) <= wallNow() || !okT || tt <= 0 {
			t.Fatalf("reset %d (t=%v) is not in the future of %d", reset, tt, wallNow()/1e9)
		}
		if reset > wallNow()/int64(time.Second)+tt+1 {
			t.Fatalf("reset %d disagrees with t=%v", reset, tt)
		}
	}
	clk.add(1500 * time.Millisecond)
	w := send(h, "192.0.2.7")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("4th: %d", w.Code)
	}
	if w.Header().Get("RateLimit-Policy") == "" || w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("rejection headers %v", w.Header())
	}
	ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
	if err != nil || ra != 9 { // 8.5 s left, rounded up
		t.Fatalf("Retry-After %q", w.Header().Get("Retry-After"))
	}
	clk.add(time.Duration(ra-1) * time.Second)
	if w := send(h, "192.0.2.7"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("a second early: %d", w.Code)
	}
	clk.add(time.Second)
	if w := send(h, "192.0.2.7"); w.Code != http.StatusOK {
		t.Fatalf("at Retry-After: %d", w.Code)
	}
}

// TestSoftLimitWarning: X-RateLimit-Warning appears from 80% of a quota.
func TestSoftLimitWarning(t *testing.T) {
	_, h, _ := newTest(t, []Rule{{Name: "q", Identity: IP, Algorithm: FixedWindow, Limit: 10, Window: time.Hour}})
	for i := 1; i <= 10; i++ {
		w := send(h, "192.0.2.1")
		got := w.Header().Get("X-RateLimit-Warning") != ""
		if got != (i >= 8) {
			t.Fatalf("request %d: warning %q", i, w.Header().Get("X-RateLimit-Warning"))
		}
	}
}

// TestSpoofedForwardedFor: without trusted proxies a client cannot pick
// its key with X-Forwarded-For; behind a configured proxy the header is
// used.
func TestSpoofedForwardedFor(t *testing.T) {
	_, h, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Hour}})
	xff := func(v string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("X-Forwarded-For", v) }
	}
	if w := send(h, "203.0.113.5", xff("198.51.100.1")); w.Code != http.StatusOK {
		t.Fatal(w.Code)
	}
	if w := send(h, "203.0.113.5", xff("198.51.100.2")); w.Code != http.StatusTooManyRequests {
		t.Fatalf("spoofed XFF changed the key: %d", w.Code)
	}
}

// TestProblemBody: rejections are RFC 9457 documents of the draft's types
// and say nothing about keys or internal state.
func TestProblemBody(t *testing.T) {
	_, h, _ := newTest(t, []Rule{{Name: "per-key", Identity: APIKey, Algorithm: SlidingLog, Limit: 1, Window: time.Hour}},
		WithClient(func(r *http.Request) Client { return Client{APIKey: r.Header.Get("X-Api-Key")} }))
	withKey := func(r *http.Request) { r.Header.Set("X-Api-Key", "sk_live_secret_0123456789") }
	send(h, "192.0.2.1", withKey)
	w := send(h, "192.0.2.1", withKey)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
	var p map[string]any
	if err := jsonUnmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p["type"] != problemQuota || p["status"] != float64(429) || p["title"] == "" {
		t.Fatalf("problem %v", p)
	}
	if vp, _ := p["violated-policies"].([]any); len(vp) != 1 || vp[0] != "per-key" {
		t.Fatalf("violated-policies %v", p["violated-policies"])
	}
	all := w.Body.String()
	for k, v := range w.Header() {
		all += k + ":" + v[0]
	}
	for _, leak := range []string{"sk_live", "192.0.2.1", "key:", "ip:"} {
		if containsFold(all, leak) {
			t.Fatalf("response leaks %q: %s", leak, all)
		}
	}
}

// TestPanicReleases: a panicking handler returns its permits before the
// panic goes on; inflight is 0 afterwards.
func TestPanicReleases(t *testing.T) {
	c, err := New([]Rule{
		{Name: "cap", Algorithm: Concurrency, Limit: 1},
		{Name: "lease", Identity: IP, Algorithm: Concurrency, Limit: 1, LeaseTTL: time.Hour},
	}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	h := c.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	for range 3 {
		func() {
			defer func() {
				if recover() != "boom" {
					t.Fatal("panic did not go on")
				}
			}()
			send(h, "192.0.2.1")
		}()
	}
	s := c.Stats()
	if s.Inflight != 0 || s.Rules[0].Inflight != 0 || s.Panics != 3 || s.Admitted != 3 {
		t.Fatalf("stats %+v", s)
	}
	if w := send(c.Middleware(http.HandlerFunc(ok)), "192.0.2.1"); w.Code != http.StatusOK {
		t.Fatalf("after panics: %d", w.Code)
	}
}

// TestOutcomeReported: a 5xx is a drop for the adaptive limiter, a 2xx a
// success; both return the permit.
func TestOutcomeOfStatus(t *testing.T) {
	ctx := httptest.NewRequest("GET", "/", nil).Context()
	if outcomeOfStatus(503, ctx) != Dropped || outcomeOfStatus(200, ctx) != Success || outcomeOfStatus(0, ctx) != Success {
		t.Fatal("status mapping")
	}
}

// TestHeadersLongName: a 64-byte policy name, a warning and Retry-After
// outgrow the response's header block and still come out whole and valid.
func TestHeadersLongName(t *testing.T) {
	name := strings.Repeat("n", 64)
	_, h, _ := newTest(t, []Rule{{Name: name, Identity: IP, Algorithm: FixedWindow, Limit: 2, Window: time.Hour, SoftLimit: 0.5}})
	for i, want := range []int{200, 200, 429} {
		w := send(h, "192.0.2.1")
		if w.Code != want {
			t.Fatalf("request %d: %d", i, w.Code)
		}
		items, err := sfv.ParseList(w.Header().Get("RateLimit"), math.MaxInt)
		if err != nil || len(items) != 1 || items[0].Value != (sfv.Value{Kind: sfv.String, S: name}) {
			t.Fatalf("RateLimit %q: %v", w.Header().Get("RateLimit"), err)
		}
		r, ok := items[0].IntParam("r")
		if !ok || r != int64(max(0, 1-i)) || w.Header().Get("X-RateLimit-Remaining") != strconv.Itoa(max(0, 1-i)) {
			t.Fatalf("request %d: r=%v, remaining %q", i, r, w.Header().Get("X-RateLimit-Remaining"))
		}
		if (w.Header().Get("X-RateLimit-Warning") != "") != (i < 2) {
			t.Fatalf("request %d: warning %q", i, w.Header().Get("X-RateLimit-Warning"))
		}
		if (w.Header().Get("Retry-After") != "") != (i == 2) {
			t.Fatalf("request %d: Retry-After %q", i, w.Header().Get("Retry-After"))
		}
	}
}

// latencies is an Observer that keeps the decisions' latencies.
type latencies struct{ got []time.Duration }

func (l *latencies) ObserveQueueWait(string, time.Duration, bool) {}
func (l *latencies) ObserveDecision(_ Kind, d time.Duration)      { l.got = append(l.got, d) }

// TestMiddlewareReadsTheClockOnceToDecide: a request through the
// middleware, or an Attempt without Now given to Decide, reads the clock
// once to be decided, and once more, with an Observer, to end the
// decision's latency, which runs from that first reading (on a clock that
// moves 1 ms a reading: 1 ms).
func TestMiddlewareReadsTheClockOnceToDecide(t *testing.T) {
	rules := []Rule{{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 10, Rate: ratelimit.Per(10, time.Second)}}
	for _, tc := range []struct {
		name  string
		obs   *latencies
		reads int64
	}{{"no observer", nil, 1}, {"observer", &latencies{}, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			var reads atomic.Int64
			clk := func() int64 { return int64(1)<<40 + reads.Add(1)*int64(time.Millisecond) }
			opts := []Option{WithClock(clk), quiet()}
			if tc.obs != nil {
				opts = append(opts, WithObserver(tc.obs))
			}
			c, err := New(rules, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			h := c.Middleware(http.HandlerFunc(ok))
			before := reads.Load()
			if w := send(h, "192.0.2.1"); w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
			if n := reads.Load() - before; n != tc.reads {
				t.Errorf("%d clock readings for one request, want %d", n, tc.reads)
			}
			before = reads.Load()
			d, tok, err := c.Decide(context.Background(), Attempt{IP: netip.MustParseAddr("192.0.2.2")})
			if err != nil || !d.Allowed {
				t.Fatalf("Decide: %+v, %v", d, err)
			}
			if n := reads.Load() - before; n != tc.reads {
				t.Errorf("%d clock readings for one Decide, want %d", n, tc.reads)
			}
			tok.Done(Success)
			if tc.obs != nil && (len(tc.obs.got) != 2 || tc.obs.got[0] != time.Millisecond || tc.obs.got[1] != time.Millisecond) {
				t.Errorf("latencies %v, want [1ms 1ms]", tc.obs.got)
			}
		})
	}
}

// TestMiddlewareServesNoRequestWhoseClientHasGone: a request whose context
// has ended before the middleware decides (the client reset its stream or
// closed its connection while the request queued in front of the handler)
// runs no handler, takes nothing from any rule and is no adaptive sample,
// and Stats.Gone counts it; a live request after it is served as usual.
func TestMiddlewareServesNoRequestWhoseClientHasGone(t *testing.T) {
	obs := &latencies{}
	c, err := New([]Rule{
		{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Hour)},
		{Name: "inflight", Algorithm: Concurrency, Limit: 1},
	}, WithObserver(obs), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var served atomic.Int64
	h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.WriteHeader(http.StatusOK)
	}))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || served.Load() != 0 {
		t.Fatalf("gone client: status %d, handler ran %d times; want 503 and no run", w.Code, served.Load())
	}
	s := c.Stats()
	if s.Gone != 1 {
		t.Errorf("Stats.Gone = %d, want 1", s.Gone)
	}
	for _, rs := range s.Rules {
		if rs.Allowed != 0 || rs.Rejected != 0 {
			t.Errorf("rule %s decided a gone request: allowed %d, rejected %d", rs.Name, rs.Allowed, rs.Rejected)
		}
	}
	if len(obs.got) != 0 {
		t.Errorf("a gone request gave latency samples %v", obs.got)
	}

	// The same client, alive: its one token is still there.
	if w := send(h, "192.0.2.1"); w.Code != http.StatusOK || served.Load() != 1 {
		t.Fatalf("live request after a gone one: status %d, served %d", w.Code, served.Load())
	}
}

// TestDecideDecidesNothingForAnEndedContext: Decide with a context that
// has already ended returns its error, admits nothing and charges no rule,
// on the short path for Global rules and on the general path alike, and
// Stats.Gone counts it.
func TestDecideDecidesNothingForAnEndedContext(t *testing.T) {
	for _, rules := range [][]Rule{
		{{Name: "global", Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Hour)}},
		{{Name: "user", Identity: User, Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Hour)}},
	} {
		t.Run(rules[0].Name, func(t *testing.T) {
			c, err := New(rules, quiet())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			d, tok, err := c.Decide(ctx, Attempt{User: "u"})
			if err != context.Canceled || d.Allowed || tok != (Token{}) {
				t.Fatalf("ended context: %+v, %v, %v; want no decision and context.Canceled", d, tok, err)
			}
			if s := c.Stats(); s.Gone != 1 || s.Admitted != 0 || s.Rules[0].Allowed != 0 {
				t.Errorf("stats after an ended context: gone %d, admitted %d, rule allowed %d", s.Gone, s.Admitted, s.Rules[0].Allowed)
			}
			// The one token is still there for a live attempt.
			if d, tok, err := c.Decide(context.Background(), Attempt{User: "u"}); err != nil || !d.Allowed {
				t.Fatalf("live attempt after an ended one: %+v, %v", d, err)
			} else {
				tok.Done(Success)
			}
		})
	}
}
