//go:build !race

package shed

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
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
			Rate: ratelimit.Per(1_000_000, time.Second)}), WithClient(func(*http.Request) Client {
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

// TestPrefixOverflowAllocs: deciding a newcomer on its network prefix
// while a flood holds the per-IP table allocates nothing, admitted or
// shed.
func TestPrefixOverflowAllocs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		factor float64 // of the prefix limit: 4,000 tokens, or 1
		ip     netip.Addr
	}{
		{"admitted", 0, netip.MustParseAddr("2001:db8:1::1")},    // another /64 of one /48 each run
		{"shed", 0.001, netip.AddrFrom4([4]byte{10, 9, 0, 200})}, // the flood's spent /24
	} {
		c, err := New([]Rule{{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 1000, Rate: ratelimit.Per(1, time.Hour),
			Capacity: 16, Overflow: OverflowPrefix, Prefix: Prefix{Factor: tc.factor}}}, quiet())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 64 { // the flood fills the table, then its prefix
			d, tok, _ := c.Decide(ctx, Attempt{IP: netip.AddrFrom4([4]byte{10, 9, 0, byte(i)})})
			if d.Allowed {
				tok.Done(Success)
			}
		}
		i := 0
		n := testing.AllocsPerRun(200, func() {
			ip := tc.ip
			if tc.name == "admitted" {
				b := ip.As16()
				b[6], b[7] = byte(i>>8), byte(i)
				ip = netip.AddrFrom16(b)
			}
			i++
			d, tok, err := c.Decide(ctx, Attempt{IP: ip})
			if err != nil || d.Allowed != (tc.name == "admitted") {
				t.Fatalf("%s: decision %+v, %v", tc.name, d, err)
			}
			if d.Allowed {
				tok.Done(Success)
			}
		})
		if s := c.Stats(); s.Rules[0].OverflowPrefix == 0 {
			t.Fatalf("%s: no decision on a prefix: the test says nothing", tc.name)
		}
		_ = c.Close()
		if n != 0 {
			t.Fatalf("%s on a prefix: %v allocations per decision", tc.name, n)
		}
	}
}

// TestGlobalConcurrencyDecideAllocs: an admission through Decide and its
// Done under a Global Concurrency rule allocates nothing, on the single
// word and on the sharded semaphore.
func TestGlobalConcurrencyDecideAllocs(t *testing.T) {
	limits := map[string]int64{"single": 16}
	if from := shardedFrom(); from > 0 {
		limits["sharded"] = from
	}
	for name, limit := range limits {
		t.Run(name, func(t *testing.T) {
			c, err := New([]Rule{{Name: "inflight", Algorithm: Concurrency, Limit: limit}}, quiet())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if sharded := c.set.Load().rules[0].sem.sharded != nil; sharded != (name == "sharded") {
				t.Fatalf("limit %d: sharded %v", limit, sharded)
			}
			ctx := context.Background()
			n := testing.AllocsPerRun(1000, func() {
				d, tok, err := c.Decide(ctx, Attempt{})
				if err != nil || !d.Allowed {
					t.Fatalf("rejected below the limit: %+v, %v", d, err)
				}
				tok.Done(Success)
			})
			if n != 0 {
				t.Fatalf("%v allocations per decision", n)
			}
		})
	}
}

// TestPeekAllocs: a peek of one IP limit, one global cap and one
// concurrency limit allocates nothing, through Peek and PeekRequest.
func TestPeekAllocs(t *testing.T) {
	c, err := New(benchRules(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a := Attempt{IP: netip.AddrFrom4([4]byte{10, 1, 0, 7})}
	r := httptest.NewRequest("GET", "/items/7", nil)
	r.RemoteAddr = "10.1.0.7:4000"
	if _, err := c.Peek(ctx, a); err != nil { // the key exists from here on
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if d, err := c.Peek(ctx, a); err != nil || !d.Allowed || d.Rule == "" {
			t.Fatalf("peek: %+v, %v", d, err)
		}
	}); n != 0 {
		t.Fatalf("Peek allocates %v per call", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if d, err := c.PeekRequest(r); err != nil || !d.Allowed {
			t.Fatalf("peek: %+v, %v", d, err)
		}
	}); n != 0 {
		t.Fatalf("PeekRequest allocates %v per call", n)
	}
}
