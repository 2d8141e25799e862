//go:build !race

package shed

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
)

// TestMiddlewareAllocs: over a bare handler the middleware allocates at
// most 2 objects per request, for one IP limit + one global cap + one
// concurrency limit (the race detector changes allocation, so it is off).
func TestMiddlewareAllocs(t *testing.T) {
	t.Run("identities", func(t *testing.T) { middlewareAllocs(t, benchRules()) })
	// Composite keys read the route, a header and a caller's attribute:
	// no allocation more.
	t.Run("composite", func(t *testing.T) {
		middlewareAllocs(t, append(benchRules(), Rule{Name: "composite", Identity: Composite,
			Key: Key{"ip", "route", "header:X-Model", "attr:plan"}, Algorithm: TokenBucket, Limit: 1 << 30,
			Rate: concurrency.Per(1_000_000, time.Second)}), WithClient(func(*http.Request) Client {
			return Client{User: "u", Attributes: proPlan}
		}))
	})
}

var proPlan = []Attribute{{Name: "plan", Value: "pro"}}

func middlewareAllocs(t *testing.T, rules []Rule, opts ...Option) {
	c, err := New(rules, append(opts, quiet())...)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]*http.Request, 64)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/Items/"+string(rune('0'+i%10))+"/", nil)
		reqs[i].Header.Set("X-Model", "large")
		reqs[i].RemoteAddr = "10.1.0." + string(rune('0'+i%10)) + ":4000"
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	measure := func(h http.Handler) float64 {
		w := &discardWriter{h: http.Header{}}
		i := 0
		return testing.AllocsPerRun(1000, func() {
			clear(w.h)
			h.ServeHTTP(w, reqs[i%len(reqs)])
			i++
		})
	}
	bare, mw := measure(handler), measure(c.Middleware(handler))
	if mw-bare > 2 {
		t.Fatalf("middleware allocates %v per request, bare %v", mw, bare)
	}
	t.Logf("allocs per request: bare %v, middleware %v", bare, mw)
}
