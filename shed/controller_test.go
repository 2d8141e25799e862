package shed

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

var ipA, ipB = netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")

func decide(t *testing.T, c *Controller, a Attempt) Decision {
	t.Helper()
	d, tok, err := c.Decide(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	tok.Done(Success)
	return d
}

// TestLoginSeed: 20 per 15 minutes per IP AND 5 per 15 minutes per
// account, all or nothing: a request the account rule rejects does not
// count against the IP.
func TestLoginSeed(t *testing.T) {
	c, _, _ := newTest(t, []Rule{
		{Name: "login-ip", Category: "auth", Identity: IP, Algorithm: SlidingLog, Limit: 20, Window: 15 * time.Minute, Failure: FailClosed},
		{Name: "login-user", Category: "auth", Identity: User, Algorithm: SlidingLog, Limit: 5, Window: 15 * time.Minute, Failure: FailClosed},
	})
	login := func(user string) Decision { return decide(t, c, Attempt{Category: "auth", IP: ipA, User: user}) }
	for i := range 5 {
		if d := login("alice"); !d.Allowed {
			t.Fatalf("alice %d: %+v", i, d)
		}
	}
	if d := login("alice"); d.Allowed || d.Rule != "login-user" || d.Kind != OverLimit {
		t.Fatalf("alice 6: %+v", d)
	}
	// The IP has 5 charged, not 6: 15 more logins of other users pass.
	for i := range 15 {
		if d := login(string(rune('a'+i/5)) + "-user"); !d.Allowed {
			t.Fatalf("other user %d: %+v", i, d)
		}
	}
	if d := login("zed"); d.Allowed || d.Rule != "login-ip" {
		t.Fatalf("21st from the IP: %+v", d)
	}
	// Another category is not limited by these rules.
	if d := decide(t, c, Attempt{Category: "read", IP: ipA, User: "alice"}); !d.Allowed || d.Rule != "" {
		t.Fatalf("read: %+v", d)
	}
}

// TestReportSeed: 5/min burst 10 per tenant AND 100/day per tenant AND
// 30/h per IP.
func TestReportSeed(t *testing.T) {
	c, _, clk := newTest(t, []Rule{
		{Name: "report-burst", Category: "report", Identity: Tenant, Algorithm: TokenBucket, Limit: 10, Rate: ratelimit.Per(5, time.Minute)},
		{Name: "report-daily", Category: "report", Identity: Tenant, Algorithm: FixedWindow, Limit: 100, Window: 24 * time.Hour},
		{Name: "report-ip", Category: "report", Identity: IP, Algorithm: SlidingWindow, Limit: 30, Window: time.Hour},
	})
	report := func(tenant string, ip netip.Addr) Decision {
		return decide(t, c, Attempt{Category: "report", IP: ip, Tenant: tenant})
	}
	for i := range 10 {
		if d := report("acme", ipA); !d.Allowed {
			t.Fatalf("burst %d: %+v", i, d)
		}
	}
	if d := report("acme", ipA); d.Allowed || d.Rule != "report-burst" || d.RetryAfter != 12*time.Second {
		t.Fatalf("11th: %+v", d)
	}
	clk.add(time.Minute)
	for i := range 5 {
		if d := report("acme", ipA); !d.Allowed {
			t.Fatalf("refilled %d: %+v", i, d)
		}
	}
	// 15 from ipA so far; 15 more from other tenants fill its hour.
	for i := range 15 {
		if d := report(string(rune('a'+i)), ipA); !d.Allowed {
			t.Fatalf("ip %d: %+v", i, d)
		}
	}
	if d := report("zz", ipA); d.Allowed || d.Rule != "report-ip" {
		t.Fatalf("31st from the IP: %+v", d)
	}
	// The daily quota: a tenant spreading over addresses and time.
	n := 0
	for i := 0; n < 100 && i < 200; i++ {
		clk.add(12 * time.Second)
		ip := netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(i % 250)})
		if d := report("globex", ip); d.Allowed {
			n++
		}
	}
	clk.add(time.Minute)
	if d := report("globex", ipB); n != 100 || d.Allowed || d.Rule != "report-daily" {
		t.Fatalf("after %d admitted: %+v", n, d)
	}
}

