package shed

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/queueing"
)

// fairLoad is one run of the noisy-neighbour scenario in virtual time: a
// quiet tenant at half its share of a limit shared by two tenants, and,
// when noisy, a second tenant at ten times its share. It returns the
// quiet tenant's latencies (wait plus service) and how many of its
// attempts were refused.
func fairLoad(t *testing.T, rule Rule, noisy bool) (lat []time.Duration, refused int) {
	c, err := New([]Rule{rule}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const (
		limit    = 8
		duration = 4 * time.Second
		mean     = 20 * time.Millisecond // service time, uniform in [15, 25] ms
		share    = limit / 2 * float64(time.Second) / float64(mean)
	)
	var mu sync.Mutex
	var wg sync.WaitGroup
	run := func(tenant string, at, service time.Duration) {
		time.Sleep(at)
		start := time.Now()
		d, tok, err := c.Decide(context.Background(), Attempt{Tenant: tenant})
		if err != nil {
			t.Error(err)
			return
		}
		if d.Allowed {
			time.Sleep(service)
			tok.Done(Success)
		}
		if tenant == "quiet" {
			mu.Lock()
			if d.Allowed {
				lat = append(lat, time.Since(start))
			} else {
				refused++
			}
			mu.Unlock()
		}
	}
	// Arrivals and service times drawn up front from fixed seeds: the same
	// load on every run, with or without the noisy tenant.
	spawn := func(tenant string, rate float64, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 7))
		for at := time.Duration(0); at < duration; {
			at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
			service := 15*time.Millisecond + time.Duration(rng.Int64N(int64(10*time.Millisecond)))
			wg.Go(func() { run(tenant, at, service) })
		}
	}
	spawn("quiet", share/2, 1)
	if noisy {
		spawn("noisy", 10*share, 2)
	}
	wg.Wait()
	if s := c.Stats(); s.Inflight != 0 {
		t.Fatalf("inflight %d at the end", s.Inflight)
	}
	return lat, refused
}

func p99(lat []time.Duration) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}

// fairRatio runs the scenario alone and beside the noisy tenant, and
// returns the quiet tenant's p99 ratio and how many it had refused beside
// the noisy one.
func fairRatio(t *testing.T, rule func() Rule) (float64, int) {
	var alone, loaded []time.Duration
	var refused, refusedAlone int
	synctest.Test(t, func(t *testing.T) { alone, refusedAlone = fairLoad(t, rule(), false) })
	synctest.Test(t, func(t *testing.T) { loaded, refused = fairLoad(t, rule(), true) })
	if refusedAlone != 0 {
		t.Fatalf("the quiet tenant alone had %d refused", refusedAlone)
	}
	r := float64(p99(loaded)) / float64(p99(alone))
	t.Logf("quiet p99 alone %v, beside a tenant at 10x its share %v: ratio %.2f, %d refused of %d",
		p99(alone), p99(loaded), r, refused, refused+len(loaded))
	return r, refused
}

// TestFairShareKeepsANoisyTenantFromAnother: one tenant at 10x its share
// of a Global Concurrency rule cannot push another tenant's p99 above
// twice its p99 alone, nor get any of its attempts refused. Without fair
// share the same load does both (so the test can tell).
func TestFairShareKeepsANoisyTenantFromAnother(t *testing.T) {
	rule := func(fair Identity) func() Rule {
		return func() Rule {
			return Rule{Name: "inflight", Algorithm: Concurrency, Limit: 8, MaxWait: time.Second,
				QueueLength: 64, Queue: Queue{FairShare: fair}}
		}
	}
	if r, refused := fairRatio(t, rule(Tenant)); r > 2 || refused > 0 {
		t.Fatalf("with fair share: p99 ratio %.2f (want <= 2), %d refused", r, refused)
	}
	if r, refused := fairRatio(t, rule(Global)); r <= 2 && refused == 0 {
		t.Fatalf("without fair share the noisy tenant did no harm (ratio %.2f): the scenario proves nothing", r)
	}
}

