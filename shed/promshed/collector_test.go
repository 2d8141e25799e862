package promshed_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/promshed"
)

// fixedClock is a Controller clock that stands still.
func fixedClock() int64 { return int64(time.Hour) }

// newController returns a Controller with a per-IP token bucket (2, then
// one a minute, 64 keys), a global cap of one request at once, and a
// penalty box that times a client out at its first strike.
func newController(t *testing.T) *shed.Controller {
	t.Helper()
	box, err := penalty.NewBox(32, penalty.WithStrikes(1, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c, err := shed.New([]shed.Rule{
		{Name: "per-ip", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: 2, Rate: ratelimit.Per(1, time.Minute), Capacity: 64},
		{Name: "inflight", Algorithm: shed.Concurrency, Limit: 1},
	}, shed.WithClock(fixedClock), shed.WithPenalties(box, shed.IP))
	if err != nil {
		t.Fatal(err)
	}
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

// drive runs one of each outcome through c and checks the decisions, so
// that the metrics below describe known traffic.
func drive(t *testing.T, c *shed.Controller, col prometheus.Collector) {
	t.Helper()
	const a, b = "198.51.100.1", "198.51.100.2"
	d, held := decide(t, c, a)
	if !d.Allowed {
		t.Fatalf("first request: %+v", d)
	}
	// While the first holds the only permit, the global cap sheds.
	if err := testutil.CollectAndCompare(col, strings.NewReader(`
# HELP sluice_inflight_requests Admitted attempts whose token is not done yet.
# TYPE sluice_inflight_requests gauge
sluice_inflight_requests 1
# HELP sluice_rule_inflight Permits held of a Global concurrency or adaptive rule.
# TYPE sluice_rule_inflight gauge
sluice_rule_inflight{rule="inflight"} 1
`), "sluice_inflight_requests", "sluice_rule_inflight"); err != nil {
		t.Error(err)
	}
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

func TestCollectorAfterDecisions(t *testing.T) {
	c := newController(t)
	col := newCollector(t, c)
	drive(t, c, col)

	want := `
# HELP sluice_decisions_total Decisions of the controller by outcome: admitted, over_limit (429), shedding (503), penalized (429).
# TYPE sluice_decisions_total counter
sluice_decisions_total{outcome="admitted"} 2
sluice_decisions_total{outcome="over_limit"} 1
sluice_decisions_total{outcome="penalized"} 1
sluice_decisions_total{outcome="shedding"} 1
# HELP sluice_inflight_requests Admitted attempts whose token is not done yet.
# TYPE sluice_inflight_requests gauge
sluice_inflight_requests 0
# HELP sluice_penalty_keys Clients the penalty box holds state for.
# TYPE sluice_penalty_keys gauge
sluice_penalty_keys 1
# HELP sluice_penalty_keys_capacity Most clients the penalty box can hold.
# TYPE sluice_penalty_keys_capacity gauge
sluice_penalty_keys_capacity 32
# HELP sluice_penalty_strikes_total Strikes given to the penalty box for over-limit rejections.
# TYPE sluice_penalty_strikes_total counter
sluice_penalty_strikes_total 1
# HELP sluice_penalty_timeouts_total Penalty timeouts started.
# TYPE sluice_penalty_timeouts_total counter
sluice_penalty_timeouts_total 1
# HELP sluice_rule_decisions_total Attempts each rule decided: allowed, rejected, would_reject (dry-run), fail_open and fail_closed (the store failed), overflowed (the key did not fit the store's full table: shed with 503, counted on the shared overflow state, or decided on its network prefix), overflow_prefix (those of them decided on the limit of the client's network prefix); for Adaptive rules, shed_by_wait (rejected because they waited past the algorithm's queue bound before the decision).
# TYPE sluice_rule_decisions_total counter
sluice_rule_decisions_total{outcome="allowed",rule="inflight"} 2
sluice_rule_decisions_total{outcome="allowed",rule="per-ip"} 2
sluice_rule_decisions_total{outcome="fail_closed",rule="inflight"} 0
sluice_rule_decisions_total{outcome="fail_closed",rule="per-ip"} 0
sluice_rule_decisions_total{outcome="fail_open",rule="inflight"} 0
sluice_rule_decisions_total{outcome="fail_open",rule="per-ip"} 0
sluice_rule_decisions_total{outcome="overflow_prefix",rule="inflight"} 0
sluice_rule_decisions_total{outcome="overflow_prefix",rule="per-ip"} 0
sluice_rule_decisions_total{outcome="overflowed",rule="inflight"} 0
sluice_rule_decisions_total{outcome="overflowed",rule="per-ip"} 0
sluice_rule_decisions_total{outcome="rejected",rule="inflight"} 1
sluice_rule_decisions_total{outcome="rejected",rule="per-ip"} 1
sluice_rule_decisions_total{outcome="would_reject",rule="inflight"} 0
sluice_rule_decisions_total{outcome="would_reject",rule="per-ip"} 0
# HELP sluice_rule_info One series per rule, always 1, naming its category, identity and algorithm.
# TYPE sluice_rule_info gauge
sluice_rule_info{algorithm="concurrency",category="",identity="global",rule="inflight"} 1
sluice_rule_info{algorithm="token_bucket",category="",identity="ip",rule="per-ip"} 1
# HELP sluice_rule_inflight Permits held of a Global concurrency or adaptive rule.
# TYPE sluice_rule_inflight gauge
sluice_rule_inflight{rule="inflight"} 0
# HELP sluice_rule_keys Client keys the store holds for a per-key rule.
# TYPE sluice_rule_keys gauge
sluice_rule_keys{rule="per-ip"} 1
# HELP sluice_rule_keys_capacity Most client keys the store holds for a per-key rule.
# TYPE sluice_rule_keys_capacity gauge
sluice_rule_keys_capacity{rule="per-ip"} 64
# HELP sluice_rule_limit Limit in force: the burst or quota of a rate rule, the permits of a concurrency rule, the current limit of an adaptive rule.
# TYPE sluice_rule_limit gauge
sluice_rule_limit{rule="inflight"} 1
sluice_rule_limit{rule="per-ip"} 2
# HELP sluice_rule_queue_waiting Attempts waiting for a permit of a Global concurrency or adaptive rule.
# TYPE sluice_rule_queue_waiting gauge
sluice_rule_queue_waiting{rule="inflight"} 0
`
	names := []string{
		"sluice_decisions_total", "sluice_inflight_requests",
		"sluice_penalty_keys", "sluice_penalty_keys_capacity", "sluice_penalty_strikes_total", "sluice_penalty_timeouts_total",
		"sluice_rule_decisions_total", "sluice_rule_info", "sluice_rule_inflight", "sluice_rule_keys",
		"sluice_rule_keys_capacity", "sluice_rule_limit", "sluice_rule_queue_waiting",
	}
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

func TestCollectorLint(t *testing.T) {
	c := newController(t)
	col := newCollector(t, c)
	drive(t, c, col)
	problems, err := testutil.CollectAndLint(col)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// Every metric name starts with sluice_, and each is described.
func TestCollectorNamesAndDescriptions(t *testing.T) {
	c := newController(t)
	col := newCollector(t, c)
	drive(t, c, col)
	mfs, err := pedantic(t, col).Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) == 0 {
		t.Fatal("no metrics gathered")
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "sluice_") {
			t.Errorf("metric %q lacks the sluice_ prefix", mf.GetName())
		}
		if mf.GetHelp() == "" {
			t.Errorf("metric %q has no HELP", mf.GetName())
		}
	}
}

// Traffic from many clients adds no series: no label holds a client key.
func TestCollectorCardinalityBounded(t *testing.T) {
	c := newController(t)
	col := newCollector(t, c)
	drive(t, c, col)
	before := testutil.CollectAndCount(col)
	for i := range 500 {
		ip := netip.AddrFrom4([4]byte{203, 0, byte(i >> 8), byte(i)})
		d, tok, err := c.Decide(context.Background(), shed.Attempt{IP: ip})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			tok.Done(shed.Success)
		}
	}
	if after := testutil.CollectAndCount(col); after != before {
		t.Errorf("series after 500 new clients: %d, before: %d", after, before)
	}
	// The traffic is there, in the counters.
	if got := testutil.CollectAndCount(col, "sluice_rule_keys"); got != 1 {
		t.Errorf("sluice_rule_keys series: %d, want 1", got)
	}
}

func TestAdaptiveLimitGauge(t *testing.T) {
	alg, err := adaptive.NewDefault(adaptive.WithInitialLimit(7), adaptive.WithLimits(2, 50))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := adaptive.NewLimiter(alg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := shed.New([]shed.Rule{{Name: "adaptive", Algorithm: shed.Adaptive, Limiter: lim}}, shed.WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t, c)
	var toks []shed.Token
	for range 3 {
		d, tok, err := c.Decide(context.Background(), shed.Attempt{})
		if err != nil || !d.Allowed {
			t.Fatalf("decide: %+v, %v", d, err)
		}
		toks = append(toks, tok)
	}
	// One that waited past Default's queue bound (20ms) is shed, and
	// counted as shed by its wait.
	if d, _, err := c.Decide(context.Background(), shed.Attempt{Queued: time.Second}); err != nil || d.Allowed {
		t.Fatalf("decide after a 1s wait: %+v, %v", d, err)
	}
	decisions := `
# HELP sluice_rule_decisions_total Attempts each rule decided: allowed, rejected, would_reject (dry-run), fail_open and fail_closed (the store failed), overflowed (the key did not fit the store's full table: shed with 503, counted on the shared overflow state, or decided on its network prefix), overflow_prefix (those of them decided on the limit of the client's network prefix); for Adaptive rules, shed_by_wait (rejected because they waited past the algorithm's queue bound before the decision).
# TYPE sluice_rule_decisions_total counter
sluice_rule_decisions_total{outcome="allowed",rule="adaptive"} 3
sluice_rule_decisions_total{outcome="fail_closed",rule="adaptive"} 0
sluice_rule_decisions_total{outcome="fail_open",rule="adaptive"} 0
sluice_rule_decisions_total{outcome="overflow_prefix",rule="adaptive"} 0
sluice_rule_decisions_total{outcome="overflowed",rule="adaptive"} 0
sluice_rule_decisions_total{outcome="rejected",rule="adaptive"} 1
sluice_rule_decisions_total{outcome="shed_by_wait",rule="adaptive"} 1
sluice_rule_decisions_total{outcome="would_reject",rule="adaptive"} 0
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(decisions), "sluice_rule_decisions_total"); err != nil {
		t.Error(err)
	}
	want := `
# HELP sluice_rule_inflight Permits held of a Global concurrency or adaptive rule.
# TYPE sluice_rule_inflight gauge
sluice_rule_inflight{rule="adaptive"} 3
# HELP sluice_rule_limit Limit in force: the burst or quota of a rate rule, the permits of a concurrency rule, the current limit of an adaptive rule.
# TYPE sluice_rule_limit gauge
sluice_rule_limit{rule="adaptive"} 7
# HELP sluice_rule_queue_bound_seconds Longest wait before the decision that an adaptive rule admits now (its algorithm's queue bound); only rules that have one.
# TYPE sluice_rule_queue_bound_seconds gauge
sluice_rule_queue_bound_seconds{rule="adaptive"} 0.02
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "sluice_rule_limit", "sluice_rule_inflight", "sluice_rule_queue_bound_seconds"); err != nil {
		t.Error(err)
	}
	for _, tok := range toks {
		tok.Done(shed.Ignore)
	}
	// Without a penalty box or a store table, their metrics are left out.
	for _, name := range []string{"sluice_penalty_keys", "sluice_rule_keys"} {
		if n := testutil.CollectAndCount(col, name); n != 0 {
			t.Errorf("%s: %d series, want none", name, n)
		}
	}
}

func TestDryRunCounted(t *testing.T) {
	c, err := shed.New([]shed.Rule{
		{Name: "per-user", Identity: shed.User, Algorithm: shed.FixedWindow, Limit: 1, Window: time.Minute, DryRun: true},
	}, shed.WithClock(fixedClock), shed.WithLogger(discardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t, c)
	for range 3 {
		d, tok, err := c.Decide(context.Background(), shed.Attempt{User: "u"})
		if err != nil || !d.Allowed {
			t.Fatalf("dry-run decide: %+v, %v", d, err)
		}
		tok.Done(shed.Success)
	}
	want := `
# HELP sluice_dry_run_rejections_total Attempts admitted that a dry-run rule or penalty would have rejected.
# TYPE sluice_dry_run_rejections_total counter
sluice_dry_run_rejections_total 2
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "sluice_dry_run_rejections_total"); err != nil {
		t.Error(err)
	}
}

func TestRegistration(t *testing.T) {
	c := newController(t)
	if _, err := promshed.New(nil, nil); err == nil || !strings.HasPrefix(err.Error(), "promshed: ") {
		t.Errorf("New(nil, nil) error = %v, want a promshed error", err)
	}

	reg := prometheus.NewRegistry()
	if _, err := promshed.New(reg, c); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "sluice_decisions_total"); err != nil || n != 4 {
		t.Errorf("registered: %d sluice_decisions_total series (%v), want 4", n, err)
	}
	// A second Controller on the same registry collides.
	other := newController(t)
	if _, err := promshed.New(reg, other); err == nil || !strings.HasPrefix(err.Error(), "promshed: ") {
		t.Errorf("second registration error = %v, want a promshed error", err)
	}
	// Two Controllers share a registry when a label tells them apart.
	shared := prometheus.NewRegistry()
	for name, ctl := range map[string]*shed.Controller{"api": c, "jobs": other} {
		wrapped := prometheus.WrapRegistererWith(prometheus.Labels{"controller": name}, shared)
		if _, err := promshed.New(wrapped, ctl); err != nil {
			t.Errorf("registration of %s with a distinguishing label: %v", name, err)
		}
	}
	if n, err := testutil.GatherAndCount(shared, "sluice_decisions_total"); err != nil || n != 8 {
		t.Errorf("two controllers: %d sluice_decisions_total series (%v), want 8", n, err)
	}

	// nil registers nowhere, and the default registry is never touched.
	col, err := promshed.New(nil, c)
	if err != nil || col == nil {
		t.Fatalf("New(nil, c) = %v, %v", col, err)
	}
	noDefaultSeries(t)
}
