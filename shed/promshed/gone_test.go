package promshed_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// TestGoneRequestsCounted: a request whose client had gone before the
// middleware decided is counted on sluice_gone_requests_total, and not
// as a decision.
func TestGoneRequestsCounted(t *testing.T) {
	c, err := shed.New([]shed.Rule{
		{Name: "per-ip", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: 4, Rate: ratelimit.Per(1, time.Hour)},
	}, shed.WithClock(fixedClock), shed.WithLogger(discardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t, c)
	h := c.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("a gone request was served") }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 2 {
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	want := `
# HELP sluice_gone_requests_total Requests not decided nor served because their client had gone (context ended) before the decision.
# TYPE sluice_gone_requests_total counter
sluice_gone_requests_total 2
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "sluice_gone_requests_total"); err != nil {
		t.Error(err)
	}
	if s := c.Stats(); s.Admitted != 0 || s.OverLimit != 0 || s.Shedding != 0 {
		t.Errorf("gone requests counted as decisions: %+v", s)
	}
}
