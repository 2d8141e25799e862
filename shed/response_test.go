package shed

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"pgregory.net/rapid"
)

// wantHeaders returns the rate-limit header fields a response decided by
// d must carry, formatted the plain way (strconv), for a plan of the one
// rate rule r and the fields given.
func wantHeaders(r Rule, fields HeaderFields, d Decision) http.Header {
	h := http.Header{}
	draft, legacy := fields&DraftFields != 0, fields&LegacyFields != 0
	if draft {
		h[hRateLimitPolicy] = []string{policyField([]quotaPolicy{r.policy()})}
	}
	if d.rule >= 0 {
		if draft {
			h[hRateLimit] = []string{`"` + r.Name + `";r=` + strconv.FormatInt(max(0, d.Remaining), 10) +
				";t=" + strconv.FormatInt(ceilSeconds(d.Reset), 10)}
		}
		if legacy {
			h[hXLimit] = []string{strconv.FormatInt(r.Limit, 10)}
			h[hXRemaining] = []string{strconv.FormatInt(max(0, d.Remaining), 10)}
			h[hXReset] = []string{strconv.FormatInt(ceilSeconds(time.Duration(max(0, d.wall+int64(d.Reset)))), 10)}
		}
	}
	if d.Warning {
		h[hXWarning] = []string{`quota "` + d.WarningRule + `" is past its soft limit`}
	}
	if !d.Allowed && d.RetryAfter != ratelimit.Never {
		h[hRetryAfter] = []string{strconv.FormatInt(max(1, ceilSeconds(d.RetryAfter)), 10)}
	}
	return h
}

// rateHeaders returns the rate-limit header fields of h.
func rateHeaders(h http.Header) http.Header {
	out := http.Header{}
	for _, k := range []string{hRateLimitPolicy, hRateLimit, hXLimit, hXRemaining, hXReset, hXWarning, hRetryAfter} {
		if v, ok := h[k]; ok {
			out[k] = slices.Clone(v)
		}
	}
	return out
}

// TestMiddlewareHeadersSayTheirDecision: every response the middleware
// answers carries the header fields of its own decision, byte for byte
// what plain formatting gives, and keeps them after later responses were
// answered (values shared between responses never change, also when a
// handler adds to a field), for any sequence of clients, clock steps and
// header field sets.
func TestMiddlewareHeadersSayTheirDecision(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rule := Rule{Name: "ip", Identity: IP, Algorithm: TokenBucket,
			Limit: rapid.Int64Range(1, 20).Draw(t, "limit"), SoftLimit: 0.5,
			Rate: ratelimit.Per(rapid.Int64Range(1, 50).Draw(t, "rate"), time.Second)}
		fields := rapid.SampledFrom([]HeaderFields{AllFields, DraftFields, LegacyFields}).Draw(t, "fields")
		clk := newFakeClock()
		var last Decision
		c, err := New([]Rule{rule}, WithClock(clk.now), quiet(), WithHeaderFields(fields),
			WithDecisionHook(func(d Decision) { last = d }))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		// A handler told to add a value to each field, as Header.Add does.
		h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Append") != "" {
				for k := range rateHeaders(w.Header()) {
					w.Header().Add(k, "appended")
				}
			}
			ok(w, r)
		}))
		type answer struct {
			w    *httptest.ResponseRecorder
			want http.Header
		}
		var answers []answer
		steps := []time.Duration{0, 0, time.Millisecond, 37 * time.Millisecond, 400 * time.Millisecond, time.Second, 3 * time.Second}
		for range rapid.IntRange(1, 60).Draw(t, "requests") {
			clk.add(rapid.SampledFrom(steps).Draw(t, "step"))
			ip := rapid.SampledFrom([]string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}).Draw(t, "client")
			add := rapid.Bool().Draw(t, "append")
			w := send(h, ip, func(r *http.Request) {
				if add {
					r.Header.Set("X-Append", "1")
				}
			})
			want := wantHeaders(rule, fields, last)
			if add && last.Allowed {
				for k := range want {
					want[k] = append(want[k], "appended")
				}
			}
			if got := rateHeaders(w.Header()); !equalHeaders(got, want) {
				t.Fatalf("response to %s (decision %+v):\n got %v\nwant %v", ip, last, got, want)
			}
			answers = append(answers, answer{w, want})
		}
		for i, a := range answers {
			if got := rateHeaders(a.w.Header()); !equalHeaders(got, a.want) {
				t.Fatalf("response %d changed after later ones:\n got %v\nwant %v", i, got, a.want)
			}
		}
	})
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestProblemDocumentsAreJSON: the constant problem documents are the
// JSON that quoting their strings gives (strconv.AppendQuote, as they were
// built per rejection before), whole and naming a policy, for every kind.
func TestProblemDocumentsAreJSON(t *testing.T) {
	quoted := func(k Kind, typ, title, detail, policy string) string {
		status := k.StatusCode()
		if k == Admitted {
			status = http.StatusServiceUnavailable
		}
		b := strconv.AppendQuote([]byte(`{"type":`), typ)
		b = strconv.AppendQuote(append(b, `,"title":`...), title)
		b = strconv.AppendInt(append(b, `,"status":`...), int64(status), 10)
		b = strconv.AppendQuote(append(b, `,"detail":`...), detail)
		if policy != "" {
			b = append(strconv.AppendQuote(append(b, `,"violated-policies":[`...), policy), ']')
		}
		return string(append(b, "}\n"...))
	}
	for _, tc := range []struct {
		k                  Kind
		typ, title, detail string
	}{
		{OverLimit, problemQuota, "Request quota exceeded", "The client has used up a quota of this service; retry after the time given by Retry-After."},
		{Penalized, problemAbuse, "Abnormal usage detected", "The client is temporarily blocked after repeated violations; retry after the time given by Retry-After."},
		{Shedding, problemCapacity, "Temporarily reduced capacity", "The service is shedding load to protect itself; retry after the time given by Retry-After."},
		{Admitted, problemCapacity, "Temporarily reduced capacity", "The service is shedding load to protect itself; retry after the time given by Retry-After."},
	} {
		if _, whole := problemDoc(tc.k); whole != quoted(tc.k, tc.typ, tc.title, tc.detail, "") {
			t.Errorf("%v: %q, want %q", tc.k, whole, quoted(tc.k, tc.typ, tc.title, tc.detail, ""))
		}
		for _, policy := range []string{"burst", "per-ip daily"} {
			if got, want := string(problemBody(tc.k, policy)), quoted(tc.k, tc.typ, tc.title, tc.detail, policy); got != want {
				t.Errorf("%v naming %q: %q, want %q", tc.k, policy, got, want)
			}
		}
	}
}
