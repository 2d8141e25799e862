package shed

import (
	"context"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/ratelimit"
	"pgregory.net/rapid"
)

// neverPenalized is a penalty box that holds nobody: a Controller with it
// decides every plan on the full path (decide), never on decideLocal.
type neverPenalized struct{}

func (neverPenalized) Check(string, int64) (time.Duration, bool) { return 0, false }
func (neverPenalized) Strike(string, int64) penalty.Status       { return penalty.Status{} }

// mustBeLocal fails unless every plan of c's set in force is decided by
// decideLocal.
func mustBeLocal(t interface{ Fatalf(string, ...any) }, c *Controller) {
	s := c.set.Load()
	plans := []*plan{s.all}
	for _, p := range s.plans {
		plans = append(plans, p)
	}
	for _, p := range plans {
		if !p.local || c.pen != nil || s.stores {
			t.Fatalf("a plan is not decided locally: local %v, penalties %v, stores %v", p.local, c.pen != nil, s.stores)
		}
	}
}

// TestLocalPlanRefundsEarlierRulesOnLaterReject: on a plan of Global rate
// rules only, a rule that rejects gives back what the rules before it
// took, and the counters say exactly what was decided.
func TestLocalPlanRefundsEarlierRulesOnLaterReject(t *testing.T) {
	c, _, _ := newTest(t, []Rule{
		{Name: "wide", Algorithm: TokenBucket, Limit: 5, Rate: ratelimit.Per(1, time.Hour)},
		{Name: "narrow", Category: "x", Algorithm: FixedWindow, Limit: 2, Window: time.Hour},
	})
	mustBeLocal(t, c)
	for range 2 {
		if d := decide(t, c, Attempt{Category: "x"}); !d.Allowed {
			t.Fatalf("below both limits: %+v", d)
		}
	}
	for range 10 {
		if d := decide(t, c, Attempt{Category: "x"}); d.Allowed || d.Rule != "narrow" || d.Kind != Shedding {
			t.Fatalf("over narrow: %+v", d)
		}
	}
	// wide gave back the 10 units narrow's rejections took from it: 3 left.
	for n := range 4 {
		d := decide(t, c, Attempt{})
		if d.Allowed != (n < 3) {
			t.Fatalf("wide, attempt %d: %+v", n, d)
		}
		if d.Allowed && (d.Rule != "wide" || d.Remaining != int64(2-n)) {
			t.Fatalf("wide, attempt %d: rule %q remaining %d", n, d.Rule, d.Remaining)
		}
	}
	s := c.Stats()
	if s.Admitted != 5 || s.Shedding != 11 || s.Inflight != 0 {
		t.Fatalf("admitted %d, shedding %d, inflight %d", s.Admitted, s.Shedding, s.Inflight)
	}
	wide, narrow := s.Rules[0], s.Rules[1]
	if wide.Allowed != 5 || wide.Rejected != 1 || narrow.Allowed != 2 || narrow.Rejected != 10 {
		t.Fatalf("wide %+v, narrow %+v", wide, narrow)
	}
}

