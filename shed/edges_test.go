package shed

import (
	"context"
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/penalty"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestGoexitInHandlerReturnsPermits: a handler that ends its goroutine with
// runtime.Goexit (t.FailNow in a test server does) gives its permits back,
// as a panic does.
func TestGoexitInHandlerReturnsPermits(t *testing.T) {
	c, err := New([]Rule{{Name: "inflight", Algorithm: Concurrency, Limit: 2}}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := goexitServer(c)
	goexits(h, 4)
	if w := send(h, "192.0.2.1"); w.Code != http.StatusOK {
		t.Fatalf("after 4 Goexits in a limit-2 server: %d", w.Code)
	}
	if s := c.Stats(); s.Inflight != 0 || s.Panics != 4 {
		t.Fatalf("inflight %d, panics %d: want 0 and 4 (Goexit counts as a panic)", s.Inflight, s.Panics)
	}
}

// TestEndedContextNeverFailsOpen: a client that hung up while its store
// call failed is not admitted past a fail-open rule, and neither is a
// Decide whose context had ended already.
func TestEndedContextNeverFailsOpen(t *testing.T) {
	faulty := storetest.NewFaulty(store.NewMemory())
	ran := 0
	c, err := New([]Rule{{Name: "per-ip", Identity: IP, Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Hour)}},
		WithStore(faulty), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran++; ok(w, r) }))
	faulty.SetErr(store.Unavailable(errors.New("connection refused")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		r.RemoteAddr = "192.0.2.1:4000"
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	if ran != 0 {
		t.Fatalf("the handler ran %d times for clients that had hung up", ran)
	}
	d, tok, err := c.Decide(ctx, Attempt{IP: ipA})
	tok.Done(Success)
	if err == nil || d.Allowed {
		t.Fatalf("Decide on an ended context: %+v, %v; want no decision and the context's error", d, err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if s := c.Stats(); s.FailedOpen != 0 {
		t.Fatalf("%d fail-open admissions for ended contexts", s.FailedOpen)
	}
	// A live context still fails open, as the rule says.
	faulty.SetErr(store.Unavailable(errors.New("connection refused")))
	if d := decide(t, c, Attempt{IP: ipA}); !d.Allowed || !d.FailedOpen {
		t.Fatalf("live context: %+v", d)
	}
}

// TestLimiterSharedByTwoRulesIsAnError: one adaptive.Limiter under two
// rules would be asked twice per request and halve the limit.
func TestLimiterSharedByTwoRulesIsAnError(t *testing.T) {
	lim := aimdLimiter(t, 20, 200)
	_, err := New([]Rule{
		{Name: "a", Category: "read", Algorithm: Adaptive, Limiter: lim},
		{Name: "b", Category: "write", Algorithm: Adaptive, Limiter: lim},
	}, quiet())
	if err == nil || !strings.Contains(err.Error(), "Limiter") {
		t.Fatalf("err = %v, want an error naming the shared Limiter", err)
	}
}

// TestNegativeClockIsNoFailOpen: a clock that goes below zero is an error
// of the decision (503), never a store failure that fail-open rules admit.
func TestNegativeClockIsNoFailOpen(t *testing.T) {
	var now int64 = -5
	c, err := New([]Rule{{Name: "per-ip", Identity: IP, Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Hour)}},
		WithClock(func() int64 { return now }), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := c.Middleware(http.HandlerFunc(ok))
	for i := range 3 {
		if w := send(h, "192.0.2.1"); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("request %d on a negative clock: %d, want 503", i, w.Code)
		}
	}
	if _, _, err := c.Decide(context.Background(), Attempt{IP: ipA, Now: -1}); err == nil {
		t.Fatal("Decide at a negative now: no error")
	}
	if s := c.Stats(); s.FailedOpen != 0 {
		t.Fatalf("%d fail-open admissions on a negative clock", s.FailedOpen)
	}
}

// TestResizedConcurrencyRuleNeverAdmitsPastNewLimit: lowering a Global
// Concurrency rule from 4 to 3 while 4 run admits nothing new until fewer
// than 3 run; raising it admits up to the new limit at once, counting the
// permits held under the old rule set. With every limit and cost scaled by
// m, the same holds of a sharded semaphore (the rule's limit reaching
// shardedFrom, no queue), which a resize keeps.
func TestResizedConcurrencyRuleNeverAdmitsPastNewLimit(t *testing.T) {
	type scaled struct {
		wait time.Duration
		m    int64
	}
	cases := []scaled{{0, 1}, {time.Millisecond, 1}}
	if from := shardedFrom(); from > 0 {
		cases = append(cases, scaled{0, (from + 2) / 3})
	}
	for _, cs := range cases {
		wait, m := cs.wait, cs.m
		t.Run(fmt.Sprint("maxwait=", wait, ",scale=", m), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rules := func(limit int64) []Rule {
					return []Rule{{Name: "inflight", Algorithm: Concurrency, Limit: limit * m, MaxWait: wait}}
				}
				c, _, _ := newTest(t, rules(4))
				sharded := func() bool { return c.set.Load().rules[0].sem.sharded != nil }
				if sharded() != (m > 1) {
					t.Fatalf("scale %d: sharded %v", m, sharded())
				}
				try := func() (Token, bool) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					defer cancel()
					d, tok, err := c.Decide(ctx, Attempt{Cost: m})
					return tok, err == nil && d.Allowed
				}
				var held []Token
				for range 4 {
					tok, ok := try()
					if !ok {
						t.Fatal("limit 4: a first 4 rejected")
					}
					held = append(held, tok)
				}
				if err := c.Reload(Config{Rules: rules(3)}); err != nil {
					t.Fatal(err)
				}
				running := 4
				for _, want := range []bool{false, false} { // 4 then 3 running: at or over 3
					if _, ok := try(); ok != want {
						t.Fatalf("%d running under a new limit of 3: admitted %v", running, ok)
					}
					held[0].Done(Success)
					held = held[1:]
					running--
				}
				tok, ok := try() // 2 running
				if !ok {
					t.Fatal("2 running under a limit of 3: rejected")
				}
				held = append(held, tok)
				if _, ok := try(); ok {
					t.Fatal("3 running under a limit of 3: admitted")
				}
				if err := c.Reload(Config{Rules: rules(5)}); err != nil {
					t.Fatal(err)
				}
				for range 2 {
					tok, ok := try()
					if !ok {
						t.Fatal("raised to 5: rejected below it")
					}
					held = append(held, tok)
				}
				if _, ok := try(); ok {
					t.Fatal("5 running under a limit of 5: admitted")
				}
				if sharded() != (m > 1) {
					t.Fatalf("scale %d: sharded %v after the resizes", m, sharded())
				}
				for _, tok := range held {
					tok.Done(Success)
				}
				if s := c.Stats(); s.Inflight != 0 {
					t.Fatalf("inflight %d after every token is done", s.Inflight)
				}
			})
		})
	}
}

