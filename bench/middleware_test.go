package bench

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/bench/peers"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// middlewareClients is how many client addresses the pre-built requests
// come from.
const middlewareClients = 4096

// middlewareWarmClients is how many client addresses
// BenchmarkMiddlewareWarm's requests come from: few enough that every
// request and every key stays in the cache.
const middlewareWarmClients = 16

// middlewareRequests builds one GET per client address, for n clients.
func middlewareRequests(n int) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, "/api/items", nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:%d", i>>16&255, i>>8&255, i&255, 40000+i%20000)
		reqs[i] = r
	}
	return reqs
}

// The rule every implementation enforces is peers' (a per-IP limit no
// request of the benchmark reaches), and the benchmark checks that every
// response was a 200.

type middlewareImpl struct {
	name string
	// new returns the middleware and a function that releases what it
	// started (and, for sluice, checks that every client was keyed apart).
	new func(b *testing.B) (func(http.Handler) http.Handler, func())
}

// sluiceDone closes c after checking, when the run was long enough to
// reach every one of its clients, that its per-IP rule holds one key per
// client.
func sluiceDone(b *testing.B, c *shed.Controller, clients int) func() {
	return func() {
		s := c.Stats()
		if n := s.Rules[0].Table.Entries; b.N >= 4*clients && n != int64(clients) {
			b.Errorf("the per-IP rule holds %d keys, want %d", n, clients)
		}
		if s.Inflight != 0 {
			b.Errorf("%d permits still held", s.Inflight)
		}
		_ = c.Close()
	}
}

// middlewareImpls are the cases of a benchmark whose requests come from
// clients addresses.
func middlewareImpls(clients int) []middlewareImpl {
	return []middlewareImpl{
		{"bare", func(b *testing.B) (func(http.Handler) http.Handler, func()) {
			return func(h http.Handler) http.Handler { return h }, func() {}
		}},
		{"bare-5fields", func(b *testing.B) (func(http.Handler) http.Handler, func()) {
			// Not a limiter: the bare handler plus the five rate-limit
			// header fields sluice writes, as constants (no formatting, no
			// allocation). What the fields alone cost in this harness (the
			// map inserts and the recorder's copy of them): the floor under
			// any middleware that writes them.
			policy, item := []string{`"ip";q=1073741824;w=1074`}, []string{`"ip";r=1073741823;t=1`}
			limit, remaining, reset := []string{"1073741824"}, []string{"1073741823"}, []string{"1764520001"}
			return func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					h := w.Header()
					h["Ratelimit-Policy"], h["Ratelimit"] = policy, item
					h["X-Ratelimit-Limit"], h["X-Ratelimit-Remaining"], h["X-Ratelimit-Reset"] = limit, remaining, reset
					next.ServeHTTP(w, r)
				})
			}, func() {}
		}},
		{"bare-3fields", func(b *testing.B) (func(http.Handler) http.Handler, func()) {
			// The floor under the like-for-like cases (sluice-legacy and the
			// peers, which write these three fields and no others): the bare
			// handler plus X-RateLimit-Limit, -Remaining and -Reset as
			// constants.
			limit, remaining, reset := []string{"1073741824"}, []string{"1073741823"}, []string{"1764520001"}
			return func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					h := w.Header()
					h["X-Ratelimit-Limit"], h["X-Ratelimit-Remaining"], h["X-Ratelimit-Reset"] = limit, remaining, reset
					next.ServeHTTP(w, r)
				})
			}, func() {}
		}},
		{"sluice", func(b *testing.B) (func(http.Handler) http.Handler, func()) {
			c, err := shed.New([]shed.Rule{
				peers.SluiceIPRule(2 * middlewareClients),
			})
			if err != nil {
				b.Fatal(err)
			}
			return c.Middleware, sluiceDone(b, c, clients)
		}},
		{"sluice-layered", func(b *testing.B) (func(http.Handler) http.Handler, func()) {
			// One IP limit + one global cap + one concurrency limit: the
			// rule set of the hot-path budget.
			c, err := shed.New([]shed.Rule{
				peers.SluiceIPRule(2 * middlewareClients),
				{Name: "global", Algorithm: shed.TokenBucket, Limit: peers.PerIPBurst,
					Rate: ratelimit.Per(1_000_000_000, time.Second)},
				{Name: "inflight", Algorithm: shed.Concurrency, Limit: 1 << 20},
			})
			if err != nil {
				b.Fatal(err)
			}
			return c.Middleware, sluiceDone(b, c, clients)
		}},
		{"sluice-draining", func(b *testing.B) (func(http.Handler) http.Handler, func()) {
			// The per-IP rule refilling a token every 30 s (so that no
			// bucket fills up again, even under a slow profiler), client i
			// charged i%7 times first: every response says other figures
			// than the one before it (another client, another Remaining), so
			// that no header value is shared (in the sluice case every
			// client's bucket is full and the figures repeat).
			c, err := shed.New([]shed.Rule{
				{Name: "ip", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: 1 << 24,
					Rate: ratelimit.Per(1, 30*time.Second), Capacity: 2 * middlewareClients},
			})
			if err != nil {
				b.Fatal(err)
			}
			h := c.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			var remaining [2]string
			for i, r := range middlewareRequests(clients) {
				for range i%7 + 1 {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if i < len(remaining) {
						remaining[i] = w.Header().Get("X-Ratelimit-Remaining")
					}
				}
			}
			if remaining[0] == remaining[1] {
				b.Fatalf("two clients in a row both have %s remaining: the case would share header values", remaining[0])
			}
			return c.Middleware, sluiceDone(b, c, clients)
		}},
		{"sluice-legacy", func(b *testing.B) (func(http.Handler) http.Handler, func()) {
			// The header fields the peers write (X-RateLimit-Limit,
			// -Remaining, -Reset) and no others: the like-for-like figure.
			c, err := shed.New([]shed.Rule{
				peers.SluiceIPRule(2 * middlewareClients),
			}, shed.WithHeaderFields(shed.LegacyFields))
			if err != nil {
				b.Fatal(err)
			}
			return c.Middleware, sluiceDone(b, c, clients)
		}},
		{"sluice-noheaders", func(b *testing.B) (func(http.Handler) http.Handler, func()) {
			// Not comparable with the others (no rate-limit headers): the
			// decision path alone, to show what the five header fields
			// cost (and what ResponseRecorder's header snapshot adds).
			c, err := shed.New([]shed.Rule{
				peers.SluiceIPRule(2 * middlewareClients),
			}, shed.WithHeaders(func(http.Header, shed.Decision) {}))
			if err != nil {
				b.Fatal(err)
			}
			return c.Middleware, sluiceDone(b, c, clients)
		}},
		{"httprate", func(b *testing.B) (func(http.Handler) http.Handler, func()) {
			return peerMiddleware(b, peers.HTTPRate(), nil)
		}},
		{"throttled", func(b *testing.B) (func(http.Handler) http.Handler, func()) {
			m, err := peers.Throttled()
			return peerMiddleware(b, m, err)
		}},
		{"go-limiter", func(b *testing.B) (func(http.Handler) http.Handler, func()) {
			m, err := peers.GoLimiter()
			return peerMiddleware(b, m, err)
		}},
	}
}

