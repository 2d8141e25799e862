package promshed_test

import (
	"context"
	"strings"
	"testing"
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
	col, err := promshed.New(nil, c)
	if err != nil {
		t.Fatal(err)
	}
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
# HELP sluice_rule_decisions_total Attempts each rule decided: allowed, rejected, would_reject (dry-run), fail_open and fail_closed (the store failed).
# TYPE sluice_rule_decisions_total counter
sluice_rule_decisions_total{outcome="allowed",rule="closed"} 0
sluice_rule_decisions_total{outcome="allowed",rule="open"} 0
sluice_rule_decisions_total{outcome="fail_closed",rule="closed"} 1
sluice_rule_decisions_total{outcome="fail_closed",rule="open"} 0
sluice_rule_decisions_total{outcome="fail_open",rule="closed"} 0
sluice_rule_decisions_total{outcome="fail_open",rule="open"} 2
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