// TestRejectionHeadersAgreeWithRetryAfter: on a token-bucket rejection the
// RateLimit t, X-RateLimit-Reset and Retry-After name one instant: when
// the client is served again (the draft: Retry-After must not end before
// t), not t = the time to a full bucket.
func TestRejectionHeadersAgreeWithRetryAfter(t *testing.T) {
	_, h, clk := newTest(t, []Rule{{Name: "burst", Identity: IP, Algorithm: TokenBucket, Limit: 2, Rate: ratelimit.Per(1, time.Minute)}})
	for range 2 {
		if w := send(h, "192.0.2.1"); w.Code != http.StatusOK {
			t.Fatalf("burst: %d", w.Code)
		}
	}
	clk.add(20 * time.Second)
	w := send(h, "192.0.2.1")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("third: %d", w.Code)
	}
	if got := w.Header().Get("Retry-After"); got != "40" {
		t.Fatalf("Retry-After %q, want 40", got)
	}
	if got := w.Header().Get("RateLimit"); got != `"burst";r=0;t=40` {
		t.Fatalf("RateLimit %q, want t=40 (the Retry-After)", got)
	}
	reset, err := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The fake clock is 20 s ahead of the wall clock the Controller was
	// anchored to: the decision's wall time is now + 20 s.
	if wait := time.Until(time.Unix(reset, 0)) - 20*time.Second; wait < 38*time.Second || wait > 41*time.Second {
		t.Fatalf("X-RateLimit-Reset is %v after the decision, want the Retry-After's 40 s", wait)
	}
}

// skewedStore decides on a clock of its own, offset from the caller's: a
// network store decides on the server's clock (Redis: TIME).
type skewedStore struct {
	store.Store
	offset int64
}

func (s skewedStore) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	r := *req
	r.Now += s.offset
	return s.Store.Decide(ctx, &r, res)
}

// TestEarlyWarningOnStoreClock: how far into its window a key is comes
// from the store's decision (its ResetAfter on the store's clock), not from
// this process's clock, which a network store does not share.
func TestEarlyWarningOnStoreClock(t *testing.T) {
	window := int64(time.Hour)
	for _, tc := range []struct {
		name          string
		local, remote int64 // the instants, into the window
		want          bool
	}{
		{"early on the store, late here", 50 * int64(time.Minute), 2 * int64(time.Minute), true},
		{"late on the store, early here", 1 * int64(time.Minute), 40 * int64(time.Minute), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []EarlyWarning
			c, err := New([]Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 10, Window: time.Hour}},
				quiet(), WithStore(skewedStore{store.NewMemory(), tc.remote - tc.local}),
				WithEarlyWarning(func(w EarlyWarning) { got = append(got, w) }))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			now := 1000*window + tc.local
			for range 6 {
				decideAt(t, c, Attempt{IP: ipA, Now: now})
			}
			if (len(got) == 1) != tc.want {
				t.Fatalf("warnings %+v, want one: %v", got, tc.want)
			}
			if tc.want && got[0].Elapsed != time.Duration(tc.remote) {
				t.Fatalf("elapsed %v, want the store's %v", got[0].Elapsed, time.Duration(tc.remote))
			}
		})
	}
}

// decideAt decides a and does its token at a.Now.
func decideAt(t *testing.T, c *Controller, a Attempt) Decision {
	t.Helper()
	d, tok, err := c.Decide(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	tok.DoneAt(a.Now, Success)
	return d
}

// TestAdaptiveRuleReportsWaiting: the requests waiting for an Adaptive
// rule's permit show in RuleStats.Waiting, as a Concurrency rule's do.
func TestAdaptiveRuleReportsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New([]Rule{{Name: "adaptive", Algorithm: Adaptive, Limiter: aimdLimiter(t, 1, 10), MaxWait: time.Second}}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, held, err := c.Decide(context.Background(), Attempt{})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, tok, _ := c.Decide(context.Background(), Attempt{})
			tok.Done(Success)
		}()
		synctest.Wait()
		if w := c.Stats().Rules[0].Waiting; w != 1 {
			t.Fatalf("Waiting %d, want 1", w)
		}
		held.Done(Success)
		synctest.Wait()
		if w := c.Stats().Rules[0].Waiting; w != 0 {
			t.Fatalf("Waiting %d after the permit came back, want 0", w)
		}
	})
}

// TestDayWindowResetsAtMidnightUTC: "100 a day, reset at midnight UTC" on
// the embedded store: a day window's boundary is midnight UTC, whatever
// time the process started, and X-RateLimit-Reset names that instant.
func TestDayWindowResetsAtMidnightUTC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // the bubble's clock starts at 2000-01-01 00:00 UTC
		time.Sleep(7*time.Hour + 13*time.Minute) // the process starts mid-morning
		c, err := New([]Rule{{Name: "daily", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: 24 * time.Hour}}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h := c.Middleware(http.HandlerFunc(ok))
		time.Sleep(16*time.Hour + 46*time.Minute) // 23:59 UTC
		if w := send(h, "192.0.2.1"); w.Code != http.StatusOK {
			t.Fatalf("first of the day: %d", w.Code)
		}
		w := send(h, "192.0.2.1")
		midnight := time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "60" ||
			w.Header().Get("X-RateLimit-Reset") != strconv.FormatInt(midnight.Unix(), 10) {
			t.Fatalf("second at 23:59: %d, Retry-After %q, X-RateLimit-Reset %q; want 429, 60 and %d",
				w.Code, w.Header().Get("Retry-After"), w.Header().Get("X-RateLimit-Reset"), midnight.Unix())
		}
		time.Sleep(time.Minute) // 00:00 UTC
		if w := send(h, "192.0.2.1"); w.Code != http.StatusOK {
			t.Fatalf("first of the next day: %d", w.Code)
		}
	})
}