// TestLocalPlanDecidesAsTheFullPath: under any sequence of attempts,
// completions (any status, some twice), recosts and clock moves, a
// Controller whose Global rate and concurrency rules are decided by
// decideLocal makes the decisions and the Stats of one that decides the
// same rules on the full path (a penalty box that holds nobody sends it
// there): refunds, permits, dry-run, Count rules and soft limits
// included. Fixed windows are left
// out: their sharded window's Remaining depends on the shard that
// decides.
func TestLocalPlanDecidesAsTheFullPath(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var rules []Rule
		for i := range rapid.IntRange(1, 3).Draw(t, "rules") {
			r := Rule{
				Name:     string(rune('a' + i)),
				Category: rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, "category"),
				Limit:    rapid.Int64Range(1, 6).Draw(t, "limit"),
				DryRun:   rapid.Bool().Draw(t, "dry"),
				Count:    rapid.SampledFrom([]Count{CountAll, CountFailures, CountAuthFailures}).Draw(t, "count"),
			}
			r.SoftLimit = rapid.SampledFrom([]float64{0, 0.5, 1}).Draw(t, "soft")
			switch rapid.IntRange(0, 3).Draw(t, "algorithm") {
			case 3:
				r.Algorithm, r.Count, r.SoftLimit = Concurrency, CountAll, 0
			case 0:
				r.Algorithm, r.Rate = TokenBucket, ratelimit.Per(rapid.Int64Range(1, 3).Draw(t, "rate"), time.Second)
			case 1:
				r.Algorithm, r.Window = SlidingWindow, time.Duration(rapid.IntRange(1, 3).Draw(t, "window"))*time.Second
			default:
				r.Algorithm, r.Window = SlidingLog, time.Duration(rapid.IntRange(1, 3).Draw(t, "window"))*time.Second
			}
			rules = append(rules, r)
		}
		clk := newFakeClock()
		local, err := New(rules, WithClock(clk.now), quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer local.Close()
		full, err := New(rules, WithClock(clk.now), quiet(), WithPenalties(neverPenalized{}, IP))
		if err != nil {
			t.Fatal(err)
		}
		defer full.Close()
		mustBeLocal(t, local)
		type pair struct{ l, f Token }
		var live []pair
		for range rapid.IntRange(1, 80).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				a := Attempt{Category: rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, "cat"),
					Cost: rapid.Int64Range(0, 3).Draw(t, "cost"), IP: ipA}
				dl, tl, errL := local.Decide(context.Background(), a)
				df, tf, errF := full.Decide(context.Background(), a)
				if (errL == nil) != (errF == nil) {
					t.Fatalf("errors %v and %v", errL, errF)
				}
				dl.plan, df.plan = nil, nil
				dl.wall, df.wall = 0, 0 // each Controller's anchor to the wall clock
				if !reflect.DeepEqual(dl, df) {
					t.Fatalf("%+v: local %+v, full %+v", a, dl, df)
				}
				if dl.Allowed {
					live = append(live, pair{tl, tf})
				}
			case 2:
				if len(live) == 0 {
					continue
				}
				j := rapid.IntRange(0, len(live)-1).Draw(t, "token")
				if rapid.Bool().Draw(t, "recost") {
					actual := rapid.Int64Range(0, 4).Draw(t, "actual")
					if (live[j].l.Recost(actual) == nil) != (live[j].f.Recost(actual) == nil) {
						t.Fatal("one Recost failed")
					}
					continue
				}
				status := rapid.SampledFrom([]int{200, 401, 500}).Draw(t, "status")
				live[j].l.DoneStatus(status)
				live[j].f.DoneStatus(status)
				if !rapid.Bool().Draw(t, "again") { // a token done twice stays in live
					live = append(live[:j], live[j+1:]...)
				}
			default:
				clk.add(time.Duration(rapid.IntRange(1, 1500).Draw(t, "ms")) * time.Millisecond)
			}
			if sl, sf := local.Stats(), full.Stats(); !reflect.DeepEqual(sl, sf) {
				t.Fatalf("stats: local %+v, full %+v", sl, sf)
			}
		}
	})
}

// TestStoreHitsOfAnEarlierAttemptStayItsOwn: an attempt decided by
// Global rules only, on a ticket that last held an attempt with per-key
// hits, neither refunds (Rule.Count) nor recharges (Token.Recost) the
// keys of that earlier attempt.
func TestStoreHitsOfAnEarlierAttemptStayItsOwn(t *testing.T) {
	c, _, _ := newTest(t, []Rule{
		{Name: "ip", Category: "write", Identity: IP, Algorithm: FixedWindow, Limit: 1000, Window: time.Hour, Count: CountFailures},
		{Name: "cap", Category: "read", Algorithm: TokenBucket, Limit: 1000, Rate: ratelimit.Per(1, time.Hour)},
	})
	// Tickets come from a pool: in turns, the read attempt often gets the
	// ticket the write attempt had just given back.
	for n := range 20 {
		d, tok, err := c.Decide(context.Background(), Attempt{Category: "write", IP: ipA})
		if err != nil || !d.Allowed {
			t.Fatalf("write: %+v %v", d, err)
		}
		tok.DoneStatus(500) // counted: the charge stands
		d, tok, err = c.Decide(context.Background(), Attempt{Category: "read", IP: ipA})
		if err != nil || !d.Allowed {
			t.Fatalf("read: %+v %v", d, err)
		}
		if err := tok.Recost(3); err != nil {
			t.Fatal(err)
		}
		tok.DoneStatus(200)
		p, err := c.Peek(context.Background(), Attempt{Category: "write", IP: ipA})
		if err != nil {
			t.Fatal(err)
		}
		if used := p.Limit - p.Remaining; used != int64(n+1) {
			t.Fatalf("after %d write attempts the key used %d", n+1, used)
		}
	}
	if s := c.Stats(); s.Rules[0].Refunded != 0 || s.Rules[0].Overspent != 0 {
		t.Fatalf("ip: refunded %d, overspent %d", s.Rules[0].Refunded, s.Rules[0].Overspent)
	}
}

