package policy_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/queueing"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/store"
)

// TestCalendarAndOverflowFields: "100 a month, reset on the first at
// midnight UTC-05:00" and a shared overflow state are expressible in a
// file; their mistakes are errors at their line.
func TestCalendarAndOverflowFields(t *testing.T) {
	doc := `{
  "version": 1,
  "rules": [
    {"name": "monthly", "identity": "tenant", "algorithm": "fixed_window", "limit": 100,
     "calendar": {"zone": "-05:00", "months": 1}, "overflow": "share"},
    {"name": "daily", "identity": "ip", "algorithm": "sliding_window", "limit": 10, "window": "1d",
     "calendar": {"zone": "+05:30"}}
  ]
}`
	rules := rulesOf(t, doc)
	if got := rules[0].Calendar; got != (store.Calendar{Offset: -5 * time.Hour, Months: 1}) || rules[0].Window != 0 ||
		rules[0].Overflow != concurrency.OverflowShare {
		t.Fatalf("monthly: %+v", rules[0])
	}
	if got := rules[1].Calendar; got != (store.Calendar{Offset: 5*time.Hour + 30*time.Minute}) || rules[1].Window != 24*time.Hour {
		t.Fatalf("daily: %+v", rules[1])
	}
	controllerOf(t, doc) // the rules build

	rule := func(body string) string {
		return "{\n  \"version\": 1,\n  \"rules\": [\n    {\"name\": \"r\", \"identity\": \"ip\", \"limit\": 5,\n" + body + "}\n  ]\n}\n"
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"zone", rule("     \"algorithm\": \"fixed_window\", \"window\": \"1d\",\n     \"calendar\": {\"zone\": \"EST\"}\n"),
			"t.json:6: rules[0].calendar.zone: zone must be UTC or an offset"},
		{"far zone", rule("     \"algorithm\": \"fixed_window\", \"window\": \"1d\",\n     \"calendar\": {\"zone\": \"+15:00\"}\n"),
			"t.json:6: rules[0].calendar.zone: must be within"},
		{"months", rule("     \"algorithm\": \"fixed_window\",\n     \"calendar\": {\"months\": 13}\n"),
			"t.json:6: rules[0].calendar.months: must be from 1 to 12"},
		{"months and window", rule("     \"algorithm\": \"fixed_window\", \"calendar\": {\"months\": 1},\n     \"window\": \"1d\"\n"),
			"t.json:6: rules[0].window: a window of 1 calendar months takes no window"},
		{"calendar on a log", rule("     \"algorithm\": \"sliding_log\", \"window\": \"1d\",\n     \"calendar\": {\"zone\": \"+01:00\"}\n"),
			"t.json:6: rules[0].calendar: applies only to fixed_window and sliding_window"},
		{"overflow", rule("     \"algorithm\": \"fixed_window\", \"window\": \"1d\",\n     \"overflow\": \"drop\"\n"),
			"t.json:6: rules[0].overflow: must be reject, share or prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.Parse("t.json", []byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v\nwant %q", err, tc.want)
			}
		})
	}
}

// TestQueueField: a global concurrency rule's waiting discipline is
// expressible in a file; a discipline without a queue is an error.
func TestQueueField(t *testing.T) {
	doc := `{
  "version": 1,
  "rules": [
    {"name": "inflight", "identity": "global", "algorithm": "concurrency", "limit": 8, "max_wait": "50ms",
     "queue": {"order": "adaptive_lifo", "codel": true, "reserve": 0.2}}
  ]
}`
	rules := rulesOf(t, doc)
	if q := rules[0].Queue; q.Order != queueing.AdaptiveLIFO || !q.CoDel || q.Reserve != 0.2 {
		t.Fatalf("queue %+v", q)
	}
	bad := strings.Replace(doc, `"max_wait": "50ms",`, "", 1)
	if _, err := policy.Parse("t.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "t.json:5: rules[0].queue: applies only") {
		t.Fatalf("queue without max_wait: %v", err)
	}
}