// TestFullKeyTableIsTheServersFault: once a per-key rule's table is full of
// live keys, a newcomer that exceeded nothing is not told it is over its
// limit: 503 with a short Retry-After (OverflowReject), no penalty strike,
// counted apart; with OverflowShare it is counted on the shared state,
// with OverflowPrefix on its network prefix's limit.
func TestFullKeyTableIsTheServersFault(t *testing.T) {
	for _, overflow := range []concurrency.Overflow{concurrency.OverflowReject, concurrency.OverflowShare, OverflowPrefix} {
		t.Run(fmt.Sprint("overflow=", int(overflow)), func(t *testing.T) {
			pen := &fakePenalties{strikes: map[string]int{}}
			c, h, _ := newTest(t, []Rule{{Name: "login-ip", Identity: IP, Algorithm: SlidingLog, Limit: 5, Window: time.Hour,
				Capacity: 16, Overflow: overflow}}, WithPenalties(pen, IP))
			// A flood of one-request clients fills the table with live keys.
			for i := range 64 {
				send(h, fmt.Sprintf("198.51.100.%d", i))
			}
			for try := range 4 {
				w := send(h, "203.0.113.9")
				switch overflow {
				case concurrency.OverflowReject:
					if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
						t.Fatalf("newcomer try %d on a full table: %d, Retry-After %q; want 503 and 1", try, w.Code, w.Header().Get("Retry-After"))
					}
				case concurrency.OverflowShare, OverflowPrefix:
					if w.Code == http.StatusTooManyRequests {
						t.Fatalf("newcomer try %d on a full table: 429, over a limit it never passed", try)
					}
				}
			}
			s := c.Stats()
			if s.Strikes != 0 || len(pen.strikes) != 0 {
				t.Fatalf("%d strikes for the server's full table", s.Strikes)
			}
			if s.Rules[0].Overflowed == 0 {
				t.Fatalf("overflowed decisions not counted: %+v", s.Rules[0])
			}
		})
	}
}

// keyRecorder is a store that records the keys it is asked about.
type keyRecorder struct {
	store.Store
	keys []string
}

func (s *keyRecorder) Decide(ctx context.Context, req *store.Request, res *store.Result) error {
	for _, h := range req.Hits[:req.N] {
		s.keys = append(s.keys, strings.Clone(h.Key))
	}
	return s.Store.Decide(ctx, req, res)
}

// TestHugeIdentityKeysAreBounded: a user or tenant id of any length reaches
// the store as a key of bounded length (long ones hashed), and two long
// ids that differ only at their end stay two keys.
func TestHugeIdentityKeysAreBounded(t *testing.T) {
	rec := &keyRecorder{Store: store.NewMemory()}
	c, _, _ := newTest(t, []Rule{
		{Name: "user", Identity: User, Algorithm: FixedWindow, Limit: 1, Window: time.Hour},
		{Name: "tenant", Identity: Tenant, Algorithm: FixedWindow, Limit: 1, Window: time.Hour},
	}, WithStore(rec))
	long := strings.Repeat("x", 1<<20)
	for _, tail := range []string{"a", "b"} {
		if d := decide(t, c, Attempt{User: long + tail, Tenant: long + tail}); !d.Allowed {
			t.Fatalf("long id %q: %+v (another long id's key?)", tail, d)
		}
	}
	if d := decide(t, c, Attempt{User: long + "a"}); d.Allowed {
		t.Fatalf("the same long user again: admitted past its limit of 1")
	}
	for _, k := range rec.keys {
		if len(k) > MaxIdentityKey {
			t.Fatalf("a store key of %d bytes, more than MaxIdentityKey (%d)", len(k), MaxIdentityKey)
		}
	}
	// Short ids are kept as given.
	if d := decide(t, c, Attempt{User: "alice"}); !d.Allowed || rec.keys[len(rec.keys)-1] != "user:alice" {
		t.Fatalf("short id: %+v, key %q", d, rec.keys[len(rec.keys)-1])
	}
}

// TestUnparseablePeerIsCounted: a request whose peer address the resolver
// cannot parse is counted (Stats.UnknownPeers) and logged, and per-IP rules
// key it on the explicit shared key "ip:unknown".
func TestUnparseablePeerIsCounted(t *testing.T) {
	rec := &keyRecorder{Store: store.NewMemory()}
	logs := &countHandler{}
	c, h, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 100, Window: time.Hour}},
		WithStore(rec), WithLogger(slog.New(logs)))
	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "@" // a unix socket peer
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	if s := c.Stats(); s.UnknownPeers != 3 {
		t.Fatalf("UnknownPeers %d, want 3", s.UnknownPeers)
	}
	if logs.n.Load() != 1 {
		t.Fatalf("%d log lines, want 1 (once per second)", logs.n.Load())
	}
	if rec.keys[0] != "ip:unknown" {
		t.Fatalf("key %q, want ip:unknown", rec.keys[0])
	}
}