// TestLocalDecisionsAllocateNothing: an admission through Decide and its
// Done on a plan of Global rules allocates nothing, for each algorithm
// (sharded or not).
func TestLocalDecisionsAllocateNothing(t *testing.T) {
	for _, r := range []Rule{
		{Name: "bucket", Algorithm: TokenBucket, Limit: 1 << 30, Rate: ratelimit.Per(1_000_000_000, time.Second)},
		{Name: "small-bucket", Algorithm: TokenBucket, Limit: 1 << 20, Rate: ratelimit.Per(1_000_000_000, time.Second)},
		{Name: "window", Algorithm: FixedWindow, Limit: 1 << 30, Window: time.Hour},
		{Name: "sliding", Algorithm: SlidingWindow, Limit: 1 << 16, Window: time.Hour},
		{Name: "inflight", Algorithm: Concurrency, Limit: 1 << 20},
		{Name: "inflight-single", Algorithm: Concurrency, Limit: 16},
	} {
		c, err := New([]Rule{r}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		mustBeLocal(t, c)
		ctx := context.Background()
		a := Attempt{IP: netip.AddrFrom4([4]byte{10, 0, 0, 1})}
		n := testing.AllocsPerRun(1000, func() {
			d, tok, err := c.Decide(ctx, a)
			if err != nil || !d.Allowed {
				t.Fatalf("%s: rejected below the cap: %+v, %v", r.Name, d, err)
			}
			tok.Done(Success)
		})
		_ = c.Close()
		if n != 0 {
			t.Fatalf("%s: %v allocations per decision", r.Name, n)
		}
	}
}

// TestReloadBetweenLocalAndStoredSets: while goroutines decide, reloads
// alternate a set of Global rules only (decided without counting the
// decision in an epoch) and a set with a per-key rule whose store limit
// each version replaces: no decision meets a limit that a reload
// unregistered, and every permit comes back.
func TestReloadBetweenLocalAndStoredSets(t *testing.T) {
	version := func(v int) []Rule {
		rules := []Rule{{Name: "cap", Algorithm: TokenBucket, Limit: 1 << 30, Rate: ratelimit.Per(1_000_000, time.Second)}}
		if v%2 == 1 {
			rules = append(rules, Rule{Name: "ip", Identity: IP, Algorithm: FixedWindow, Limit: 1 << 20,
				Window: time.Hour + time.Duration(v)*time.Second})
		}
		return rules
	}
	c, err := New(version(0), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stopReloads := reloadUntilStopped(t, c, func(v int) Config { return Config{Rules: version(v)} })
	var stored atomic.Int64
	var work sync.WaitGroup
	for range 4 {
		work.Add(1)
		go func() {
			defer work.Done()
			// Until some decisions met the per-key rule (or a bound, so
			// that a scheduler starving the reloads cannot hang the test;
			// 100 000 decisions, some 10 ms, were too few for a reload to
			// be scheduled while the package's other tests ran beside).
			for n := 0; n < 2_000_000 && (n < 2000 || stored.Load() < 100); n++ {
				d, tok, err := c.Decide(context.Background(), Attempt{IP: ipA})
				if err != nil || !d.Allowed || d.FailedOpen {
					t.Errorf("decision %d: %+v, %v", n, d, err)
					return
				}
				if len(d.plan.stored) > 0 {
					stored.Add(1)
				}
				tok.Done(Success)
			}
		}()
	}
	work.Wait()
	stopReloads()
	if t.Failed() {
		return
	}
	if stored.Load() == 0 {
		t.Fatal("no decision met the per-key rule: the test says nothing")
	}
	if s := c.Stats(); s.StoreErrors != 0 || s.Inflight != 0 {
		t.Fatalf("store errors %d, inflight %d", s.StoreErrors, s.Inflight)
	}
}

// TestLocalPlanOnAShardedCapIsAllOrNothing: a Global token bucket large
// enough to shard (ratelimit.ShardedBucket) layered with Global rules that
// reject often (a small concurrency limit, a small fixed window, each of
// a category of its own), and alone (the plan of no category, decideLone):
// under any sequence of attempts of any cost, completions and
// clock moves, the bucket holds exactly its burst less what admitted
// attempts took (the rate refills no whole token in the run), so a
// rejected layered decision leaves no trace on it, and nothing is held
// once every token is done.
func TestLocalPlanOnAShardedCapIsAllOrNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		burst := rapid.Int64Range(128, 1024).Draw(t, "burst")
		c, err := New([]Rule{
			{Name: "cap", Algorithm: TokenBucket, Limit: burst, Rate: ratelimit.Per(1, time.Hour)},
			{Name: "inflight", Category: "y", Algorithm: Concurrency, Limit: rapid.Int64Range(1, 4).Draw(t, "inflight")},
			{Name: "narrow", Category: "x", Algorithm: FixedWindow, Limit: rapid.Int64Range(1, 5).Draw(t, "narrow"), Window: time.Hour},
		}, WithClock(newFakeClock().now), quiet())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		mustBeLocal(t, c)
		if c.set.Load().planFor("", "").lone == nil {
			t.Fatal("the cap alone is not a lone plan")
		}
		clk := newFakeClock()
		capRate, ok := c.set.Load().rules[0].rate.(*shardedBucketRate)
		if !ok || capRate.b.Shards() < 2 {
			t.Fatalf("the cap of %d is not a sharded bucket: %T", burst, c.set.Load().rules[0].rate)
		}
		var live []Token
		var taken int64
		for range rapid.IntRange(1, 100).Draw(t, "steps") {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				a := Attempt{Now: clk.now(), Category: rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, "category"),
					Cost: rapid.Int64Range(1, 3).Draw(t, "cost")}
				d, tok, err := c.Decide(context.Background(), a)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					taken += a.Cost
					live = append(live, tok)
				}
			case 2:
				if len(live) > 0 {
					j := rapid.IntRange(0, len(live)-1).Draw(t, "token")
					live[j].DoneAt(clk.now(), Success)
					live = append(live[:j], live[j+1:]...)
				}
			default:
				clk.add(time.Duration(rapid.IntRange(1, 1500).Draw(t, "ms")) * time.Millisecond)
			}
			if got := capRate.b.Available(clk.now()); got != burst-taken {
				t.Fatalf("the cap holds %d, want %d less the %d admitted attempts took", got, burst, taken)
			}
		}
		for _, tok := range live {
			tok.DoneAt(clk.now(), Success)
		}
		if s := c.Stats(); s.Inflight != 0 || s.Rules[1].Inflight != 0 {
			t.Fatalf("all done, inflight %d (rule %d)", s.Inflight, s.Rules[1].Inflight)
		}
	})
}