// TestFairShareOnAnAdaptiveRule: the same through an Adaptive rule, whose
// Limiter's queue shares the limit.
func TestFairShareOnAnAdaptiveRule(t *testing.T) {
	rule := func() Rule {
		alg, err := adaptive.NewAIMD(adaptive.WithInitialLimit(8), adaptive.WithLimits(8, 8))
		if err != nil {
			t.Fatal(err)
		}
		lim, err := adaptive.NewLimiter(alg, adaptive.WithQueue(queueing.WithFairShare(), queueing.WithMaxLength(64)))
		if err != nil {
			t.Fatal(err)
		}
		return Rule{Name: "adaptive", Algorithm: Adaptive, Limiter: lim, MaxWait: time.Second, Queue: Queue{FairShare: Tenant}}
	}
	if r, refused := fairRatio(t, rule); r > 2 || refused > 0 {
		t.Fatalf("p99 ratio %.2f (want <= 2), %d refused", r, refused)
	}
}

func TestFairShareRuleValidation(t *testing.T) {
	plain, err := adaptive.NewLimiter(&fixedAlg{4})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rule Rule
		want string
	}{
		{Rule{Name: "r", Algorithm: Concurrency, Limit: 4, Queue: Queue{FairShare: Tenant}}, "max wait"},
		{Rule{Name: "r", Algorithm: Concurrency, Limit: 4, MaxWait: time.Second, Queue: Queue{FairShare: Tenant + 1}}, "unknown fair-share identity"},
		{Rule{Name: "r", Algorithm: Adaptive, Limiter: plain, MaxWait: time.Second, Queue: Queue{FairShare: User}}, "WithFairShare"},
		{Rule{Name: "r", Algorithm: Adaptive, Limiter: plain, MaxWait: time.Second, Queue: Queue{CoDel: true}}, "queue discipline"},
		{Rule{Name: "r", Identity: Tenant, Algorithm: TokenBucket, Limit: 4, Queue: Queue{FairShare: User}}, "fair share applies only"},
	} {
		if _, err := New([]Rule{tc.rule}, quiet()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one about %q", tc.rule.Queue, err, tc.want)
		}
	}
	c, err := New([]Rule{{Name: "r", Algorithm: Concurrency, Limit: 4, MaxWait: time.Second, Queue: Queue{FairShare: Tenant}}}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, w := range []int{-1, MaxWeight + 1} {
		if _, _, err := c.Decide(context.Background(), Attempt{Tenant: "a", Weight: w}); err == nil {
			t.Errorf("weight %d accepted", w)
		}
	}
	// Weights split a contended limit: a tenant of weight 3 and one of
	// weight 1, both always waiting, end up holding 3 and 1 of 4.
	synctest.Test(t, func(t *testing.T) {
		gold, bronze := splitRunning(t, nil, Attempt{Tenant: "gold", Weight: 3}, Attempt{Tenant: "bronze", Weight: 1})
		if gold != 3 || bronze != 1 {
			t.Fatalf("running gold %d bronze %d, want 3 and 1 (weights 3:1 of 4)", gold, bronze)
		}
	})
}