// TestMiddlewareReadsThePeerOnlyWhenSomethingKeysOnIt: a middleware whose
// rules and options never read the client's address (Global rules that
// never wait, no exemption, no option that reads the client) does not
// parse it: a peer it could not parse is neither counted nor logged, and
// its request is decided as any other. Once a reload brings a per-IP rule,
// the same middleware reads it again.
func TestMiddlewareReadsThePeerOnlyWhenSomethingKeysOnIt(t *testing.T) {
	logs := &countHandler{}
	global := Rule{Name: "cap", Algorithm: TokenBucket, Limit: 100, Rate: ratelimit.Per(1, time.Second)}
	c, h, _ := newTest(t, []Rule{global}, WithLogger(slog.New(logs)))
	serve := func() int {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "@" // a unix socket peer
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for range 3 {
		if code := serve(); code != http.StatusOK {
			t.Fatalf("status %d under a Global cap of 100", code)
		}
	}
	if s := c.Stats(); s.UnknownPeers != 0 || s.Rules[0].Allowed != 3 || logs.n.Load() != 0 {
		t.Fatalf("Global rules alone: UnknownPeers %d, Allowed %d, %d log lines; want 0, 3, 0", s.UnknownPeers, s.Rules[0].Allowed, logs.n.Load())
	}
	if err := c.Reload(Config{Rules: []Rule{global, {Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 100, Window: time.Hour}}}); err != nil {
		t.Fatal(err)
	}
	serve()
	if s := c.Stats(); s.UnknownPeers != 1 || logs.n.Load() != 1 {
		t.Fatalf("with a per-IP rule: UnknownPeers %d, %d log lines; want 1, 1", s.UnknownPeers, logs.n.Load())
	}
}

// TestOverrideOfLongIdentityMatches: an override names a long user or
// tenant id as requests carry it, and reaches the hashed key they build.
func TestOverrideOfLongIdentityMatches(t *testing.T) {
	c, _, _ := newTest(t, []Rule{{Name: "tenant", Identity: Tenant, Algorithm: FixedWindow, Limit: 1, Window: time.Hour}})
	long := strings.Repeat("t", 200)
	if err := c.SetOverrides([]Override{{Rule: "tenant", Key: long, Factor: 3, Until: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if d := decide(t, c, Attempt{Tenant: long}); !d.Allowed {
			t.Fatalf("request %d of a tenant allowed 3: %+v", i, d)
		}
	}
	if d := decide(t, c, Attempt{Tenant: long}); d.Allowed {
		t.Fatal("fourth admitted past the override's 3")
	}
}

// TestMonthlyQuotaResetsOnTheFirst: "100 a month" resets on the first of
// each calendar month (UTC-05:00 here), for a per-key rule on the store
// and for a Global rule in this process alike.
func TestMonthlyQuotaResetsOnTheFirst(t *testing.T) {
	est := store.Calendar{Months: 1, Offset: -5 * time.Hour}
	c, err := New([]Rule{
		{Name: "tenant-monthly", Identity: Tenant, Algorithm: FixedWindow, Limit: 2, Calendar: est},
		{Name: "global-monthly", Algorithm: SlidingWindow, Limit: 1000, Calendar: est},
	}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	at := func(s string) int64 {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixNano()
	}
	for _, s := range []string{"2027-01-31T06:00:00Z", "2027-02-01T04:00:00Z"} { // both still January in UTC-05:00
		if d := decideAt(t, c, Attempt{Tenant: "acme", Now: at(s)}); !d.Allowed {
			t.Fatalf("%s: %+v", s, d)
		}
	}
	d := decideAt(t, c, Attempt{Tenant: "acme", Now: at("2027-02-01T04:30:00Z")})
	if d.Allowed || d.Rule != "tenant-monthly" || d.RetryAfter != 30*time.Minute {
		t.Fatalf("third in January (UTC-05:00): %+v, want a rejection for 30 min, until 05:00 UTC", d)
	}
	if d := decideAt(t, c, Attempt{Tenant: "acme", Now: at("2027-02-01T05:00:00Z")}); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("first of February (UTC-05:00): %+v", d)
	}
	if s := c.Stats(); s.Rules[1].Allowed != 3 {
		t.Fatalf("global monthly rule: %+v", s.Rules[1])
	}
}

// TestCostFuncChargesEveryRule: WithCost makes the middleware charge what a
// request costs (pages of a bulk export here) on every rule it meets, and a
// cost above a rule's limit is refused at once as never admissible.
func TestCostFuncChargesEveryRule(t *testing.T) {
	c, h, _ := newTest(t, []Rule{{Name: "pages", Identity: IP, Algorithm: FixedWindow, Limit: 10, Window: time.Hour}},
		WithCost(func(r *http.Request) int64 {
			n, _ := strconv.ParseInt(r.URL.Query().Get("pages"), 10, 64)
			return n
		}))
	pages := func(n string) func(*http.Request) {
		return func(r *http.Request) { r.URL.RawQuery = "pages=" + n }
	}
	if w := send(h, "192.0.2.1", pages("7")); w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Remaining") != "3" {
		t.Fatalf("7 pages: %d, remaining %q", w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	if w := send(h, "192.0.2.1", pages("4")); w.Code != http.StatusTooManyRequests {
		t.Fatalf("4 more pages with 3 left: %d", w.Code)
	}
	w := send(h, "192.0.2.2", pages("11"))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "" {
		t.Fatalf("11 pages against a limit of 10: %d, Retry-After %q (never admissible: no Retry-After)", w.Code, w.Header().Get("Retry-After"))
	}
	if w := send(h, "192.0.2.3", pages("-1")); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("a negative cost: %d, want no decision (503)", w.Code)
	}
	if s := c.Stats(); s.Rules[0].Allowed != 1 {
		t.Fatalf("%+v", s.Rules[0])
	}
}

// TestReloadKeepsUsageOfAChangedLimit: raising a tenant's daily quota from
// 3 to 4 by Reload leaves a tenant that used 3 exactly one more; lowering
// it below the usage admits nothing; a per-key concurrency limit lowered
// while permits are held admits nothing new until they drain.
func TestReloadKeepsUsageOfAChangedLimit(t *testing.T) {
	daily := func(limit int64) []Rule {
		return []Rule{
			{Name: "daily", Identity: Tenant, Algorithm: FixedWindow, Limit: limit, Window: 24 * time.Hour},
			{Name: "exports", Identity: User, Algorithm: Concurrency, Limit: limit, LeaseTTL: time.Minute},
		}
	}
	c, _, _ := newTest(t, daily(3))
	for range 3 {
		if d := decide(t, c, Attempt{Tenant: "acme"}); !d.Allowed {
			t.Fatalf("first 3: %+v", d)
		}
	}
	if err := c.Reload(Config{Rules: daily(4)}); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, c, Attempt{Tenant: "acme"}); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("raised to 4 after 3: %+v, want admitted with 0 left", d)
	}
	if d := decide(t, c, Attempt{Tenant: "acme"}); d.Allowed {
		t.Fatalf("raised to 4 after 4: admitted (usage was reset)")
	}
	if err := c.Reload(Config{Rules: daily(2)}); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, c, Attempt{Tenant: "acme"}); d.Allowed {
		t.Fatal("lowered to 2 after 4: admitted")
	}
	// Per-key concurrency: 2 held under a limit of 2 raised... then lowered to 1.
	var held []Token
	for range 2 {
		d, tok, err := c.Decide(context.Background(), Attempt{User: "u"})
		if err != nil || !d.Allowed {
			t.Fatalf("export: %+v %v", d, err)
		}
		held = append(held, tok)
	}
	if err := c.Reload(Config{Rules: daily(1)}); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, c, Attempt{User: "u"}); d.Allowed {
		t.Fatal("2 held under a new limit of 1: admitted")
	}
	held[0].Done(Success)
	if d := decide(t, c, Attempt{User: "u"}); d.Allowed {
		t.Fatal("1 held under a new limit of 1: admitted")
	}
	held[1].Done(Success)
	if d := decide(t, c, Attempt{User: "u"}); !d.Allowed {
		t.Fatalf("none held: %+v", d)
	}
}

