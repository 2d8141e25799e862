package shed

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
	"pgregory.net/rapid"
)

// peekRules are one rule of each rate algorithm, Global and per key,
// each of limit 5 (a Global bucket of 5 stays one bucket: exact).
func peekRules() []Rule {
	var rules []Rule
	for _, id := range []Identity{Global, Tenant} {
		for _, alg := range []Algorithm{TokenBucket, FixedWindow, SlidingWindow, SlidingLog} {
			r := Rule{Name: id.String() + "-" + alg.String(), Identity: id, Algorithm: alg, Limit: 5}
			if alg == TokenBucket {
				r.Rate = ratelimit.Per(1, time.Hour)
			} else {
				r.Window = time.Hour
			}
			rules = append(rules, r)
		}
	}
	return rules
}

// TestPeekChargesNothing: after two admissions a peek reports Remaining
// limit-2 on every rate algorithm, Global and per key, and a hundred peeks
// leave the state as it was: three more units are admitted, the fourth
// is not. Peeks are not counted as decisions.
func TestPeekChargesNothing(t *testing.T) {
	for _, rule := range peekRules() {
		t.Run(rule.Name, func(t *testing.T) {
			peekChargesNothing(t, []Rule{rule}, quiet())
		})
	}
}

func peekChargesNothing(t *testing.T, rules []Rule, opts ...Option) {
	t.Helper()
	clk := newFakeClock()
	c, err := New(rules, append([]Option{WithClock(clk.now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	a := Attempt{Tenant: "acme"}
	for range 2 {
		if d, tok, err := c.Decide(ctx, a); err != nil || !d.Allowed {
			t.Fatalf("admission: %+v, %v", d, err)
		} else {
			tok.Done(Success)
		}
	}
	before := c.Stats()
	for i := range 100 {
		d, err := c.Peek(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed || d.Limit != 5 || d.Remaining != 3 || d.Rule == "" {
			t.Fatalf("peek %d: %+v, want allowed with 3 of 5 remaining", i, d)
		}
	}
	after := c.Stats()
	if after.Admitted != before.Admitted || after.OverLimit != before.OverLimit || after.Shedding != before.Shedding ||
		after.Peeks != before.Peeks+100 || after.Inflight != 0 {
		t.Fatalf("stats before %+v, after %+v: the peeks were counted as decisions", before, after)
	}
	if d, tok, err := c.Decide(ctx, Attempt{Tenant: "acme", Cost: 3}); err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("the 3 left after 100 peeks: %+v, %v", d, err)
	} else {
		tok.Done(Success)
	}
	if d, err := c.Peek(ctx, a); err != nil || d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 || d.Kind == Admitted {
		t.Fatalf("peek of a spent quota: %+v, %v", d, err)
	}
	if d, _, _ := c.Decide(ctx, a); d.Allowed {
		t.Fatalf("a fourth unit after 100 peeks: %+v", d)
	}
}

// TestPeekPredictsDecide: under any sequence of decisions, peeks and
// clock moves on the rules of every rate algorithm, Global and per key,
// the decisions are those of the same sequence without the peeks, and a
// peek's Allowed, Remaining and Rule are those the next decision of the
// same attempt at the same instant meets (Allowed: the decision admits;
// Remaining: what it had before its charge).
func TestPeekPredictsDecide(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// The Global fixed window is a ShardedWindow, whose Remaining is a
		// lower bound: with it, only the decisions are compared.
		sharded := rapid.Bool().Draw(t, "sharded")
		var rules []Rule
		for _, r := range peekRules() {
			if sharded || r.Name != "global-fixed_window" {
				rules = append(rules, r)
			}
		}
		rules = append(rules, Rule{Name: "conc", Algorithm: Concurrency, Limit: 3},
			Rule{Name: "user-conc", Identity: User, Algorithm: Concurrency, Limit: 2, LeaseTTL: time.Hour})
		clk := newFakeClock()
		with, err := New(rules, WithClock(clk.now), quiet())
		if err != nil {
			t.Fatal(err)
		}
		without, err := New(rules, WithClock(clk.now), quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer with.Close()
		defer without.Close()
		var held [2][]Token
		tenants := []string{"acme", "globex"}
		for range rapid.IntRange(1, 80).Draw(t, "steps") {
			a := Attempt{Tenant: tenants[rapid.IntRange(0, 1).Draw(t, "tenant")], User: "u",
				Cost: rapid.Int64Range(0, 6).Draw(t, "cost")}
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0, 1:
				p, err := with.Peek(context.Background(), a)
				if err != nil {
					t.Fatal(err)
				}
				d, tok, err := with.Decide(context.Background(), a)
				if err != nil {
					t.Fatal(err)
				}
				d2, tok2, err := without.Decide(context.Background(), a)
				if err != nil {
					t.Fatal(err)
				}
				// A ShardedWindow's Remaining, and so the deciding rule,
				// depends on the shard that decides: the goroutine's stack
				// block, which a stack that moved in between changes.
				if d.Allowed != d2.Allowed || !sharded && (d.Remaining != d2.Remaining || d.Rule != d2.Rule) {
					t.Fatalf("with peeks %+v, without %+v", d, d2)
				}
				if d.Allowed {
					held[0], held[1] = append(held[0], tok), append(held[1], tok2)
				}
				if sharded {
					break
				}
				if p.Allowed != d.Allowed || (p.Allowed && p.Rule == "") {
					t.Fatalf("peek %+v, then the decision %+v", p, d)
				}
				cost := max(a.Cost, 1)
				if d.Allowed && (p.Remaining-cost != d.Remaining || p.Rule != d.Rule) {
					t.Fatalf("peek %+v, then the admission of %d %+v", p, cost, d)
				}
				if !d.Allowed && (p.Rule != d.Rule || p.Kind != d.Kind || p.RetryAfter < d.RetryAfter) {
					t.Fatalf("peek %+v, then the rejection %+v (a peek's RetryAfter is never earlier)", p, d)
				}
			case 2:
				if len(held[0]) > 0 {
					held[0][0].Done(Success)
					held[1][0].Done(Success)
					held[0], held[1] = held[0][1:], held[1][1:]
				}
			case 3:
				clk.add(time.Duration(rapid.Int64Range(1, int64(20*time.Minute)).Draw(t, "dt")))
			case 4:
				for range rapid.IntRange(1, 5).Draw(t, "peeks") {
					if _, err := with.Peek(context.Background(), a); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		for i := range held[0] {
			held[0][i].Done(Success)
			held[1][i].Done(Success)
		}
	})
}

// TestPeekConcurrency: a Global Concurrency rule admits a peek while
// inflight + cost fits its limit, and reports Shedding when it does not;
// a peek takes no permit.
func TestPeekConcurrency(t *testing.T) {
	c, _, _ := newTest(t, []Rule{{Name: "conc", Algorithm: Concurrency, Limit: 2}})
	ctx := context.Background()
	_, tok, err := c.Decide(ctx, Attempt{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.Peek(ctx, Attempt{}); err != nil || !d.Allowed {
		t.Fatalf("one of two held: %+v, %v", d, err)
	}
	if d, err := c.Peek(ctx, Attempt{Cost: 2}); err != nil || d.Allowed || d.Kind != Shedding || d.Rule != "conc" || d.RetryAfter != shedHint {
		t.Fatalf("one of two held, cost 2: %+v, %v", d, err)
	}
	if d, err := c.Peek(ctx, Attempt{Cost: 3}); err != nil || d.Allowed || d.RetryAfter != ratelimit.Never {
		t.Fatalf("cost 3 of a limit of 2: %+v, %v", d, err)
	}
	if s := c.Stats(); s.Rules[0].Inflight != 1 || s.Inflight != 1 {
		t.Fatalf("peeks took permits: %+v", s.Rules[0])
	}
	tok.Done(Success)
}

// TestPeekPenalized: a penalized client's peek reports the penalty and the
// time left on it, and gives no strike: the box's strikes and timeouts
// are as they were.
func TestPeekPenalized(t *testing.T) {
	box, err := penalty.NewBox(1024, penalty.WithStrikes(2, time.Minute), penalty.WithTimeouts(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c, _, clk := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: 10 * time.Second}},
		WithPenalties(box, IP))
	ctx := context.Background()
	a := Attempt{IP: ipA}
	for range 3 {
		if d, tok, _ := c.Decide(ctx, a); d.Allowed {
			tok.Done(Success)
		}
	}
	// Over the limit but not yet penalized: a peek is no strike either.
	if d, err := c.Peek(ctx, Attempt{IP: ipB}); err != nil || !d.Allowed {
		t.Fatalf("another client: %+v, %v", d, err)
	}
	before := c.Stats()
	clk.add(10 * time.Second)
	for range 10 {
		d, err := c.Peek(ctx, a)
		if err != nil || d.Allowed || d.Kind != Penalized || d.RetryAfter != 20*time.Second {
			t.Fatalf("penalized: %+v, %v", d, err)
		}
	}
	after := c.Stats()
	if after.Strikes != before.Strikes || after.Penalty.Strikes != before.Penalty.Strikes ||
		after.Penalty.Timeouts != before.Penalty.Timeouts || after.Penalized != before.Penalized {
		t.Fatalf("peeks struck: before %+v, after %+v", before, after)
	}
	// An over-limit peek of an unpenalized client is no strike either.
	if _, tok, _ := c.Decide(ctx, Attempt{IP: ipB}); true {
		tok.Done(Success)
	}
	for range 5 {
		if d, _ := c.Peek(ctx, Attempt{IP: ipB}); d.Allowed || d.Kind != OverLimit {
			t.Fatalf("spent: %+v", d)
		}
	}
	if s := c.Stats(); s.Strikes != before.Strikes {
		t.Fatalf("over-limit peeks struck: %d strikes, %d before", s.Strikes, before.Strikes)
	}
}

// TestPeekRequest: PeekRequest builds the attempt as the middleware does
// (the client's tenant, the method's category, the cost func): after two
// requests of cost 2 on a tenant's quota of 10, it reports 6 remaining
// for a write and the headers say so; a read, which no rule limits, has
// no figures.
func TestPeekRequest(t *testing.T) {
	c, h, _ := newTest(t, []Rule{{Name: "writes", Category: "write", Identity: Tenant, Algorithm: FixedWindow, Limit: 10, Window: time.Hour}},
		WithClient(func(r *http.Request) Client { return Client{Tenant: r.Header.Get("X-Tenant")} }),
		WithCost(func(*http.Request) int64 { return 2 }))
	req := func(method string) *http.Request {
		r := httptest.NewRequest(method, "/", nil)
		r.RemoteAddr = "192.0.2.9:40000"
		r.Header.Set("X-Tenant", "acme")
		return r
	}
	for range 2 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req(http.MethodPost))
		if w.Code != 200 {
			t.Fatalf("write: %d", w.Code)
		}
	}
	for range 10 {
		d, err := c.PeekRequest(req(http.MethodPost))
		if err != nil || !d.Allowed || d.Remaining != 6 || d.Rule != "writes" {
			t.Fatalf("peek of a write: %+v, %v", d, err)
		}
		hdr := http.Header{}
		d.WriteHeaders(hdr)
		if got := hdr.Get("RateLimit"); !strings.Contains(got, `"writes";r=6`) {
			t.Fatalf("RateLimit from a peek: %q", got)
		}
	}
	if d, err := c.PeekRequest(req(http.MethodGet)); err != nil || !d.Allowed || d.Rule != "" || d.Limit != 0 {
		t.Fatalf("peek of a read: %+v, %v", d, err)
	}
	if s := c.Stats(); s.Admitted != 2 || s.Peeks != 11 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestPeekErrors: Peek refuses what Decide refuses, and says so for a
// store that fails.
func TestPeekErrors(t *testing.T) {
	c, _, _ := newTest(t, []Rule{{Name: "t", Identity: Tenant, Algorithm: FixedWindow, Limit: 10, Window: time.Hour}})
	for _, a := range []Attempt{{Cost: -1}, {Now: -1}, {Priority: CriticalPlus + 1}, {Weight: MaxWeight + 1}} {
		if _, err := c.Peek(context.Background(), a); err == nil || !strings.HasPrefix(err.Error(), "shed: ") {
			t.Errorf("Peek(%+v): %v", a, err)
		}
	}
	faulty := storetest.NewFaulty(store.NewMemory())
	f, _, _ := newTest(t, []Rule{{Name: "t", Identity: Tenant, Algorithm: FixedWindow, Limit: 10, Window: time.Hour}},
		WithStore(faulty))
	faulty.SetErr(store.Unavailable(errors.New("connection refused")))
	if _, err := f.Peek(context.Background(), Attempt{Tenant: "acme"}); err == nil || !strings.HasPrefix(err.Error(), "shed: Peek: ") {
		t.Fatalf("a failing store: %v", err)
	}
}

// TestPeekFullTable: a key that a rule's full table has no room for reads
// as a decision would meet it: shed under OverflowReject, on its
// network's prefix under OverflowPrefix (admitted while the prefix has
// room, without the prefix's figures; shed when it is spent), and the
// peek does what the next decision does.
func TestPeekFullTable(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		overflow concurrency.Overflow
		factor   float64
		ip       netip.Addr
		allowed  bool
	}{
		{"reject", concurrency.OverflowReject, 0, netip.AddrFrom4([4]byte{10, 8, 0, 1}), false},
		{"prefix room", OverflowPrefix, 0, netip.AddrFrom4([4]byte{10, 8, 0, 1}), true},
		{"prefix spent", OverflowPrefix, 0.001, netip.AddrFrom4([4]byte{10, 9, 0, 200}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 1000, Rate: ratelimit.Per(1, time.Hour),
				Capacity: 16, Overflow: tc.overflow, Prefix: Prefix{Factor: tc.factor}}})
			for i := range 64 { // the flood fills the table, then its prefix
				if d, tok, _ := c.Decide(ctx, Attempt{IP: netip.AddrFrom4([4]byte{10, 9, 0, byte(i)})}); d.Allowed {
					tok.Done(Success)
				}
			}
			p, err := c.Peek(ctx, Attempt{IP: tc.ip})
			if err != nil {
				t.Fatal(err)
			}
			if p.Allowed != tc.allowed || (!p.Allowed && (p.Kind != Shedding || p.Rule != "ip")) || (p.Allowed && p.Rule != "") {
				t.Fatalf("peek: %+v", p)
			}
			d, tok, err := c.Decide(ctx, Attempt{IP: tc.ip})
			if err != nil {
				t.Fatal(err)
			}
			tok.Done(Success)
			if d.Allowed != p.Allowed || d.Kind != p.Kind || d.Rule != p.Rule {
				t.Fatalf("peek %+v, then the decision %+v", p, d)
			}
		})
	}
}

// TestPeekRequestRecordsNothing: PeekRequest reads a suspicious request's
// tightened limits from the score it would get (here: no User-Agent), but
// records nothing (a client only peeking is never tracked), and counts no
// unknown peer.
func TestPeekRequestRecordsNothing(t *testing.T) {
	s := noAgentSuspicion(t)
	c, h, _ := newTest(t, []Rule{{Name: "burst", Identity: IP, Algorithm: TokenBucket, Limit: 8, Rate: ratelimit.Per(1, time.Hour)}},
		WithSuspicion(s))
	noAgent := func(r *http.Request) { r.Header.Del("User-Agent") }
	if w := send(h, "192.0.2.2", noAgent); w.Code != http.StatusOK {
		t.Fatalf("first request: %d", w.Code)
	}
	entries := s.Tracker.Stats().Entries
	peek := func(ip string) Decision {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = ip
		r.Header.Del("User-Agent")
		d, err := c.PeekRequest(r)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for range 5 {
		if d := peek("192.0.2.2:4000"); !d.Tightened || d.Limit != 2 || d.Remaining != 1 || !d.Allowed {
			t.Fatalf("the suspicious client: %+v, want its tightened burst of 2, 1 left", d)
		}
		if d := peek("192.0.2.3:4000"); !d.Tightened || d.Limit != 2 || d.Remaining != 2 {
			t.Fatalf("a client that only peeks: %+v, want tightened and untouched", d)
		}
		_ = peek("@") // a unix socket's peer
	}
	st := c.Stats()
	if got := s.Tracker.Stats().Entries; got != entries {
		t.Fatalf("peeks recorded signals: %d tracked clients, %d before", got, entries)
	}
	if st.UnknownPeers != 0 || st.Tightened != 1 || st.Peeks != 15 {
		t.Fatalf("stats after peeks: %+v", st)
	}
}

// TestPeekDryRunAndOverrides: a dry-run rule that would reject marks the
// peek as Decide marks the decision, without counting a would-be
// rejection; an overridden key is read on its override's limit.
func TestPeekDryRunAndOverrides(t *testing.T) {
	c, _, clk := newTest(t, []Rule{
		{Name: "dry", Identity: User, Algorithm: FixedWindow, Limit: 1, Window: time.Hour, DryRun: true},
		{Name: "tenant", Identity: Tenant, Algorithm: FixedWindow, Limit: 10, Window: time.Hour},
	})
	ctx := context.Background()
	a := Attempt{User: "ann", Tenant: "acme"}
	if _, tok, err := c.Decide(ctx, a); err != nil {
		t.Fatal(err)
	} else {
		tok.Done(Success)
	}
	before := c.Stats()
	p, err := c.Peek(ctx, a)
	if err != nil || !p.Allowed || !p.DryRun || p.DryRunRule != "dry" || p.DryRunKind != OverLimit || p.Rule != "dry" || p.Remaining != 0 {
		t.Fatalf("peek past a dry-run rule: %+v, %v", p, err)
	}
	if s := c.Stats(); s.DryRun != before.DryRun || s.Rules[0].WouldReject != before.Rules[0].WouldReject {
		t.Fatalf("the peek counted a would-be rejection: %+v", s)
	}
	if d, tok, _ := c.Decide(ctx, a); !d.DryRun || d.DryRunRule != p.DryRunRule {
		t.Fatalf("peek %+v, then the decision %+v", p, d)
	} else {
		tok.Done(Success)
	}
	wall := time.Unix(0, c.wallAnchor+(clk.now()-c.monoAnchor))
	if err := c.SetOverrides([]Override{{Rule: "tenant", Key: "acme", Factor: 3, Until: wall.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if p, err := c.Peek(ctx, Attempt{Tenant: "acme"}); err != nil || p.Rule != "tenant" || p.Limit != 30 {
		t.Fatalf("an overridden key: %+v, %v, want its limit of 30", p, err)
	}
}
