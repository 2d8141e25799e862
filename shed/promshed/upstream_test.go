package promshed_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed/promshed"
	"github.com/sluicehq/sluice/upstream"
)

// scripted is an upstream that answers its calls with the statuses of a
// script, in order (200 once the script is done); a 429 comes with
// Retry-After: 1.
type scripted struct {
	mu     sync.Mutex
	script []int
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	status := http.StatusOK
	if len(s.script) > 0 {
		status, s.script = s.script[0], s.script[1:]
	}
	s.mu.Unlock()
	h := http.Header{}
	if status == http.StatusTooManyRequests {
		h.Set("Retry-After", "1")
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// newClientSide returns a Transport (10 per second, bursts of 1, the whole
// limit used, no throttling) over an upstream that answers 200, 429, 200,
// 503, then 200, and a RetryTransport in front of it (3 attempts, a retry
// funded by every request, backoff without jitter).
func newClientSide(t *testing.T) (*upstream.Transport, *upstream.RetryTransport) {
	t.Helper()
	api := &scripted{script: []int{200, 429, 200, 503}}
	tr, err := upstream.NewTransport(api, ratelimit.Per(10, time.Second),
		upstream.WithBurst(1), upstream.WithReserve(1), upstream.WithoutThrottle())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := upstream.NewRetryTransport(tr, upstream.WithAttempts(3), upstream.WithBudget(1, 10),
		upstream.WithBackoffRandom(func() float64 { return 0 }))
	if err != nil {
		t.Fatal(err)
	}
	return tr, rt
}

// call sends one GET through rt with a context that ends after timeout.
func call(rt http.RoundTripper, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/", nil)
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// TestUpstreamCollectorAfterCalls drives known traffic in a synctest
// bubble (virtual time) and checks every metric. Four calls at t=0:
//   - 1: sent at once, 200;
//   - 2: waits 100 ms for a token, 429 with Retry-After: 1, retried after
//     1 s (then the block is over and a token is there), 200;
//   - 3: waits 100 ms for a token, 503 (the Transport blocks the key for
//     a second), retried after a 50 ms backoff, waits 950 ms, 200;
//   - 4: a 10 ms deadline falls before its turn (100 ms away): failed fast,
//     not retried.
//
// So the Transport had 6 requests, sent 5, of which 3 waited 1.15 s in
// all; the RetryTransport had 4 requests, made 6 attempts, 2 retries.
func TestUpstreamCollectorAfterCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, rt := newClientSide(t)
		col, err := promshed.NewUpstream(nil, tr, rt)
		if err != nil {
			t.Fatal(err)
		}
		for i, timeout := range []time.Duration{time.Minute, time.Minute, time.Minute, 10 * time.Millisecond} {
			err := call(rt, timeout)
			if (err != nil) != (i == 3) || (i == 3 && !errors.Is(err, upstream.ErrDeadline)) {
				t.Fatalf("call %d: %v", i+1, err)
			}
		}
		want := `
# HELP sluice_upstream_delayed_total Sent requests that waited for their turn (pacing, Retry-After, an exhausted quota, the concurrency cap).
# TYPE sluice_upstream_delayed_total counter
sluice_upstream_delayed_total 3
# HELP sluice_upstream_failed_fast_total Requests failed without being sent, because their turn fell after their deadline or beyond the max wait.
# TYPE sluice_upstream_failed_fast_total counter
sluice_upstream_failed_fast_total 1
# HELP sluice_upstream_rejections_total Responses of the upstream that rejected a request, by status: 429 or 503.
# TYPE sluice_upstream_rejections_total counter
sluice_upstream_rejections_total{status="429"} 1
sluice_upstream_rejections_total{status="503"} 1
# HELP sluice_upstream_requests_total Requests given to the upstream Transport.
# TYPE sluice_upstream_requests_total counter
sluice_upstream_requests_total 6
# HELP sluice_upstream_retries_denied_total Retries the retry budget refused.
# TYPE sluice_upstream_retries_denied_total counter
sluice_upstream_retries_denied_total 0
# HELP sluice_upstream_retries_total Retries the RetryTransport made.
# TYPE sluice_upstream_retries_total counter
sluice_upstream_retries_total 2
# HELP sluice_upstream_retry_attempts_total Attempts the RetryTransport made: first attempts and retries.
# TYPE sluice_upstream_retry_attempts_total counter
sluice_upstream_retry_attempts_total 6
# HELP sluice_upstream_retry_requests_total Requests given to the RetryTransport.
# TYPE sluice_upstream_retry_requests_total counter
sluice_upstream_retry_requests_total 4
# HELP sluice_upstream_sent_total Requests the Transport passed on to the upstream.
# TYPE sluice_upstream_sent_total counter
sluice_upstream_sent_total 5
# HELP sluice_upstream_throttled_total Requests rejected locally by adaptive throttling, because the upstream rejected much of what was sent.
# TYPE sluice_upstream_throttled_total counter
sluice_upstream_throttled_total 0
# HELP sluice_upstream_wait_seconds_total Total time sent requests waited for their turn.
# TYPE sluice_upstream_wait_seconds_total counter
sluice_upstream_wait_seconds_total 1.15
`
		if err := testutil.CollectAndCompare(col, strings.NewReader(want)); err != nil {
			t.Error(err)
		}
		// Lint-clean, every name sluice_ and described, Collect within
		// Describe (the pedantic registry checks it).
		problems, err := testutil.CollectAndLint(col)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
		mfs, err := pedantic(t, col).Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if !strings.HasPrefix(mf.GetName(), "sluice_") || mf.GetHelp() == "" {
				t.Errorf("metric %q: want the sluice_ prefix and a HELP", mf.GetName())
			}
		}
	})
}

// TestUpstreamCollectorRegistration: one of the two transports may be
// missing (its metrics are left out), not both; the collector registers on
// the registry given, beside a Controller's collector, never on the
// default one; many upstream keys add no series.
func TestUpstreamCollectorRegistration(t *testing.T) {
	if _, err := promshed.NewUpstream(nil, nil, nil); err == nil || !strings.HasPrefix(err.Error(), "promshed: ") {
		t.Errorf("NewUpstream(nil, nil, nil) error = %v, want a promshed error", err)
	}
	synctest.Test(t, func(t *testing.T) {
		tr, rt := newClientSide(t)
		onlyRetry, err := promshed.NewUpstream(nil, nil, rt)
		if err != nil {
			t.Fatal(err)
		}
		if n := testutil.CollectAndCount(onlyRetry); n != 4 {
			t.Errorf("RetryTransport alone: %d series, want 4", n)
		}
		reg := prometheus.NewPedanticRegistry()
		if _, err := promshed.NewUpstream(reg, tr, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := promshed.New(reg, newController(t)); err != nil {
			t.Errorf("a Controller's collector beside it: %v", err)
		}
		if _, err := promshed.NewUpstream(reg, tr, nil); err == nil || !strings.HasPrefix(err.Error(), "promshed: ") {
			t.Errorf("second registration error = %v, want a promshed error", err)
		}
		before, err := testutil.GatherAndCount(reg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			req, _ := http.NewRequest(http.MethodGet, "http://api"+string(rune('a'+i))+".example/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if after, err := testutil.GatherAndCount(reg); err != nil || after != before {
			t.Errorf("series after 20 upstream keys: %d (%v), before: %d", after, err, before)
		}
		noDefaultSeries(t)
	})
}