// refusingUpdater is a store that cannot change a limit in place.
type refusingUpdater struct{ *store.Memory }

func (refusingUpdater) Update(context.Context, store.LimitID, store.Spec) error {
	return errors.New("store: cannot change this limit in place")
}

// TestReloadFallsBackToAFreshLimit: when the store cannot change a limit in
// place, Reload still puts the new limit in force, on a new store limit
// (its keys fresh), and the old one is retired.
func TestReloadFallsBackToAFreshLimit(t *testing.T) {
	m := store.NewMemory()
	rules := func(limit int64) []Rule {
		return []Rule{{Name: "daily", Identity: Tenant, Algorithm: FixedWindow, Limit: limit, Window: 24 * time.Hour}}
	}
	c, _, _ := newTest(t, rules(1), WithStore(refusingUpdater{m}))
	decide(t, c, Attempt{Tenant: "acme"})
	if err := c.Reload(Config{Rules: rules(2)}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if d := decide(t, c, Attempt{Tenant: "acme"}); !d.Allowed {
			t.Fatalf("decision %d on the fresh limit of 2: %+v", i, d)
		}
	}
	if err := c.Reload(Config{Rules: rules(3)}); err != nil { // retires the first limit
		t.Fatal(err)
	}
	if n := m.Limits(); n > 2 {
		t.Fatalf("%d limits in the store: the replaced ones are not retired", n)
	}
}

// TestReloadKeepsUsageOfGlobalRateRules: the Global rate rules, decided in
// this process, keep what they counted across a Reload that changes their
// limit (a window its count, a log its admissions, a bucket its debt).
func TestReloadKeepsUsageOfGlobalRateRules(t *testing.T) {
	rules := func(limit int64, rate ratelimit.Rate) []Rule {
		return []Rule{
			{Name: "daily", Category: "a", Algorithm: FixedWindow, Limit: limit, Window: 24 * time.Hour},
			{Name: "log", Category: "b", Algorithm: SlidingLog, Limit: limit, Window: time.Hour},
			{Name: "bucket", Category: "c", Algorithm: TokenBucket, Limit: limit, Rate: rate},
		}
	}
	perMin := ratelimit.Per(1, time.Minute)
	c, _, _ := newTest(t, rules(3, perMin))
	for _, cat := range []string{"a", "b", "c"} {
		for range 3 {
			if d := decide(t, c, Attempt{Category: cat}); !d.Allowed {
				t.Fatalf("%s: first 3: %+v", cat, d)
			}
		}
	}
	if err := c.Reload(Config{Rules: rules(4, perMin)}); err != nil {
		t.Fatal(err)
	}
	for _, cat := range []string{"a", "b", "c"} {
		if d := decide(t, c, Attempt{Category: cat}); !d.Allowed {
			t.Fatalf("%s raised to 4 after 3: %+v", cat, d)
		}
		if d := decide(t, c, Attempt{Category: cat}); d.Allowed {
			t.Fatalf("%s raised to 4 after 4: admitted (the usage was reset)", cat)
		}
	}
	// A slower refill: the 4 tokens owed stay owed, at the new rate.
	if err := c.Reload(Config{Rules: rules(4, ratelimit.Per(1, time.Hour))}); err != nil {
		t.Fatal(err)
	}
	for _, cat := range []string{"a", "b", "c"} {
		if d := decide(t, c, Attempt{Category: cat}); d.Allowed {
			t.Fatalf("%s after a reload that changed only the rate: admitted", cat)
		}
	}
	if s := c.Stats(); s.Rules[0].Allowed != 4 {
		t.Fatalf("the daily rule's counters did not carry on: %+v", s.Rules[0])
	}
}

// aimdLimiter returns an adaptive limiter on AIMD from initial, within
// [1, max].
func aimdLimiter(t *testing.T, initial, max int) *adaptive.Limiter {
	t.Helper()
	alg, err := adaptive.NewAIMD(adaptive.WithInitialLimit(initial), adaptive.WithLimits(1, max))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := adaptive.NewLimiter(alg)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// TestHugeCapacityIsAnError: a key capacity too large to allocate is an
// error from New naming the maximum, never a panic or a fatal
// out-of-memory.
func TestHugeCapacityIsAnError(t *testing.T) {
	for _, capacity := range []int{math.MaxInt, min(1<<40, math.MaxInt), concurrency.MaxTableCapacity + 1} {
		_, err := New([]Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 5, Window: time.Hour, Capacity: capacity}}, quiet())
		if err == nil || !strings.Contains(err.Error(), "capacity") {
			t.Errorf("Capacity %d: %v, want an error about the capacity", capacity, err)
		}
	}
}

// TestCostAboveAQueuedLimitFailsAtOnce: a cost above a Global Concurrency
// rule's limit is refused at once as never admissible, never queued.
func TestCostAboveAQueuedLimitFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New([]Rule{{Name: "inflight", Algorithm: Concurrency, Limit: 4, MaxWait: time.Minute}}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		d, _, err := c.Decide(context.Background(), Attempt{Cost: 5})
		if err != nil || d.Allowed || d.RetryAfter != ratelimit.Never {
			t.Fatalf("cost 5 of 4: %+v %v, want a rejection with Never", d, err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("cost 5 of 4 waited %v in the queue", waited)
		}
	})
}