// TestGlobalGivenBack: a global cap charged before a store rule rejects
// is refunded, and a concurrency permit returned.
func TestGlobalGivenBack(t *testing.T) {
	c, _, _ := newTest(t, []Rule{
		{Name: "cap", Algorithm: TokenBucket, Limit: 3, Rate: ratelimit.Per(1, time.Hour)},
		{Name: "conc", Algorithm: Concurrency, Limit: 1},
		{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Hour},
	})
	if d := decide(t, c, Attempt{IP: ipA}); !d.Allowed {
		t.Fatal(d)
	}
	for range 10 { // rejected by "ip": "cap" and "conc" get their units back
		if d := decide(t, c, Attempt{IP: ipA}); d.Allowed || d.Rule != "ip" {
			t.Fatalf("%+v", d)
		}
	}
	for _, ip := range []netip.Addr{ipB, netip.MustParseAddr("192.0.2.3")} {
		if d := decide(t, c, Attempt{IP: ip}); !d.Allowed {
			t.Fatalf("%v: %+v", ip, d)
		}
	}
	if d := decide(t, c, Attempt{IP: netip.MustParseAddr("192.0.2.4")}); d.Allowed || d.Rule != "cap" || d.Kind != Shedding {
		t.Fatalf("cap: %+v", d)
	}
	if s := c.Stats(); s.Inflight != 0 || s.Rules[1].Inflight != 0 {
		t.Fatalf("%+v", s)
	}
}

// TestDryRun: dry-run never rejects and counts exactly the attempts that
// enforcement rejects, for the same traffic.
func TestDryRun(t *testing.T) {
	rules := []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 3, Window: time.Minute}}
	run := func(opts ...Option) (rejected int, c *Controller) {
		c, h, clk := newTest(t, rules, opts...)
		for i := range 60 {
			ip := []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}[i%3]
			if i%7 == 0 {
				ip = "192.0.2.1"
			}
			if w := send(h, ip); w.Code != http.StatusOK {
				rejected++
			}
			clk.add(time.Duration(i%5) * time.Second)
		}
		return rejected, c
	}
	enforced, _ := run()
	if enforced == 0 {
		t.Fatal("the traffic must hit the limit")
	}
	var hooked int
	var mu sync.Mutex
	dry, c := run(WithDryRun(), WithDecisionHook(func(d Decision) {
		if d.DryRun {
			mu.Lock()
			hooked++
			mu.Unlock()
		}
	}))
	s := c.Stats()
	if dry != 0 || int(s.DryRun) != enforced || int(s.Rules[0].WouldReject) != enforced || hooked != enforced || s.OverLimit != 0 {
		t.Fatalf("dry-run rejected %d, counted %d/%d/%d; enforcement rejected %d", dry, s.DryRun, s.Rules[0].WouldReject, hooked, enforced)
	}
	// Per rule: the dry rule is left out, the enforced one still decides.
	c2, _, _ := newTest(t, []Rule{
		{Name: "dry", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Hour, DryRun: true},
		{Name: "real", Identity: IP, Algorithm: SlidingLog, Limit: 3, Window: time.Hour},
	})
	var kinds []bool
	for range 4 {
		d := decide(t, c2, Attempt{IP: ipA})
		kinds = append(kinds, d.Allowed)
		if d.Allowed && len(kinds) > 1 && (!d.DryRun || d.DryRunRule != "dry") {
			t.Fatalf("%+v", d)
		}
	}
	if kinds[3] || !kinds[2] {
		t.Fatalf("allowed %v", kinds)
	}
	if s := c2.Stats(); s.Rules[0].WouldReject != 3 || s.Rules[1].Rejected != 1 {
		t.Fatalf("%+v", s.Rules)
	}
}

// TestFailureModes: when the store fails, fail-open rules admit (counted)
// and fail-closed rules reject with 503.
func TestFailureModes(t *testing.T) {
	faulty := storetest.NewFaulty(store.NewMemory())
	logs := &countHandler{}
	c, h, _ := newTest(t, []Rule{
		{Name: "reads", Category: "read", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Hour},
		{Name: "writes", Category: "write", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Hour, Failure: FailClosed},
	}, WithStore(faulty), WithLogger(slog.New(logs)))
	post := func(r *http.Request) { r.Method = http.MethodPost }
	faulty.SetErr(store.Unavailable(errors.New("connection refused")))
	for range 3 {
		if w := send(h, "192.0.2.1"); w.Code != http.StatusOK {
			t.Fatalf("fail-open: %d", w.Code)
		}
		w := send(h, "192.0.2.1", post)
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "temporary-reduced-capacity") ||
			w.Header().Get("Retry-After") == "" {
			t.Fatalf("fail-closed: %d %s", w.Code, w.Body)
		}
	}
	s := c.Stats()
	if s.FailedOpen != 3 || s.StoreErrors != 6 || s.Rules[0].FailOpen != 3 || s.Rules[1].FailClosed != 3 || s.Shedding != 3 {
		t.Fatalf("%+v", s)
	}
	if logs.n.Load() != 1 { // fail-open is logged, once per second
		t.Fatalf("%d log lines", logs.n.Load())
	}
	faulty.SetErr(nil)
	if w := send(h, "192.0.2.1", post); w.Code != http.StatusOK {
		t.Fatalf("store back: %d", w.Code)
	}
	if w := send(h, "192.0.2.1", post); w.Code != http.StatusTooManyRequests {
		t.Fatalf("store back, limited: %d", w.Code)
	}
}