// TestTierWeights: attempts without a weight of their own weigh what
// their tier does (WithTierWeights); a Reload replaces the weights.
func TestTierWeights(t *testing.T) {
	if _, err := New([]Rule{{Name: "r", Algorithm: Concurrency, Limit: 4}}, WithTierWeights(map[string]int{"pro": 0})); err == nil {
		t.Fatal("weight 0 accepted")
	}
	synctest.Test(t, func(t *testing.T) {
		pro, free := splitRunning(t, []Option{WithTierWeights(map[string]int{"pro": 3})},
			Attempt{Tenant: "acme", Tier: "pro"}, Attempt{Tenant: "tiny", Tier: "free"})
		if pro != 3 || free != 1 {
			t.Fatalf("running pro %d free %d, want 3 and 1", pro, free)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		// An attempt's own weight comes first.
		pro, free := splitRunning(t, []Option{WithTierWeights(map[string]int{"pro": 3})},
			Attempt{Tenant: "acme", Tier: "pro", Weight: 1}, Attempt{Tenant: "tiny", Tier: "free", Weight: 3})
		if pro != 1 || free != 3 {
			t.Fatalf("running pro %d free %d, want 1 and 3", pro, free)
		}
	})
	c, err := New([]Rule{{Name: "r", Algorithm: Concurrency, Limit: 4, MaxWait: time.Second, Queue: Queue{FairShare: Tenant}}},
		quiet(), WithTierWeights(map[string]int{"pro": 3}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rules := []Rule{{Name: "r", Algorithm: Concurrency, Limit: 4, MaxWait: time.Second, Queue: Queue{FairShare: Tenant}}}
	if err := c.Reload(Config{Rules: rules, TierWeights: map[string]int{"pro": MaxWeight + 1}}); err == nil {
		t.Fatal("Reload accepted a weight above MaxWeight")
	}
	if w := c.set.Load().weights["pro"]; w != 3 {
		t.Fatalf("a failed Reload changed the weights: pro %d", w)
	}
	if err := c.Reload(Config{Rules: rules, TierWeights: map[string]int{}}); err != nil {
		t.Fatal(err)
	}
	if c.set.Load().weights != nil {
		t.Fatalf("an empty map left weights %v", c.set.Load().weights)
	}
}

// splitRunning runs, in a bubble, four clients sending attempt a and four
// sending b, back to back, on a fair-share rule of 4 permits held 10 ms
// each (and g µs for client g), and returns how many of each run, as seen
// at most of 100 instants between releases over a second. The clients'
// holds differ by microseconds so that no two release at one instant: a
// permit given back while another client is between its own release and
// its next request goes to whoever waits, as work conservation wants, and
// simultaneous releases would measure that race rather than the weights.
func splitRunning(t *testing.T, opts []Option, a, b Attempt) (int, int) {
	c, err := New([]Rule{{Name: "r", Algorithm: Concurrency, Limit: 4, MaxWait: time.Hour, Queue: Queue{FairShare: Tenant}}},
		append([]Option{quiet()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	running := map[string]int{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 8 {
		at := a
		if g%2 == 1 {
			at = b
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				d, tok, err := c.Decide(ctx, at)
				if err != nil || !d.Allowed {
					return
				}
				mu.Lock()
				running[at.Tenant]++
				mu.Unlock()
				time.Sleep(10*time.Millisecond + time.Duration(g)*time.Microsecond)
				mu.Lock()
				running[at.Tenant]--
				mu.Unlock()
				tok.Done(Success)
			}
		})
	}
	type split struct{ a, b int }
	seen := map[split]int{}
	time.Sleep(5 * time.Millisecond) // between two releases
	for range 100 {
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		seen[split{running[a.Tenant], running[b.Tenant]}]++
		mu.Unlock()
	}
	cancel()
	wg.Wait()
	var most split
	for sp, n := range seen {
		if n > seen[most] {
			most = sp
		}
	}
	if seen[most] < 90 {
		t.Errorf("the split held at %d of 100 instants only: %v", seen[most], seen)
	}
	return most.a, most.b
}

// fixedAlg is an adaptive.Algorithm that keeps its limit.
type fixedAlg struct{ limit int }

func (f *fixedAlg) Limit() int                 { return f.limit }
func (f *fixedAlg) Update(adaptive.Window) int { return f.limit }

// TestDryRunQueuedRuleGivesPermitsBackWhereItTookThem: a dry-run rule
// takes its permits from its semaphore directly, never through its queue,
// so it gives them back there too (through the queue a reserve's or a fair
// share's accounting would meet a release it never saw, and panic).
func TestDryRunQueuedRuleGivesPermitsBackWhereItTookThem(t *testing.T) {
	for _, q := range []Queue{{FairShare: Tenant}, {Reserve: 0.5}} {
		c, err := New([]Rule{{Name: "r", Algorithm: Concurrency, Limit: 2, MaxWait: time.Second, Queue: q, DryRun: true}}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			d, tok, err := c.Decide(context.Background(), Attempt{Tenant: "a", Priority: Sheddable})
			if err != nil || !d.Allowed {
				t.Fatalf("%+v: %v %v", q, d, err)
			}
			tok.Done(Success)
		}
		if s := c.Stats(); s.Inflight != 0 {
			t.Fatalf("%+v: inflight %d", q, s.Inflight)
		}
		c.Close()
	}
}