// TestPardonEndsAPenalty: an operator pardons a client by the value the
// penalty identity sees (here an IPv6 address inside the client's /64),
// and its next request is decided by the rules again.
func TestPardonEndsAPenalty(t *testing.T) {
	box, err := penalty.NewBox(1024, penalty.WithStrikes(1, time.Hour), penalty.WithTimeouts(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c, h, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: time.Minute}},
		WithPenalties(box, IP))
	send(h, "[2001:db8::1]")
	if w := send(h, "[2001:db8::1]"); w.Code != http.StatusTooManyRequests { // over: a strike, a timeout
		t.Fatalf("second: %d", w.Code)
	}
	if d := decide(t, c, Attempt{IP: netip.MustParseAddr("2001:db8::")}); d.Kind != Penalized {
		t.Fatalf("in its timeout: %+v", d)
	}
	if ok, err := c.Pardon("2001:db8::abcd"); err != nil || !ok {
		t.Fatalf("Pardon: %v %v", ok, err)
	}
	if d := decide(t, c, Attempt{IP: netip.MustParseAddr("2001:db8::")}); d.Kind == Penalized {
		t.Fatalf("after the pardon: still penalized: %+v", d)
	}
	if _, err := c.Pardon("not an address"); err == nil {
		t.Fatal("Pardon of a non-address: no error")
	}
	plain, _, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: time.Minute}})
	if _, err := plain.Pardon("192.0.2.1"); err == nil {
		t.Fatal("Pardon without penalties: no error")
	}
}

// TestResetKeyGivesOneClientItsQuotaBack: an operator resets one tenant of
// one rule; the others keep their usage.
func TestResetKeyGivesOneClientItsQuotaBack(t *testing.T) {
	c, _, _ := newTest(t, []Rule{
		{Name: "daily", Identity: Tenant, Algorithm: FixedWindow, Limit: 1, Window: 24 * time.Hour},
		{Name: "inflight", Algorithm: Concurrency, Limit: 10},
	})
	for _, tenant := range []string{"acme", "globex"} {
		decide(t, c, Attempt{Tenant: tenant})
	}
	if err := c.ResetKey(context.Background(), "daily", "acme"); err != nil {
		t.Fatal(err)
	}
	if d := decide(t, c, Attempt{Tenant: "acme"}); !d.Allowed {
		t.Fatalf("acme after its reset: %+v", d)
	}
	if d := decide(t, c, Attempt{Tenant: "globex"}); d.Allowed {
		t.Fatal("globex got its quota back by acme's reset")
	}
	for _, tc := range []struct{ rule, v string }{{"nope", "acme"}, {"inflight", "acme"}} {
		if err := c.ResetKey(context.Background(), tc.rule, tc.v); err == nil || strings.Contains(err.Error(), tc.v) {
			t.Errorf("ResetKey(%q, %q): %v, want an error that does not name the key", tc.rule, tc.v, err)
		}
	}
}

// TestTrustedProxyWithoutHeaderIsCounted: a request from a trusted proxy
// that names no client is keyed on the proxy, counted and logged once.
func TestTrustedProxyWithoutHeaderIsCounted(t *testing.T) {
	res, err := fingerprint.NewResolver(fingerprint.WithTrustedProxies(netip.MustParsePrefix("10.0.0.0/8")))
	if err != nil {
		t.Fatal(err)
	}
	logs := &countHandler{}
	c, h, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 100, Window: time.Hour}},
		WithResolver(res), WithLogger(slog.New(logs)))
	for range 3 {
		send(h, "10.0.0.1")
	}
	send(h, "10.0.0.1", func(r *http.Request) { r.Header.Set("X-Forwarded-For", "198.51.100.7") })
	if s := c.Stats(); s.ProxyWithoutHeader != 3 {
		t.Fatalf("ProxyWithoutHeader %d, want 3", s.ProxyWithoutHeader)
	}
	if logs.n.Load() != 1 {
		t.Fatalf("%d log lines, want 1", logs.n.Load())
	}
}

// TestCGNATClientsGetARaisedLimit: behind one carrier-grade NAT address
// stand many users, so a per-IP rule lets it DefaultCGNATFactor times its
// limit (counted and logged), and a rule that defers to a stronger
// identity does not apply to such a client that has one.
func TestCGNATClientsGetARaisedLimit(t *testing.T) {
	c, h, _ := newTest(t, []Rule{
		{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 2, Window: time.Hour},
		{Name: "ip-defer", Category: "write", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: time.Hour, CGNATDefer: true},
	})
	admitted := 0
	for range 30 {
		if w := send(h, "100.64.1.2"); w.Code == http.StatusOK {
			admitted++
		}
	}
	if admitted != 2*DefaultCGNATFactor {
		t.Fatalf("a CGNAT address: %d admitted, want %d", admitted, 2*DefaultCGNATFactor)
	}
	admitted = 0
	for range 5 {
		if w := send(h, "192.0.2.1"); w.Code == http.StatusOK {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("a plain address: %d admitted, want 2", admitted)
	}
	// The deferring rule: a CGNAT client with a user id is limited by the
	// user's rules, not the shared address's.
	cg := netip.MustParseAddr("100.64.9.9")
	for i := range 3 {
		if d := decide(t, c, Attempt{Category: "write", IP: cg, CGNAT: true, User: "u"}); !d.Allowed {
			t.Fatalf("CGNAT with a user, request %d: %+v", i, d)
		}
	}
	if d := decide(t, c, Attempt{Category: "write", IP: netip.MustParseAddr("100.64.9.10"), CGNAT: true}); !d.Allowed {
		t.Fatalf("CGNAT without an identity: %+v", d)
	}
	if s := c.Stats(); s.CGNAT == 0 {
		t.Fatal("CGNAT decisions not counted")
	}
	if _, err := New([]Rule{{Name: "u", Identity: User, Algorithm: FixedWindow, Limit: 1, Window: time.Hour, CGNATFactor: 5}}, quiet()); err == nil {
		t.Fatal("a CGNAT factor on a user rule: no error")
	}
	if _, err := New([]Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: time.Hour, CGNATFactor: 0.5}}, quiet()); err == nil {
		t.Fatal("a CGNAT factor below 1: no error")
	}
}

