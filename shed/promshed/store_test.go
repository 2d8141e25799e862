package promshed_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/promshed"
	"github.com/sluicehq/sluice/store"
)

// downStore is a store that cannot answer.
type downStore struct{ store.Store }

func (downStore) Decide(context.Context, *store.Request, *store.Result) error {
	return store.ErrUnavailable
}

// When the store fails, the failure modes show per rule, and the
// fail-open admissions and store errors overall.
func TestStoreFailureMetrics(t *testing.T) {
	c, err := shed.New([]shed.Rule{
		{Name: "open", Identity: shed.User, Algorithm: shed.FixedWindow, Limit: 5, Window: time.Minute},
		{Name: "closed", Category: "auth", Identity: shed.User, Algorithm: shed.FixedWindow, Limit: 5, Window: time.Minute, Failure: shed.FailClosed},
	}, shed.WithStore(downStore{store.NewMemory()}), shed.WithClock(fixedClock), shed.WithLogger(discardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t, c)
	for _, cat := range []string{"read", "read", "auth"} {
		d, tok, err := c.Decide(context.Background(), shed.Attempt{Category: cat, User: "u"})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != (cat == "read") {
			t.Fatalf("%s with the store down: %+v", cat, d)
		}
		tok.Done(shed.Success)
	}
	want := `
# HELP sluice_rule_decisions_total Attempts each rule decided: allowed, rejected, would_reject (dry-run), fail_open and fail_closed (the store failed), overflowed (the key did not fit the store's full table: shed with 503, counted on the shared overflow state, or decided on its network prefix), overflow_prefix (those of them decided on the limit of the client's network prefix); for Adaptive rules, shed_by_wait (rejected because they waited past the algorithm's queue bound before the decision).
# TYPE sluice_rule_decisions_total counter
sluice_rule_decisions_total{outcome="allowed",rule="closed"} 0
sluice_rule_decisions_total{outcome="allowed",rule="open"} 0
sluice_rule_decisions_total{outcome="fail_closed",rule="closed"} 1
sluice_rule_decisions_total{outcome="fail_closed",rule="open"} 0
sluice_rule_decisions_total{outcome="fail_open",rule="closed"} 0
sluice_rule_decisions_total{outcome="fail_open",rule="open"} 2
sluice_rule_decisions_total{outcome="overflow_prefix",rule="closed"} 0
sluice_rule_decisions_total{outcome="overflow_prefix",rule="open"} 0
sluice_rule_decisions_total{outcome="overflowed",rule="closed"} 0
sluice_rule_decisions_total{outcome="overflowed",rule="open"} 0
sluice_rule_decisions_total{outcome="rejected",rule="closed"} 0
sluice_rule_decisions_total{outcome="rejected",rule="open"} 0
sluice_rule_decisions_total{outcome="would_reject",rule="closed"} 0
sluice_rule_decisions_total{outcome="would_reject",rule="open"} 0
# HELP sluice_store_errors_total Store calls that failed, whatever followed.
# TYPE sluice_store_errors_total counter
sluice_store_errors_total 3
# HELP sluice_store_failed_open_total Attempts admitted past their store rules because the store failed and every store rule involved fails open.
# TYPE sluice_store_failed_open_total counter
sluice_store_failed_open_total 2
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want),
		"sluice_rule_decisions_total", "sluice_store_errors_total", "sluice_store_failed_open_total"); err != nil {
		t.Error(err)
	}
}

// healthyStore is a memory store that reports a health, as a store with a
// shared backend and a local fallback does.
type healthyStore struct {
	*store.Memory
	h store.Health
}

func (s healthyStore) Health() store.Health { return s.h }

// A store that reports its health exports its mode, share and fallback
// counts; one that does not exports none of them.
func TestStoreHealthMetrics(t *testing.T) {
	h := store.Health{Degraded: true, Instances: 4, Share: 0.25, FallbackDecisions: 7, BackendErrors: 3, Trips: 2, Recoveries: 1}
	c, err := shed.New([]shed.Rule{
		{Name: "per-user", Identity: shed.User, Algorithm: shed.FixedWindow, Limit: 5, Window: time.Minute},
	}, shed.WithStore(healthyStore{store.NewMemory(), h}), shed.WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t, c)
	want := `
# HELP sluice_store_degraded 1 while the shared store is bypassed and decisions are made locally on this instance's share, else 0.
# TYPE sluice_store_degraded gauge
sluice_store_degraded 1
# HELP sluice_store_degraded_transitions_total Changes of the store's mode, to degraded (to="degraded") and back (to="shared").
# TYPE sluice_store_degraded_transitions_total counter
sluice_store_degraded_transitions_total{to="degraded"} 2
sluice_store_degraded_transitions_total{to="shared"} 1
# HELP sluice_store_fallback_decisions_total Decisions made locally because the shared store was bypassed.
# TYPE sluice_store_fallback_decisions_total counter
sluice_store_fallback_decisions_total 7
# HELP sluice_store_share Fraction of each limit this instance enforces while the shared store is bypassed.
# TYPE sluice_store_share gauge
sluice_store_share 0.25
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want),
		"sluice_store_degraded", "sluice_store_degraded_transitions_total", "sluice_store_fallback_decisions_total", "sluice_store_share"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(col, "sluice_store_instances", "sluice_store_backend_errors_total"); n != 2 {
		t.Fatalf("instances and backend errors: %d series, want 2", n)
	}

	plain, err := shed.New([]shed.Rule{
		{Name: "per-user", Identity: shed.User, Algorithm: shed.FixedWindow, Limit: 5, Window: time.Minute},
	}, shed.WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	pcol, err := promshed.New(nil, plain)
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(pcol, "sluice_store_degraded", "sluice_store_share"); n != 0 {
		t.Fatalf("a store without a health report exported %d store health series", n)
	}
}

// A key flood's overflowed decisions and the requests from peers nobody
// could parse show in their own series.
func TestOverflowAndUnknownPeerMetrics(t *testing.T) {
	c, err := shed.New([]shed.Rule{
		{Name: "per-user", Identity: shed.User, Algorithm: shed.SlidingLog, Limit: 5, Window: time.Hour, Capacity: 16},
	}, shed.WithClock(fixedClock), shed.WithLogger(discardLogger()),
		shed.WithClient(func(r *http.Request) shed.Client { return shed.Client{User: r.URL.Query().Get("u")} }))
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t, c)
	h := c.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 40 {
		r := httptest.NewRequest(http.MethodGet, "/?u=u"+strconv.Itoa(i), nil)
		if i == 0 {
			r.RemoteAddr = "@" // a unix socket peer
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	mfs, err := pedantic(t, col).Gather()
	if err != nil {
		t.Fatal(err)
	}
	var overflowed, unknown float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "sluice_rule_decisions_total":
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() == "overflowed" {
						overflowed += m.GetCounter().GetValue()
					}
				}
			case "sluice_unknown_peers_total":
				unknown = m.GetCounter().GetValue()
			}
		}
	}
	if overflowed == 0 || unknown != 1 {
		t.Fatalf("overflowed %v (want > 0), unknown peers %v (want 1)", overflowed, unknown)
	}
}

