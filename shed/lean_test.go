package shed

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/ratelimit"
	"pgregory.net/rapid"
)

// TestMiddlewareShortPathServesAsTheGeneralPath: the middleware's short
// path for requests on plans of Global rules (decideLean) serves exactly
// as the general one does. Two Controllers on one clock and one history
// of requests (of every method class, from IPv4, IPv6, CGNAT, unparsable
// and trusted-proxy peers, answered 200, 401, 404, 503 or with nothing
// written, some saying what they cost), clock moves and reloads, one of
// them with an Observer (which sends every request down the general
// path), give the same statuses, header fields and bodies, the same
// decisions to their hooks, the same early warnings and the same Stats.
func TestMiddlewareShortPathServesAsTheGeneralPath(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rules, def := drawGlobalRules(t, 1)
		keysOnIP := rapid.Bool().Draw(t, "keyed")
		if keysOnIP { // per-IP rules alone: decideKeyed
			rules, def = drawIPRules(t), ""
		}
		if rapid.Bool().Draw(t, "queued") { // a plan that is not local: the general path for both
			rules = append(rules, Rule{Name: "queued", Algorithm: Concurrency, Limit: 2, MaxWait: time.Second,
				Category: rapid.SampledFrom([]string{"", "read"}).Draw(t, "queuedCategory")})
		}
		if rapid.Bool().Draw(t, "perIP") { // a per-key rule: the general path for both
			keysOnIP = true
			rules = append(rules, Rule{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 3, Rate: ratelimit.Per(1, time.Second)})
		}
		fields := rapid.SampledFrom([]HeaderFields{AllFields, DraftFields, LegacyFields}).Draw(t, "fields")
		dry := rapid.Bool().Draw(t, "dryRun")
		actual := rapid.Bool().Draw(t, "actualCost")
		res, err := fingerprint.NewResolver(fingerprint.WithTrustedProxies(netip.MustParsePrefix("10.9.0.0/16")))
		if err != nil {
			t.Fatal(err)
		}
		clk := newFakeClock()
		type side struct {
			c     *Controller
			h     http.Handler
			hooks []Decision
			early []EarlyWarning
		}
		var sides [2]*side
		for k := range sides {
			s := &side{}
			opts := []Option{WithClock(clk.now), quiet(), WithResolver(res), WithHeaderFields(fields),
				WithDecisionHook(func(d Decision) { s.hooks = append(s.hooks, d) }),
				WithEarlyWarning(func(w EarlyWarning) { s.early = append(s.early, w) })}
			if def != "" {
				opts = append(opts, WithDefaultTier(def))
			}
			if dry {
				opts = append(opts, WithDryRun())
			}
			if actual {
				opts = append(opts, WithActualCost(func(h http.Header) (int64, bool) {
					n, err := strconv.ParseInt(h.Get("X-Cost"), 10, 64)
					return n, err == nil
				}))
			}
			if k == 1 {
				opts = append(opts, WithObserver(nopObserver{}))
			}
			c, err := New(rules, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if k == 1 {
				c.wallAnchor = sides[0].c.wallAnchor // the same wall clock: the same X-RateLimit-Reset
			}
			s.c = c
			s.h = c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if v := r.Header.Get("X-Cost"); v != "" {
					w.Header().Set("X-Cost", v)
				}
				switch st := r.Header.Get("X-Status"); st {
				case "":
				default:
					n, _ := strconv.Atoi(st)
					w.WriteHeader(n)
				}
			}))
			sides[k] = s
		}
		lean, general := sides[0], sides[1]
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 7:
				method := rapid.SampledFrom([]string{"GET", "HEAD", "POST", "DELETE", "OPTIONS"}).Draw(t, "method")
				peer := rapid.SampledFrom([]string{"192.0.2.1:1234", "192.0.2.2:80", "100.64.0.7:5", "[2001:db8::1]:443",
					"not an address", "10.9.0.1:8080"}).Draw(t, "peer")
				xff := rapid.SampledFrom([]string{"", "", "198.51.100.4"}).Draw(t, "xff")
				status := rapid.SampledFrom([]string{"", "200", "401", "404", "503"}).Draw(t, "status")
				cost := rapid.SampledFrom([]string{"", "0", "2", "5"}).Draw(t, "cost")
				var recs [2]*httptest.ResponseRecorder
				for k, s := range sides {
					r := httptest.NewRequest(method, "/items", nil)
					r.RemoteAddr = peer
					if xff != "" {
						r.Header.Set("X-Forwarded-For", xff)
					}
					if status != "" {
						r.Header.Set("X-Status", status)
					}
					if cost != "" {
						r.Header.Set("X-Cost", cost)
					}
					recs[k] = httptest.NewRecorder()
					s.h.ServeHTTP(recs[k], r)
				}
				a, b := recs[0], recs[1]
				if a.Code != b.Code || !reflect.DeepEqual(a.Header(), b.Header()) || a.Body.String() != b.Body.String() {
					t.Fatalf("%s from %s (xff %q, status %q, cost %q):\nlean    %d %v %q\ngeneral %d %v %q",
						method, peer, xff, status, cost, a.Code, a.Header(), a.Body, b.Code, b.Header(), b.Body)
				}
			case op < 8:
				clk.add(time.Duration(rapid.IntRange(1, 1500).Draw(t, "ms")) * time.Millisecond)
			default:
				scale := rapid.Int64Range(1, 3).Draw(t, "scale")
				reload := make([]Rule, len(rules))
				for i := range rules {
					reload[i] = rules[i]
					reload[i].Limit = rules[i].Limit * scale
				}
				for _, s := range sides {
					if err := s.c.Reload(Config{Rules: reload}); err != nil {
						t.Fatal(err)
					}
				}
			}
			a, b := lean.c.Stats(), general.c.Stats()
			if !keysOnIP {
				// The lean side reads a peer's address only for a plan
				// that is not local (the queued rule's): it counts
				// unknown peers and proxies without a header there
				// alone; the general side (an Observer) reads every one.
				if a.UnknownPeers > b.UnknownPeers || a.ProxyWithoutHeader > b.ProxyWithoutHeader {
					t.Fatalf("the lean side counted more peers: unknown %d/%d, proxy %d/%d",
						a.UnknownPeers, b.UnknownPeers, a.ProxyWithoutHeader, b.ProxyWithoutHeader)
				}
				a.UnknownPeers, a.ProxyWithoutHeader = b.UnknownPeers, b.ProxyWithoutHeader
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("stats differ:\nlean    %+v\ngeneral %+v", a, b)
			}
		}
		if len(lean.hooks) != len(general.hooks) {
			t.Fatalf("hooks %d/%d", len(lean.hooks), len(general.hooks))
		}
		for i := range lean.hooks {
			if a, b := comparable(lean.c, lean.hooks[i]), comparable(general.c, general.hooks[i]); !reflect.DeepEqual(a, b) {
				t.Fatalf("hook %d: lean %+v, general %+v", i, a, b)
			}
		}
		if !reflect.DeepEqual(lean.early, general.early) {
			t.Fatalf("early warnings: lean %+v, general %+v", lean.early, general.early)
		}
	})
}

