package otelshed_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/otelshed"
	"github.com/sluicehq/sluice/store"
)

// fixedClock is a Controller clock that stands still.
func fixedClock() int64 { return int64(time.Hour) }

// newController returns a Controller with a per-IP token bucket (2, then
// one a minute, 64 keys), a global cap of one request at once, and a
// penalty box that times a client out at its first strike, on st (the
// memory store when nil).
func newController(t testing.TB, st store.Store, extra ...shed.Rule) *shed.Controller {
	t.Helper()
	box, err := penalty.NewBox(32, penalty.WithStrikes(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	opts := []shed.Option{shed.WithClock(fixedClock), shed.WithPenalties(box, shed.IP)}
	if st != nil {
		opts = append(opts, shed.WithStore(st))
	}
	c, err := shed.New(append([]shed.Rule{
		{Name: "per-ip", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: 2, Rate: ratelimit.Per(1, time.Minute), Capacity: 64},
		{Name: "inflight", Algorithm: shed.Concurrency, Limit: 1},
	}, extra...), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func decide(t *testing.T, c *shed.Controller, ip string) (shed.Decision, shed.Token) {
	t.Helper()
	d, tok, err := c.Decide(context.Background(), shed.Attempt{IP: netip.MustParseAddr(ip)})
	if err != nil {
		t.Fatal(err)
	}
	return d, tok
}

// drive runs one of each outcome through c, checking each decision so
// that the metrics describe known traffic: a admitted and held; b shed by
// the global cap meanwhile; a admitted again (its bucket now empty); a
// over its limit (a strike, and with it a timeout); a penalized. check is
// called while the first attempt holds the one permit.
func drive(t *testing.T, c *shed.Controller, check func()) {
	t.Helper()
	const a, b = "198.51.100.1", "198.51.100.2"
	d, held := decide(t, c, a)
	if !d.Allowed {
		t.Fatalf("first request: %+v", d)
	}
	check()
	if d, _ := decide(t, c, b); d.Kind != shed.Shedding || d.Rule != "inflight" {
		t.Fatalf("second request while the first runs: %v by %q, want shedding by inflight", d.Kind, d.Rule)
	}
	held.Done(shed.Success)
	d, tok := decide(t, c, a)
	if !d.Allowed {
		t.Fatalf("third request: %+v", d)
	}
	tok.Done(shed.Success)
	if d, _ := decide(t, c, a); d.Kind != shed.OverLimit || d.Rule != "per-ip" {
		t.Fatalf("fourth request: %v by %q, want over_limit by per-ip", d.Kind, d.Rule)
	}
	if d, _ := decide(t, c, a); d.Kind != shed.Penalized {
		t.Fatalf("fifth request: %v, want penalized", d.Kind)
	}
}

func TestNewNeedsProviderAndController(t *testing.T) {
	c := newController(t, nil)
	for _, tc := range []struct {
		name string
		mp   metric.MeterProvider
		c    *shed.Controller
	}{{"nil provider", nil, c}, {"nil controller", noop.NewMeterProvider(), nil}} {
		m, err := otelshed.New(tc.mp, tc.c)
		if err == nil || m != nil || !strings.HasPrefix(err.Error(), "otelshed: ") {
			t.Errorf("%s: %v, %v; want an otelshed error and no Metrics", tc.name, m, err)
		}
	}
}

// Every counter and gauge is observed from one Stats snapshot, with the
// figures of the traffic drive sends: two admissions, one of each
// rejection, one key in the rule's table and in the penalty box.
func TestMetricsAfterDecisions(t *testing.T) {
	r, mp := newReader(t)
	c := newController(t, nil)
	m, err := otelshed.New(mp, c)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()

	drive(t, c, func() {
		expect(t, gather(t, r), "while one attempt runs", `
			sluice.inflight{} 1
			sluice.rule.inflight{sluice.rule.name=inflight} 1
		`, "sluice.inflight", "sluice.rule.inflight")
	})

	// A peek of a client the table holds is no decision.
	if _, err := c.Peek(context.Background(), shed.Attempt{IP: netip.MustParseAddr("198.51.100.1")}); err != nil {
		t.Fatal(err)
	}
	got := render(gather(t, r))
	w := want(`
		sluice.decisions{sluice.outcome=admitted} 2
		sluice.decisions{sluice.outcome=over_limit} 1
		sluice.decisions{sluice.outcome=shedding} 1
		sluice.decisions{sluice.outcome=penalized} 1
		sluice.dry_run.rejections{} 0
		sluice.store.failed_open{} 0
		sluice.store.errors{} 0
		sluice.store.leases_lost{} 0
		sluice.inflight{} 0
		sluice.queue.waits{} 0
		sluice.queue.wait.time{} 0
		sluice.queue.shed{} 0
		sluice.token.double_done{} 0
		sluice.handler.panics{} 0
		sluice.unknown_peers{} 0
		sluice.proxy.without_header{} 0
		sluice.cgnat.decisions{} 0
		sluice.early_warnings{} 0
		sluice.early_warnings_held{} 0
		sluice.penalty.strikes{} 1
		sluice.penalty.keys{} 1
		sluice.penalty.capacity{} 32
		sluice.penalty.evictions{} 0
		sluice.penalty.timeouts{} 1
		sluice.rule.info{sluice.rule.algorithm=token_bucket,sluice.rule.category=,sluice.rule.identity=ip,sluice.rule.name=per-ip} 1
		sluice.rule.info{sluice.rule.algorithm=concurrency,sluice.rule.category=,sluice.rule.identity=global,sluice.rule.name=inflight} 1
		sluice.rule.decisions{sluice.outcome=allowed,sluice.rule.name=per-ip} 2
		sluice.rule.decisions{sluice.outcome=rejected,sluice.rule.name=per-ip} 1
		sluice.rule.decisions{sluice.outcome=would_reject,sluice.rule.name=per-ip} 0
		sluice.rule.decisions{sluice.outcome=fail_open,sluice.rule.name=per-ip} 0
		sluice.rule.decisions{sluice.outcome=fail_closed,sluice.rule.name=per-ip} 0
		sluice.rule.decisions{sluice.outcome=overflowed,sluice.rule.name=per-ip} 0
		sluice.rule.decisions{sluice.outcome=overflow_prefix,sluice.rule.name=per-ip} 0
		sluice.rule.decisions{sluice.outcome=allowed,sluice.rule.name=inflight} 2
		sluice.rule.decisions{sluice.outcome=rejected,sluice.rule.name=inflight} 1
		sluice.rule.decisions{sluice.outcome=would_reject,sluice.rule.name=inflight} 0
		sluice.rule.decisions{sluice.outcome=fail_open,sluice.rule.name=inflight} 0
		sluice.rule.decisions{sluice.outcome=fail_closed,sluice.rule.name=inflight} 0
		sluice.rule.decisions{sluice.outcome=overflowed,sluice.rule.name=inflight} 0
		sluice.rule.decisions{sluice.outcome=overflow_prefix,sluice.rule.name=inflight} 0
		sluice.rule.limit{sluice.rule.name=per-ip} 2
		sluice.rule.limit{sluice.rule.name=inflight} 1
		sluice.rule.inflight{sluice.rule.name=inflight} 0
		sluice.rule.queue.waiting{sluice.rule.name=inflight} 0
		sluice.rule.keys{sluice.rule.name=per-ip} 1
		sluice.rule.capacity{sluice.rule.name=per-ip} 64
		sluice.rule.evictions{sluice.rule.name=per-ip} 0
		sluice.rule.overflows{sluice.rule.name=per-ip} 0
		sluice.exempt.requests{} 0
		sluice.tightened.decisions{} 0
		sluice.tightened.would_reject{} 0
		sluice.peeks{} 1
		sluice.gone.requests{} 0
		sluice.rule.overspent{sluice.rule.name=inflight} 0
		sluice.rule.overspent{sluice.rule.name=per-ip} 0
		sluice.rule.refunds{sluice.refund.result=lost,sluice.rule.name=inflight} 0
		sluice.rule.refunds{sluice.refund.result=lost,sluice.rule.name=per-ip} 0
		sluice.rule.refunds{sluice.refund.result=refunded,sluice.rule.name=inflight} 0
		sluice.rule.refunds{sluice.refund.result=refunded,sluice.rule.name=per-ip} 0
	`)
	if got != w {
		t.Errorf("after the decisions:\n%s\nwant:\n%s", got, w)
	}
}

// healthyStore is a memory store that reports a health, as a store with
// a shared backend and a local fallback does.
type healthyStore struct {
	*store.Memory
	h store.Health
}

func (s healthyStore) Health() store.Health { return s.h }

// A store that reports its health is observed (mode, share, instances,
// fallbacks, transitions each way); one that does not, is left out.
func TestStoreHealthObservedOnlyWhenReported(t *testing.T) {
	health := []string{"sluice.store.degraded", "sluice.store.share", "sluice.store.instances",
		"sluice.store.fallback_decisions", "sluice.store.backend_errors", "sluice.store.transitions"}

	r, mp := newReader(t)
	h := store.Health{Degraded: true, Instances: 4, Share: 0.25, FallbackDecisions: 7, BackendErrors: 3, Trips: 2, Recoveries: 1}
	m, err := otelshed.New(mp, newController(t, healthyStore{store.NewMemory(), h}))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	expect(t, gather(t, r), "a degraded store", `
		sluice.store.degraded{} 1
		sluice.store.share{} 0.25
		sluice.store.instances{} 4
		sluice.store.fallback_decisions{} 7
		sluice.store.backend_errors{} 3
		sluice.store.transitions{sluice.store.mode=degraded} 2
		sluice.store.transitions{sluice.store.mode=shared} 1
	`, health...)

	r2, mp2 := newReader(t)
	m2, err := otelshed.New(mp2, newController(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Unregister()
	samples := gather(t, r2)
	if got := render(samples, health...); got != "" {
		t.Errorf("a store without a health report:\n%s", got)
	}
	if len(samples) == 0 {
		t.Fatal("no metrics at all")
	}
}

// After Unregister the provider no longer reads the Controller: its
// counters are gone from the next collection, and a second Unregister is
// harmless.
func TestUnregisterStopsObserving(t *testing.T) {
	r, mp := newReader(t)
	c := newController(t, nil)
	m, err := otelshed.New(mp, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := render(gather(t, r), "sluice.decisions"); !strings.Contains(got, "sluice.decisions{sluice.outcome=admitted} 0") {
		t.Fatalf("before Unregister:\n%s", got)
	}
	if err := m.Unregister(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unregister(); err != nil {
		t.Fatalf("second Unregister: %v", err)
	}
	decide(t, c, "198.51.100.1")
	if got := render(gather(t, r)); got != "" {
		t.Errorf("after Unregister:\n%s", got)
	}
}

// Two Metrics on one provider are two callbacks: each observes its own
// Controller, and unregistering one leaves the other.
func TestUnregisterLeavesOtherMetrics(t *testing.T) {
	r, mp := newReader(t)
	c1, c2 := newController(t, nil), newController(t, nil)
	m1, err := otelshed.New(mp, c1)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := otelshed.New(mp, c2)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Unregister()
	decide(t, c2, "198.51.100.1")
	if err := m1.Unregister(); err != nil {
		t.Fatal(err)
	}
	expect(t, gather(t, r), "after unregistering the first", `
		sluice.decisions{sluice.outcome=admitted} 1
		sluice.decisions{sluice.outcome=over_limit} 0
		sluice.decisions{sluice.outcome=shedding} 0
		sluice.decisions{sluice.outcome=penalized} 0
	`, "sluice.decisions")
}

// defaultRule returns an Adaptive rule named "adaptive" on a Limiter of
// adaptive.Default with opts.
func defaultRule(t testing.TB, opts ...adaptive.Option) shed.Rule {
	t.Helper()
	alg, err := adaptive.NewDefault(opts...)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := adaptive.NewLimiter(alg)
	if err != nil {
		t.Fatal(err)
	}
	return shed.Rule{Name: "adaptive", Algorithm: shed.Adaptive, Limiter: lim}
}

// An Adaptive rule reports the attempts it shed because they waited past
// its algorithm's queue bound, among its decisions.
func TestShedByWaitObserved(t *testing.T) {
	r, mp := newReader(t)
	c, err := shed.New([]shed.Rule{defaultRule(t)}, shed.WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := otelshed.New(mp, c)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unregister()
	if d, _, err := c.Decide(context.Background(), shed.Attempt{Queued: time.Second}); err != nil || d.Allowed {
		t.Fatalf("decide after a 1s wait: %+v, %v", d, err)
	}
	var got []string
	for _, line := range strings.Split(render(gather(t, r), "sluice.rule.decisions"), "\n") {
		if strings.Contains(line, "outcome=rejected") || strings.Contains(line, "outcome=shed_by_wait") {
			got = append(got, line)
		}
	}
	if w := want(`
		sluice.rule.decisions{sluice.outcome=rejected,sluice.rule.name=adaptive} 1
		sluice.rule.decisions{sluice.outcome=shed_by_wait,sluice.rule.name=adaptive} 1
	`); strings.Join(got, "\n") != w {
		t.Fatalf("decisions:\n%s\nwant:\n%s", strings.Join(got, "\n"), w)
	}
	if got, w := render(gather(t, r), "sluice.rule.queue.bound"), want(`
		sluice.rule.queue.bound{sluice.rule.name=adaptive} 0.02
	`); got != w {
		t.Fatalf("queue bound:\n%s\nwant:\n%s", got, w)
	}
}