// TestWindowBelowTheMinimumIsAnErrorAtItsLine: a window too short to mean
// anything is reported at its line, not later by the store.
func TestWindowBelowTheMinimumIsAnErrorAtItsLine(t *testing.T) {
	doc := "{\n  \"version\": 1,\n  \"rules\": [\n    {\"name\": \"r\", \"identity\": \"ip\", \"limit\": 5, \"algorithm\": \"fixed_window\",\n     \"window\": \"15ns\"}\n  ]\n}\n"
	_, err := policy.Parse("t.json", []byte(doc))
	if err == nil || !strings.Contains(err.Error(), "t.json:5: rules[0].window: must be at least 1ms") {
		t.Fatalf("%v", err)
	}
}

// TestLLMBudgetInAFile: a per-tenant daily token budget, the estimate from
// a request header and the true cost from the response, in a few lines.
func TestLLMBudgetInAFile(t *testing.T) {
	doc := `{
  "version": 1,
  "cost": {"request_header": "X-Estimated-Tokens", "response_header": "X-Tokens-Used"},
  "rules": [
    {"name": "tokens-daily", "identity": "tenant", "algorithm": "fixed_window", "limit": 1000, "window": "1d"}
  ]
}`
	c := controllerOf(t, doc, shed.WithClient(func(*http.Request) shed.Client { return shed.Client{Tenant: "acme"} }))
	h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Tokens-Used", "300")
	}))
	for range 3 {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat", nil)
		r.Header.Set("X-Estimated-Tokens", "200")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat", nil)
	r.Header.Set("X-Estimated-Tokens", "200")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests { // 900 used by the true costs: 200 more do not fit
		t.Fatalf("a fourth call after 900 tokens used: %d, want 429", w.Code)
	}
	if _, err := policy.Parse("t.json", []byte(strings.Replace(doc, `"X-Tokens-Used"`, `"X Tokens"`, 1))); err == nil ||
		!strings.Contains(err.Error(), "cost.response_header") {
		t.Fatalf("a bad header name: %v", err)
	}
}

// TestExemptField: exemptions by network and path in a file; a bad one is
// an error at its line.
func TestExemptField(t *testing.T) {
	doc := `{
  "version": 1,
  "exempt": {"cidrs": ["10.0.0.0/8"], "paths": ["/healthz"]},
  "rules": [
    {"name": "ip", "identity": "ip", "algorithm": "fixed_window", "limit": 1, "window": "1h"}
  ]
}`
	c := controllerOf(t, doc)
	h := c.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))
	}
	if s := c.Stats(); s.Exempt != 3 {
		t.Fatalf("Exempt %d, want 3", s.Exempt)
	}
	bad := strings.Replace(doc, `"10.0.0.0/8"`, `"10.0.0.0"`, 1)
	if _, err := policy.Parse("t.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "t.json:3: exempt.cidrs[0]") {
		t.Fatalf("a bad network: %v", err)
	}
}

// TestSuspicionField: suspicion tightening in a file; a bad scale is an
// error at its line.
func TestSuspicionField(t *testing.T) {
	doc := `{
  "version": 1,
  "suspicion": {"capacity": 1000, "threshold": 0.25, "floor": 0.25},
  "rules": [
    {"name": "ip", "identity": "ip", "algorithm": "token_bucket", "limit": 8, "rate": {"count": 1, "per": "1h"}}
  ]
}`
	c := controllerOf(t, doc)
	h := c.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	admitted := 0
	for range 10 { // no User-Agent: suspicious at the default weights (0.3 > 0.25)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if w.Code == http.StatusOK {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("a client without a User-Agent: %d admitted, want 2 (a quarter of 8)", admitted)
	}
	bad := strings.Replace(doc, `"floor": 0.25`, `"floor": 2`, 1)
	if _, err := policy.Parse("t.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "t.json:3: suspicion") {
		t.Fatalf("a bad floor: %v", err)
	}
}

// rulesOf parses doc, which must be valid, and returns its rules.
func rulesOf(t *testing.T, doc string) []shed.Rule {
	t.Helper()
	p, err := policy.Parse("t.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := p.Rules()
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// controllerOf parses doc, which must be valid, and returns its Controller
// with opts, closed when the test ends.
func controllerOf(t *testing.T, doc string, opts ...shed.Option) *shed.Controller {
	t.Helper()
	p, err := policy.Parse("t.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