// The charges given back after the work show per rule.
func TestRefundMetrics(t *testing.T) {
	c, err := shed.New([]shed.Rule{
		{Name: "login", Identity: shed.User, Algorithm: shed.SlidingLog, Limit: 5, Window: time.Hour, Count: shed.CountAuthFailures},
	}, shed.WithClock(fixedClock), shed.WithLogger(discardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t, c)
	for _, status := range []int{401, 200, 200} {
		_, tok, err := c.Decide(context.Background(), shed.Attempt{User: "u"})
		if err != nil {
			t.Fatal(err)
		}
		tok.DoneStatus(status)
	}
	want := `
# HELP sluice_rule_refunds_total Charges given back after the work (a status the rule does not count, a lower true cost): refunded, or lost (the store could not).
# TYPE sluice_rule_refunds_total counter
sluice_rule_refunds_total{result="lost",rule="login"} 0
sluice_rule_refunds_total{result="refunded",rule="login"} 2
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "sluice_rule_refunds_total"); err != nil {
		t.Fatal(err)
	}
}

// The histograms fill from the Controller's own decisions and queue waits
// (shed.WithObserver).
func TestHistogramsFromTheController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := promshed.NewHistograms(nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := shed.New([]shed.Rule{{Name: "inflight", Algorithm: shed.Concurrency, Limit: 1, MaxWait: 30 * time.Millisecond}},
			shed.WithObserver(h), shed.WithLogger(discardLogger()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, held, err := c.Decide(context.Background(), shed.Attempt{})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Decide(context.Background(), shed.Attempt{}); err != nil { // waits 30 ms, shed
			t.Fatal(err)
		}
		held.Done(shed.Success)
		want := `
# HELP sluice_queue_wait_duration_seconds Time attempts waited for a permit of a Global Concurrency or Adaptive rule, by whether they got one.
# TYPE sluice_queue_wait_duration_seconds histogram
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="0.0001"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="0.0005"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="0.001"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="0.0025"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="0.005"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="0.01"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="0.025"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="0.05"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="0.1"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="0.25"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="0.5"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="1"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="2.5"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="5"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="10"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="admitted",rule="inflight",le="+Inf"} 0
sluice_queue_wait_duration_seconds_sum{outcome="admitted",rule="inflight"} 0
sluice_queue_wait_duration_seconds_count{outcome="admitted",rule="inflight"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="0.0001"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="0.0005"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="0.001"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="0.0025"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="0.005"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="0.01"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="0.025"} 0
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="0.05"} 1
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="0.1"} 1
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="0.25"} 1
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="0.5"} 1
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="1"} 1
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="2.5"} 1
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="5"} 1
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="10"} 1
sluice_queue_wait_duration_seconds_bucket{outcome="rejected",rule="inflight",le="+Inf"} 1
sluice_queue_wait_duration_seconds_sum{outcome="rejected",rule="inflight"} 0.03
sluice_queue_wait_duration_seconds_count{outcome="rejected",rule="inflight"} 1
`
		if err := testutil.CollectAndCompare(h, strings.NewReader(want), "sluice_queue_wait_duration_seconds"); err != nil {
			t.Fatal(err)
		}
		if n := testutil.CollectAndCount(h, "sluice_decision_duration_seconds"); n != 4 {
			t.Fatalf("%d decision series, want one per outcome (4)", n)
		}
	})
}

// A per-IP rule's decisions on network prefixes (shed.OverflowPrefix)
// show as their own outcome, among the overflowed.
func TestOverflowPrefixMetrics(t *testing.T) {
	c, err := shed.New([]shed.Rule{
		{Name: "per-ip", Identity: shed.IP, Algorithm: shed.SlidingLog, Limit: 5, Window: time.Hour, Capacity: 16,
			Overflow: shed.OverflowPrefix},
	}, shed.WithClock(fixedClock), shed.WithLogger(discardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t, c)
	h := c.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 40 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "198.51.100." + strconv.Itoa(i) + ":4000"
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	mfs, err := pedantic(t, col).Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_rule_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					got[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	if got["overflow_prefix"] == 0 || got["overflowed"] < got["overflow_prefix"] {
		t.Fatalf("outcomes %v: want overflow_prefix > 0, among the overflowed", got)
	}
}
