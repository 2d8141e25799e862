//go:build !race

package shed

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestSteadyHeadersAllocateNothing: clients far from their limit, whose
// responses say the same figures, cost the middleware no allocation for
// their header values, not even one block in many (the race detector
// changes allocation, so it is off).
func TestSteadyHeadersAllocateNothing(t *testing.T) {
	for _, fields := range []HeaderFields{AllFields, DraftFields, LegacyFields} {
		clk := newFakeClock()
		c, err := New([]Rule{{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 1000,
			Rate: ratelimit.Per(1000, time.Second)}}, WithClock(clk.now), quiet(), WithHeaderFields(fields))
		if err != nil {
			t.Fatal(err)
		}
		reqs := make([]*http.Request, 8)
		for i := range reqs {
			reqs[i] = httptest.NewRequest(http.MethodGet, "/", nil)
			reqs[i].RemoteAddr = "10.1.0." + string(rune('1'+i)) + ":4000"
		}
		h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
		w := &discardWriter{h: http.Header{}}
		// One run answers 4 blocks' worth of responses; each request comes
		// a token's time after the last, so every bucket stays full.
		n := testing.AllocsPerRun(20, func() {
			for i := range 4 * slabBlocks {
				clk.add(time.Millisecond)
				clear(w.h)
				h.ServeHTTP(w, reqs[i%len(reqs)])
			}
		})
		if got := w.h[hXRemaining]; fields&LegacyFields != 0 && (len(got) != 1 || got[0] != "999") {
			t.Fatalf("X-RateLimit-Remaining %q, want 999: the buckets are not steady", got)
		}
		_ = c.Close()
		if n != 0 {
			t.Errorf("fields %d: %v allocations per %d steady responses", fields, n, 4*slabBlocks)
		}
	}
}

// TestPolicyFreeRejectionWritesAConstantBody: a rejection whose problem
// document names no policy (the server shedding load, a penalty, a quota
// of no single rule) writes a constant body: nothing is allocated but the
// two header values (Content-Type, X-Content-Type-Options). Building the
// document per rejection, quoting its constant strings, cost some 20,000
// instructions a 503, two thirds of all a rejection through a recorder.
func TestPolicyFreeRejectionWritesAConstantBody(t *testing.T) {
	w := &discardWriter{h: http.Header{}}
	for _, k := range []Kind{Shedding, Penalized, OverLimit} {
		d := Decision{Kind: k, rule: -1}
		if n := testing.AllocsPerRun(100, func() { clear(w.h); d.WriteRejection(w) }); n > 2 {
			t.Errorf("%v: %v allocations per rejection, want the 2 header values", k, n)
		}
	}
}