// fakePenalties puts a key in a 30 s timeout from its second strike.
type fakePenalties struct {
	mu      sync.Mutex
	strikes map[string]int
}

func (p *fakePenalties) Check(key string, now int64) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return 30 * time.Second, p.strikes[key] >= 2
}

func (p *fakePenalties) Strike(key string, now int64) penalty.Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.strikes[strings.Clone(key)]++
	return penalty.Status{Strikes: p.strikes[key], Tracked: true}
}

// TestPenalties: over-limit rejections are strikes; a client in timeout is
// rejected first, with Retry-After the time left and the
// abnormal-usage-detected problem type.
func TestPenalties(t *testing.T) {
	pen := &fakePenalties{strikes: map[string]int{}}
	c, h, _ := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: time.Second}},
		WithPenalties(pen, IP))
	codes := []int{200, 429, 429, 429}
	for i, want := range codes {
		if w := send(h, "192.0.2.1"); w.Code != want {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	w := send(h, "192.0.2.1")
	if w.Header().Get("Retry-After") != "30" || !strings.Contains(w.Body.String(), "abnormal-usage-detected") {
		t.Fatalf("penalized: %v %s", w.Header(), w.Body)
	}
	if pen.strikes["ip:192.0.2.1"] != 2 {
		t.Fatalf("strikes %v", pen.strikes)
	}
	if s := c.Stats(); s.Strikes != 2 || s.Penalized != 2 {
		t.Fatalf("%+v", s)
	}
}

// TestQueueWait: a global concurrency rule with a max wait queues the
// attempt until a permit comes back, and sheds it after the wait.
func TestQueueWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New([]Rule{{Name: "cap", Algorithm: Concurrency, Limit: 1, MaxWait: time.Second}}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		d1, tok1, _ := c.Decide(ctx, Attempt{})
		var d2 Decision
		var tok2 Token
		done := make(chan struct{})
		go func() {
			d2, tok2, _ = c.Decide(ctx, Attempt{})
			close(done)
		}()
		synctest.Wait()
		time.Sleep(500 * time.Millisecond)
		tok1.Done(Success)
		<-done
		if !d1.Allowed || !d2.Allowed {
			t.Fatalf("%+v %+v", d1, d2)
		}
		start := time.Now()
		d3, _, _ := c.Decide(ctx, Attempt{})
		if d3.Allowed || d3.Kind != Shedding || time.Since(start) != time.Second {
			t.Fatalf("%+v after %v", d3, time.Since(start))
		}
		tok2.Done(Success)
		s := c.Stats()
		if s.QueueWaits != 2 || s.QueueShed != 1 || s.QueueWait != 1500*time.Millisecond || s.Inflight != 0 {
			t.Fatalf("%+v", s)
		}
		// A caller that gives up while waiting gets its context's error.
		_, tok4, _ := c.Decide(ctx, Attempt{})
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, _, err := c.Decide(cctx, Attempt{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
		tok4.Done(Success)
		if s := c.Stats(); s.Inflight != 0 || s.Rules[0].Inflight != 0 {
			t.Fatalf("%+v", s)
		}
	})
}

// TestTokenDoneTwice: a second Done releases nothing and is counted.
func TestTokenDoneTwice(t *testing.T) {
	c, _, _ := newTest(t, []Rule{{Name: "cap", Algorithm: Concurrency, Limit: 2}})
	_, t1, _ := c.Decide(context.Background(), Attempt{})
	_, t2, _ := c.Decide(context.Background(), Attempt{})
	t1.Done(Success)
	t1.Done(Success) // must not release t2's permit
	if s := c.Stats(); s.Inflight != 1 || s.Rules[0].Inflight != 1 || s.DoubleDone != 1 {
		t.Fatalf("%+v", s)
	}
	t2.Done(Success)
	Token{}.Done(Success)
	if _, _, err := c.Decide(context.Background(), Attempt{Cost: -1}); err == nil || !strings.HasPrefix(err.Error(), "shed: ") {
		t.Fatalf("negative cost: %v", err)
	}
	if s := c.Stats(); s.Inflight != 0 || s.Rules[0].Inflight != 0 {
		t.Fatalf("%+v", s)
	}
}

// TestValidation: bad rules and options are errors starting with "shed: ".
func TestValidation(t *testing.T) {
	tb := Rule{Name: "tb", Identity: IP, Algorithm: TokenBucket, Limit: 1, Rate: ratelimit.Per(1, time.Second)}
	with := func(f func(r *Rule)) []Rule { r := tb; f(&r); return []Rule{r} }
	bad := map[string][]Rule{
		"none":         nil,
		"no name":      with(func(r *Rule) { r.Name = "" }),
		"bad name":     with(func(r *Rule) { r.Name = "a\nb" }),
		"twice":        {tb, tb},
		"no algorithm": with(func(r *Rule) { r.Algorithm = 0 }),
		"bad identity": with(func(r *Rule) { r.Identity = 9 }),
		"zero limit":   with(func(r *Rule) { r.Limit = 0 }),
		"no rate":      with(func(r *Rule) { r.Rate = ratelimit.Rate{} }),
		"window on tb": with(func(r *Rule) { r.Window = time.Second }),
		"soft NaN":     with(func(r *Rule) { r.SoftLimit = nan() }),
		"soft > 1":     with(func(r *Rule) { r.SoftLimit = 1.5 }),
		"wait on window": with(func(r *Rule) {
			r.Algorithm, r.Rate, r.Window, r.MaxWait = SlidingWindow, ratelimit.Rate{}, time.Second, time.Second
		}),
		"bad failure":    with(func(r *Rule) { r.Failure = 7 }),
		"global failure": with(func(r *Rule) { r.Identity, r.Failure = Global, FailClosed }),
		"global ttl":     {{Name: "c", Algorithm: Concurrency, Limit: 1, LeaseTTL: time.Second}},
		"lease no ttl":   {{Name: "c", Identity: IP, Algorithm: Concurrency, Limit: 1}},
		"adaptive nil":   {{Name: "a", Algorithm: Adaptive}},
		"neg wait":       {{Name: "c", Algorithm: Concurrency, Limit: 1, MaxWait: -1}},
		"queue no wait":  {{Name: "c", Algorithm: Concurrency, Limit: 1, QueueLength: 3}},
		"too many": func() []Rule {
			var rs []Rule
			for i := range store.MaxHits + 1 {
				r := tb
				r.Name = string(rune('a' + i))
				rs = append(rs, r)
			}
			return rs
		}(),
	}
	for name, rules := range bad {
		if _, err := New(rules, quiet()); err == nil || !strings.HasPrefix(err.Error(), "shed: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, o := range []Option{WithStore(nil), WithClock(nil), WithLogger(nil), WithPenalties(nil, IP),
		WithPenalties(&fakePenalties{}, Global), WithResolver(nil), WithHasher(nil), WithClient(nil),
		WithCategory(nil), WithDecisionHook(nil), WithHeaders(nil), WithRejection(nil), nil} {
		if _, err := New([]Rule{tb}, o); err == nil || !strings.HasPrefix(err.Error(), "shed: ") {
			t.Errorf("option: %v", err)
		}
	}
	// Adaptive is shed's own; an unknown value names its number.
	if got := Adaptive.String(); got != "adaptive" {
		t.Errorf("Adaptive.String() = %q", got)
	}
	if got := (Adaptive + 1).String(); got != "Algorithm(7)" {
		t.Errorf("(Adaptive+1).String() = %q", got)
	}
}

// TestPenaltyBox: with a real penalty.Box, two over-limit rejections
// within the window start a 30 s timeout; the client is rejected as
// penalized until it ends, then the rules decide again.
func TestPenaltyBox(t *testing.T) {
	box, err := penalty.NewBox(1024, penalty.WithStrikes(2, time.Minute), penalty.WithTimeouts(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c, h, clk := newTest(t, []Rule{{Name: "ip", Identity: IP, Algorithm: SlidingLog, Limit: 1, Window: 10 * time.Second}},
		WithPenalties(box, IP))
	for i, want := range []int{200, 429, 429} {
		if w := send(h, "192.0.2.1"); w.Code != want {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	w := send(h, "192.0.2.1")
	if w.Code != 429 || w.Header().Get("Retry-After") != "30" || !strings.Contains(w.Body.String(), "abnormal-usage-detected") {
		t.Fatalf("penalized: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if w := send(h, "192.0.2.2"); w.Code != 200 {
		t.Fatalf("another client: %d", w.Code)
	}
	clk.add(30 * time.Second)
	if w := send(h, "192.0.2.1"); w.Code != 200 {
		t.Fatalf("after the timeout: %d", w.Code)
	}
	s := c.Stats()
	if s.Penalized != 1 || s.Strikes != 2 || s.Penalty.Timeouts != 1 || s.Penalty.Strikes != 2 {
		t.Fatalf("%+v", s)
	}
}
