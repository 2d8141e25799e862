//go:build !race

package shed

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestMiddlewareAllocs: over a bare handler the middleware allocates at
// most 2 objects per request, for one IP limit + one global cap + one
// concurrency limit (the race detector changes allocation, so it is off).
func TestMiddlewareAllocs(t *testing.T) {
	c, err := New(benchRules(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]*http.Request, 64)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/", nil)
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