// peerMiddleware is the case of a peer's middleware.
func peerMiddleware(b *testing.B, m peers.Middleware, err error) (func(http.Handler) http.Handler, func()) {
	if err != nil {
		b.Fatal(err)
	}
	return m.Wrap, func() { _ = m.Close() }
}

// BenchmarkMiddleware measures what each middleware adds to a handler
// that only answers 200, on the same per-IP rule, with requests from
// middlewareClients addresses served in parallel through
// httptest.ResponseRecorder (whose cost is in every figure, bare
// included). Its requests and keys do not all fit in the cache, as in a
// server with many clients: each middleware's figure holds the cache
// misses of reading a request the bare handler never reads.
func BenchmarkMiddleware(b *testing.B) { benchmarkMiddleware(b, middlewareClients) }

// BenchmarkMiddlewareWarm is BenchmarkMiddleware with requests from
// middlewareWarmClients addresses, every one of them and its key in the
// cache: what each middleware adds in work alone.
func BenchmarkMiddlewareWarm(b *testing.B) { benchmarkMiddleware(b, middlewareWarmClients) }

func benchmarkMiddleware(b *testing.B, clients int) {
	reqs := middlewareRequests(clients)
	// The handler sets one header, as real handlers do (Content-Type), so
	// that the header map is allocated in every case and the figures
	// compare what the middlewares add, not whether a map exists.
	contentType := []string{"text/plain; charset=utf-8"}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = contentType
		w.WriteHeader(http.StatusOK)
	})
	for _, impl := range middlewareImpls(clients) {
		b.Run(impl.name, func(b *testing.B) {
			mw, stop := impl.new(b)
			defer stop()
			h := mw(handler)
			serveAllOK(b, h, reqs)
		})
	}
}

// serveAllOK serves reqs through h in parallel (each goroutine from a
// random one on, in turn) with allocations reported and the CPU time per
// request as cpu-ns/op, all threads and the GC included: on a shared
// machine it is steadier than wall time. It fails unless every response is
// 200, so that the benchmark measures admissions.
func serveAllOK(b *testing.B, h http.Handler, reqs []*http.Request) {
	var bad atomic.Int64
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	inParallel(b, 1, func(_, n int) {
		i := rand.IntN(len(reqs))
		for range n {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, reqs[i])
			if w.Code != http.StatusOK {
				bad.Add(1)
			}
			if i++; i == len(reqs) {
				i = 0
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	if n := bad.Load(); n > 0 {
		b.Fatalf("%d responses were not 200: the benchmark must measure admissions", n)
	}
}

// processCPU returns the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