// TestDecideErrsExactlyOnAnAttemptOutOfRange: Decide refuses an attempt
// whose cost or now is negative, whose priority is none of the four classes
// or whose weight is outside [0, MaxWeight], naming the first of those (in
// that order: weight, priority, now, cost), and decides every other one.
func TestDecideErrsExactlyOnAnAttemptOutOfRange(t *testing.T) {
	c, _, _ := newTest(t, []Rule{{Name: "global", Algorithm: TokenBucket, Limit: 1 << 40, Rate: ratelimit.Per(1_000_000_000, time.Second)}})
	rapid.Check(t, func(t *rapid.T) {
		a := Attempt{
			Cost:     rapid.Int64Range(-2, 2).Draw(t, "cost"),
			Now:      rapid.Int64Range(-2, 2).Draw(t, "now"),
			Priority: Priority(rapid.IntRange(int(Sheddable)-2, int(CriticalPlus)+2).Draw(t, "priority")),
			Weight:   rapid.IntRange(-2, MaxWeight+2).Draw(t, "weight"),
		}
		var want string
		switch {
		case a.Weight < 0 || a.Weight > MaxWeight:
			want = "shed: weight must be"
		case a.Priority < Sheddable || a.Priority > CriticalPlus:
			want = "shed: unknown priority"
		case a.Now < 0:
			want = "shed: negative now"
		case a.Cost < 0:
			want = "shed: negative cost"
		}
		d, tok, err := c.Decide(context.Background(), a)
		defer tok.Done(Ignore)
		switch {
		case want == "" && (err != nil || !d.Allowed):
			t.Fatalf("%+v: %v, allowed %v; want an admission", a, err, d.Allowed)
		case want != "" && (err == nil || len(err.Error()) < len(want) || err.Error()[:len(want)] != want):
			t.Fatalf("%+v: error %v, want %q", a, err, want)
		}
	})
}

// TestStatsCountEveryTicketOnItsShard: attempts held at once are on
// tickets of their own, each counting on its own shard of the
// Controller's counters; Stats sums them all, whatever shard each drew.
func TestStatsCountEveryTicketOnItsShard(t *testing.T) {
	c, _, _ := newTest(t, []Rule{{Name: "global", Algorithm: TokenBucket, Limit: 1 << 40, Rate: ratelimit.Per(1_000_000_000, time.Second)}})
	const n = 300
	toks := make([]Token, 0, n)
	for range n {
		d, tok, err := c.Decide(context.Background(), Attempt{})
		if err != nil || !d.Allowed {
			t.Fatalf("%v, allowed %v", err, d.Allowed)
		}
		toks = append(toks, tok)
	}
	if s := c.Stats(); s.Admitted != n || s.Inflight != n || s.Rules[0].Allowed != n {
		t.Fatalf("admitted %d, inflight %d, rule allowed %d; want %d each", s.Admitted, s.Inflight, s.Rules[0].Allowed, n)
	}
	for _, tok := range toks {
		tok.Done(Success)
		tok.Done(Success) // a second Done: counted, releases nothing
	}
	if s := c.Stats(); s.Admitted != n || s.Inflight != 0 || s.DoubleDone != n {
		t.Fatalf("admitted %d, inflight %d, double done %d; want %d, 0, %d", s.Admitted, s.Inflight, s.DoubleDone, n, n)
	}
}