// TestLoginCountsOnlyFailures: a login rule that counts only failed logins
// (401/403) lets the real user in after four wrong guesses, and the success
// costs nothing: the limit of five failures still holds after it.
func TestLoginCountsOnlyFailures(t *testing.T) {
	for _, global := range []bool{false, true} {
		t.Run(fmt.Sprint("global=", global), func(t *testing.T) {
			rule := Rule{Name: "login", Identity: User, Algorithm: SlidingLog, Limit: 5, Window: 15 * time.Minute,
				Count: CountAuthFailures}
			if global {
				rule.Identity = Global
			}
			c, _, _ := newTest(t, []Rule{rule}, WithClient(func(r *http.Request) Client { return Client{User: "alice"} }))
			h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("pw") != "right" {
					w.WriteHeader(http.StatusUnauthorized)
				}
			}))
			login := func(pw string) int {
				return send(h, "192.0.2.1", func(r *http.Request) { r.URL.RawQuery = "pw=" + pw }).Code
			}
			for i := range 4 {
				if code := login("wrong"); code != http.StatusUnauthorized {
					t.Fatalf("wrong guess %d: %d", i, code)
				}
			}
			if code := login("right"); code != http.StatusOK {
				t.Fatalf("the right password after four wrong ones: %d", code)
			}
			if code := login("right"); code != http.StatusOK {
				t.Fatalf("the right password again: %d (the success counted)", code)
			}
			if code := login("wrong"); code != http.StatusUnauthorized {
				t.Fatalf("the fifth failure: %d", code)
			}
			want := http.StatusTooManyRequests
			if global {
				want = http.StatusServiceUnavailable // a Global rule protects the server
			}
			if code := login("wrong"); code != want {
				t.Fatalf("a sixth guess after five failures: %d, want %d", code, want)
			}
			if s := c.Stats().Rules[0]; s.Refunded != 2 || s.RefundsLost != 0 {
				t.Fatalf("refunded %d, lost %d; want 2 and 0", s.Refunded, s.RefundsLost)
			}
		})
	}
}

// TestLateRecostGivesBackOnlyWhatItStillWeighs: a Global token bucket
// (a burst of 2 refilled 1 a second) charged 1 at 0 for work recosted to 0
// after an admission at 1 s gives back nothing, since the bucket refilled
// that token at 1 s: two admissions at 1 s, never three.
func TestLateRecostGivesBackOnlyWhatItStillWeighs(t *testing.T) {
	c, _, clk := newTest(t, []Rule{{Name: "cap", Identity: Global, Algorithm: TokenBucket, Limit: 2,
		Rate: ratelimit.Per(1, time.Second)}})
	try := func() (Decision, Token) {
		d, tok, err := c.Decide(context.Background(), Attempt{})
		if err != nil {
			t.Fatal(err)
		}
		return d, tok
	}
	_, slow := try()
	clk.add(time.Second)
	if d, _ := try(); !d.Allowed {
		t.Fatal("an admission a second later: rejected")
	}
	if err := slow.Recost(0); err != nil {
		t.Fatal(err)
	}
	slow.DoneStatus(http.StatusOK)
	if d, _ := try(); !d.Allowed {
		t.Fatal("a second admission at 1 s: rejected")
	}
	if d, _ := try(); d.Allowed {
		t.Fatal("a third admission at 1 s: the late recost gave back a token the bucket had refilled")
	}
}

// TestLateSuccessNeverFreesALaterFailure: under a sliding log that counts
// only failures, a success that ends long after it was admitted (the log
// has let it expire, and failures have filled the log since) gives back
// nothing: no failure's slot is freed, the limit of failures holds.
func TestLateSuccessNeverFreesALaterFailure(t *testing.T) {
	for _, global := range []bool{false, true} {
		t.Run(fmt.Sprint("global=", global), func(t *testing.T) {
			rule := Rule{Name: "login", Identity: User, Algorithm: SlidingLog, Limit: 2, Window: time.Minute,
				Count: CountAuthFailures}
			if global {
				rule.Identity = Global
			}
			c, _, clk := newTest(t, []Rule{rule})
			attempt := Attempt{User: "alice"}
			try := func() (Decision, Token) {
				d, tok, err := c.Decide(context.Background(), attempt)
				if err != nil {
					t.Fatal(err)
				}
				return d, tok
			}
			_, slow := try() // a login that succeeds, slowly
			clk.add(time.Minute + time.Second)
			for i := range 2 {
				d, tok := try()
				if !d.Allowed {
					t.Fatalf("failure %d of 2 in a fresh window: rejected", i+1)
				}
				tok.DoneStatus(http.StatusUnauthorized)
			}
			slow.DoneStatus(http.StatusOK)
			if d, _ := try(); d.Allowed {
				t.Fatal("a third failure in the window admitted: the late success freed a later failure's slot")
			}
		})
	}
}

// TestLateSuccessGivesBackOnlyWhatItStillWeighs: under a token bucket
// that counts only failures (a burst of 2 refilled 1 a second), a success
// admitted at 0 and done after a failure at 1 s gives back nothing, since
// the bucket refilled its token at 1 s: two failures at 1 s, never three.
func TestLateSuccessGivesBackOnlyWhatItStillWeighs(t *testing.T) {
	for _, global := range []bool{false, true} {
		t.Run(fmt.Sprint("global=", global), func(t *testing.T) {
			rule := Rule{Name: "login", Identity: User, Algorithm: TokenBucket, Limit: 2,
				Rate: ratelimit.Per(1, time.Second), Count: CountAuthFailures}
			if global {
				rule.Identity = Global
			}
			c, _, clk := newTest(t, []Rule{rule})
			try := func() (Decision, Token) {
				d, tok, err := c.Decide(context.Background(), Attempt{User: "alice"})
				if err != nil {
					t.Fatal(err)
				}
				return d, tok
			}
			_, slow := try() // a login that succeeds, slowly
			clk.add(time.Second)
			d, tok := try()
			if !d.Allowed {
				t.Fatal("a failure a second later: rejected")
			}
			tok.DoneStatus(http.StatusUnauthorized)
			slow.DoneStatus(http.StatusOK)
			if d, tok := try(); !d.Allowed {
				t.Fatal("a second failure at 1 s: rejected")
			} else {
				tok.DoneStatus(http.StatusUnauthorized)
			}
			if d, _ := try(); d.Allowed {
				t.Fatal("a third failure at 1 s admitted: the late success gave back a token the bucket had refilled")
			}
		})
	}
}