// drawIPRules draws one to three per-IP rules of every algorithm, of small
// limits, some in dry-run, counting some statuses, with their own CGNAT
// factor or the default.
func drawIPRules(t *rapid.T) []Rule {
	rules := make([]Rule, rapid.IntRange(1, 3).Draw(t, "ipRules"))
	for i := range rules {
		r := Rule{
			Name:        fmt.Sprintf("ip%d", i),
			Identity:    IP,
			Algorithm:   rapid.SampledFrom([]Algorithm{TokenBucket, FixedWindow, SlidingWindow, SlidingLog, Concurrency}).Draw(t, "ipAlgorithm"),
			Limit:       rapid.Int64Range(1, 4).Draw(t, "ipLimit"),
			DryRun:      rapid.Bool().Draw(t, "ipDry"),
			CGNATFactor: rapid.SampledFrom([]float64{0, 1, 2}).Draw(t, "cgnatFactor"),
		}
		switch r.Algorithm {
		case TokenBucket:
			r.Rate = ratelimit.Per(2, time.Second)
		case Concurrency:
			r.LeaseTTL = time.Minute
		default:
			r.Window = time.Second
		}
		if r.Algorithm != Concurrency {
			r.Count = rapid.SampledFrom([]Count{CountAll, CountAll, CountFailures, CountAuthFailures}).Draw(t, "ipCount")
		}
		rules[i] = r
	}
	return rules
}

// TestMiddlewareDecidesGlobalRulesOnTheShortPath: a request from an IPv4
// peer on Global rules that never wait is decided by decideLean, which
// leaves the attempt's ask unwritten (bare); on a per-IP rule, or with
// an Observer, it takes the general path.
func TestMiddlewareDecidesGlobalRulesOnTheShortPath(t *testing.T) {
	global := Rule{Name: "global", Algorithm: TokenBucket, Limit: 10, Rate: ratelimit.Per(1, time.Second)}
	perIP := Rule{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 10, Rate: ratelimit.Per(1, time.Second)}
	for _, tc := range []struct {
		name  string
		rules []Rule
		opts  []Option
		bare  bool
	}{
		{"global", []Rule{global}, nil, true},
		{"per-IP", []Rule{global, perIP}, nil, false},
		{"observer", []Rule{global}, []Option{WithObserver(nopObserver{})}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.rules, append(tc.opts, quiet())...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			m := c.Middleware(http.HandlerFunc(ok)).(*middleware)
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "192.0.2.1:1234"
			var ip fingerprint.ClientIP // ServeHTTP's: read before decide only off the lean path
			read := !m.lean
			if read {
				ip = c.reading.res.ClientIP(r)
			}
			a := c.get()
			var d Decision
			if err := m.decide(r.Context(), a, r, &ip, read, &d); err != nil || !d.Allowed {
				t.Fatalf("%+v, %v", d, err)
			}
			if a.bare != tc.bare || tc.bare && !reflect.DeepEqual(a.ask, Attempt{}) {
				t.Fatalf("bare %v (want %v), ask %+v", a.bare, tc.bare, a.ask)
			}
			c.end(a, 0, Success, http.StatusOK)
			c.put(a)
		})
	}
}