// TestLLMTokenBudget: a per-tenant daily token budget charged from what the
// upstream reported: the estimate is charged up front, the difference
// charged or given back after the work, and a budget spent by in-flight
// underestimates is overspent by at most those (counted), never more.
func TestLLMTokenBudget(t *testing.T) {
	c, _, _ := newTest(t, []Rule{{Name: "tokens", Identity: Tenant, Algorithm: FixedWindow, Limit: 1000, Window: 24 * time.Hour}},
		WithClient(func(r *http.Request) Client { return Client{Tenant: "acme"} }),
		WithCost(func(*http.Request) int64 { return 100 }), // the estimate
		WithActualCost(func(h http.Header) (int64, bool) {
			n, err := strconv.ParseInt(h.Get("X-Tokens-Used"), 10, 64)
			return n, err == nil
		}))
	used := "40"
	h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Tokens-Used", used)
	}))
	remaining := func() int64 {
		d, _, err := c.Decide(context.Background(), Attempt{Tenant: "acme", Cost: 0})
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining + 1 // the peek itself charged its default cost of 1
	}
	send(h, "192.0.2.1")
	if got := remaining(); got != 960-1+1 {
		t.Fatalf("after a call that used 40 of an estimated 100: remaining %d, want 959 (960 less the peek)", got)
	}
	used = "250"
	send(h, "192.0.2.1")
	if got := remaining(); got != 959-1-250+1 {
		t.Fatalf("after a call that used 250 of an estimated 100: remaining %d, want %d", got, 959-1-250+1)
	}
	// Spend the rest with calls that use twice their estimate: the last
	// ones in flight may overspend, counted; then nothing is admitted.
	used = "200"
	admitted := 0
	for range 20 {
		if w := send(h, "192.0.2.1"); w.Code == http.StatusOK {
			admitted++
		}
	}
	s := c.Stats().Rules[0]
	if admitted == 0 || s.Overspent == 0 {
		t.Fatalf("admitted %d, overspent %d: want the budget spent and the overspend counted", admitted, s.Overspent)
	}
	if w := send(h, "192.0.2.1"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("after the budget was spent: %d", w.Code)
	}
	var tok Token
	if err := tok.Recost(5); err == nil {
		t.Fatal("Recost of a zero Token: no error")
	}
}

// TestExemptionsAreExplicitAndCounted: health checks and internal callers
// named by path or CIDR pass unlimited, counted; nobody else does.
func TestExemptionsAreExplicitAndCounted(t *testing.T) {
	c, h, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: time.Hour}},
		WithExemptions(Exemptions{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, Paths: []string{"/healthz", "/internal/"}}))
	path := func(p string) func(*http.Request) { return func(r *http.Request) { r.URL.Path = p } }
	for i := range 3 {
		for _, p := range []string{"/healthz", "/HEALTHZ/", "//internal/jobs", "/internal"} {
			if w := send(h, "192.0.2.1", path(p)); w.Code != http.StatusOK {
				t.Fatalf("exempt path %q, request %d: %d", p, i, w.Code)
			}
		}
		if w := send(h, "10.1.2.3"); w.Code != http.StatusOK {
			t.Fatalf("exempt CIDR, request %d: %d", i, w.Code)
		}
	}
	send(h, "192.0.2.1", path("/api"))
	if w := send(h, "192.0.2.1", path("/api")); w.Code != http.StatusTooManyRequests {
		t.Fatalf("a path nobody exempted: %d", w.Code)
	}
	if w := send(h, "192.0.2.1", path("/healthzz")); w.Code != http.StatusTooManyRequests {
		t.Fatalf("a path that only starts like an exempt one: %d", w.Code)
	}
	if s := c.Stats(); s.Exempt != 15 {
		t.Fatalf("Exempt %d, want 15", s.Exempt)
	}
	for _, bad := range []Exemptions{{}, {Paths: []string{"healthz"}}, {CIDRs: []netip.Prefix{{}}}} {
		if _, err := New([]Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: time.Hour}}, WithExemptions(bad)); err == nil {
			t.Errorf("WithExemptions(%+v): no error", bad)
		}
	}
}

// TestSuspiciousClientsGetTightenedLimits: signals in, tighter limits out.
// A client without a User-Agent (weighted heavily here) is decided on a
// quarter of the burst; an ordinary client keeps the whole of it; the
// decisions say why, by reason code.
func TestSuspiciousClientsGetTightenedLimits(t *testing.T) {
	tracker, err := fingerprint.NewTracker(1024, fingerprint.WithWeights(fingerprint.Weights{NoAgent: 0.9}))
	if err != nil {
		t.Fatal(err)
	}
	scale, err := penalty.NewSuspicionScale(0.5, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	var last Decision
	c, h, _ := newTest(t, []Rule{{Name: "burst", Identity: IP, Algorithm: TokenBucket, Limit: 8, Rate: ratelimit.Per(1, time.Hour)}},
		WithSuspicion(Suspicion{Tracker: tracker, Scale: scale}), WithDecisionHook(func(d Decision) { last = d }))
	count := func(ip string, ua string) int {
		n := 0
		for range 12 {
			if w := send(h, ip, func(r *http.Request) { r.Header.Set("User-Agent", ua) }); w.Code == http.StatusOK {
				n++
			}
		}
		return n
	}
	if n := count("192.0.2.1", "Mozilla/5.0"); n != 8 {
		t.Fatalf("an ordinary client: %d admitted, want the whole burst of 8", n)
	}
	if n := count("192.0.2.2", ""); n != 2 {
		t.Fatalf("a client without a User-Agent: %d admitted, want a quarter of the burst, 2", n)
	}
	if !last.Tightened || last.Suspicion&fingerprint.ReasonNoAgent == 0 {
		t.Fatalf("the last decision: Tightened %v, reasons %v", last.Tightened, last.Suspicion)
	}
	if s := c.Stats(); s.Tightened != 12 {
		t.Fatalf("Tightened %d, want 12", s.Tightened)
	}
	if _, err := New([]Rule{{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 1, Window: time.Hour}},
		WithSuspicion(Suspicion{Tracker: tracker})); err == nil {
		t.Fatal("WithSuspicion without a Scale: no error")
	}
}

// goexitServer is c's middleware over a handler that calls runtime.Goexit
// for /exit and answers 200 otherwise.
func goexitServer(c *Controller) http.Handler {
	return c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/exit" {
			runtime.Goexit()
		}
		ok(w, r)
	}))
}

// goexits sends n requests to /exit of h, one after the other, each on a
// goroutine of its own that Goexit ends.
func goexits(h http.Handler, n int) {
	for range n {
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/exit", nil))
		}()
		<-done
	}
}
