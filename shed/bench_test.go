package shed

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/penalty"
	"github.com/sluicehq/sluice/ratelimit"
)

// discardWriter is a ResponseWriter whose header map is reused.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// WriteString is net/http's own writer's (io.StringWriter), which
// io.WriteString takes without copying the string.
func (w *discardWriter) WriteString(s string) (int, error) { return len(s), nil }
func (w *discardWriter) WriteHeader(int)                   {}

func benchRules() []Rule {
	return []Rule{
		{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 1 << 30, Rate: ratelimit.Per(1_000_000, time.Second)},
		{Name: "global", Algorithm: TokenBucket, Limit: 1 << 30, Rate: ratelimit.Per(1_000_000_000, time.Second)},
		{Name: "inflight", Algorithm: Concurrency, Limit: 1 << 20},
	}
}

func BenchmarkParts(b *testing.B) {
	c, err := New(benchRules(), quiet())
	if err != nil {
		b.Fatal(err)
	}
	ips := make([]netip.Addr, 1024)
	reqs := make([]*http.Request, 1024)
	for i := range ips {
		ips[i] = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		reqs[i] = httptest.NewRequest("GET", "/", nil)
		reqs[i].RemoteAddr = ips[i].String() + ":4000"
	}
	b.Run("decide", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, tok, _ := c.Decide(context.Background(), Attempt{IP: ips[i&1023]})
			tok.Done(Success)
		}
	})
	b.Run("peek", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, _ = c.Peek(context.Background(), Attempt{IP: ips[i&1023]})
		}
	})
	b.Run("peekrequest", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, _ = c.PeekRequest(reqs[i&1023])
		}
	})
	b.Run("clientip", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = c.reading.res.ClientIP(reqs[i&1023])
		}
	})
	b.Run("headers", func(b *testing.B) {
		_, tok, _ := c.Decide(context.Background(), Attempt{IP: ips[0]})
		d, _, _ := c.Decide(context.Background(), Attempt{IP: ips[0]})
		tok.Done(Success)
		h := http.Header{}
		b.ReportAllocs()
		for b.Loop() {
			d.WriteHeaders(h)
		}
	})
	b.Run("middleware", func(b *testing.B) {
		h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		w := &discardWriter{h: http.Header{}}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			h.ServeHTTP(w, reqs[i&1023])
		}
	})
	b.Run("bare", func(b *testing.B) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
		w := &discardWriter{h: http.Header{}}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			h.ServeHTTP(w, reqs[i&1023])
		}
	})
}

// BenchmarkOverflow compares a newcomer's decision while a flood holds the
// per-IP table: rejected outright (OverflowReject), and decided again on
// its network prefix (OverflowPrefix; two store calls).
func BenchmarkOverflow(b *testing.B) {
	for _, tc := range []struct {
		name     string
		overflow concurrency.Overflow
	}{{"reject", concurrency.OverflowReject}, {"prefix", OverflowPrefix}} {
		b.Run(tc.name, func(b *testing.B) {
			c, err := New([]Rule{{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 1 << 20,
				Rate: ratelimit.Per(1, time.Second), Capacity: 1024, Overflow: tc.overflow}}, quiet())
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			for i := range 4096 { // the flood
				_, tok, _ := c.Decide(context.Background(), Attempt{IP: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})})
				tok.Done(Success)
			}
			ips := make([]netip.Addr, 1024) // newcomers of 1,024 /24s
			for i := range ips {
				ips[i] = netip.AddrFrom4([4]byte{172, 16, byte(i >> 2), byte(i)})
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				d, tok, _ := c.Decide(context.Background(), Attempt{IP: ips[i&1023]})
				if d.Allowed {
					tok.Done(Success)
				}
			}
			if c.Stats().Rules[0].Overflowed == 0 {
				b.Fatal("no newcomer overflowed: the benchmark says nothing")
			}
		})
	}
}

// BenchmarkDecideGlobal: an admission through Decide and its Done under
// one Global rate rule that never rejects, serial and parallel. With
// "clock" Decide reads the clock, as a request pays it; with "now" each
// goroutine passes its own Attempt.Now, a millisecond on per decision, so
// that what is left is Decide's own work.
func BenchmarkDecideGlobal(b *testing.B) {
	rules := []struct {
		name string
		rule Rule
	}{
		{"bucket", Rule{Name: "global", Algorithm: TokenBucket, Limit: math.MaxInt32, Rate: ratelimit.Per(1_000_000_000, time.Second)}},
		{"window", Rule{Name: "global", Algorithm: FixedWindow, Limit: math.MaxInt32, Window: time.Hour}},
	}
	for _, rc := range rules {
		for _, given := range []bool{false, true} {
			name := rc.name + "/clock"
			if given {
				name = rc.name + "/now"
			}
			decide := func(c *Controller, now *int64) bool {
				var a Attempt
				if given {
					*now += int64(time.Millisecond)
					a.Now = *now
				}
				d, tok, err := c.Decide(context.Background(), a)
				tok.Done(Success)
				return err == nil && d.Allowed
			}
			b.Run(name+"/serial", func(b *testing.B) {
				c, err := New([]Rule{rc.rule}, quiet())
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				now := clock.Now()
				b.ReportAllocs()
				for b.Loop() {
					if !decide(c, &now) {
						b.Fatal("rejected below the cap")
					}
				}
			})
			b.Run(name+"/parallel", func(b *testing.B) {
				c, err := New([]Rule{rc.rule}, quiet())
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				b.ReportAllocs()
				// Not RunParallel: its workers' PB values often share a
				// cache line that every iteration writes, which doubled
				// the figure in some processes (see bench's inParallel).
				procs := runtime.GOMAXPROCS(0)
				var wg sync.WaitGroup
				for w := range procs {
					n := b.N / procs
					if w < b.N%procs {
						n++
					}
					wg.Go(func() {
						now := clock.Now()
						for range n {
							if !decide(c, &now) {
								b.Error("rejected below the cap")
								return
							}
						}
					})
				}
				wg.Wait()
			})
		}
	}
}

// BenchmarkMiddleware serves a request through Controller.Middleware to a
// handler that sets one header and answers 200, through a fresh
// httptest.ResponseRecorder, from 1,024 client addresses: on a per-IP
// rule and on a Global rule, with the rate-limit header fields and
// without (WithHeaders of a func that writes none). "bare" is the
// handler alone: what the others cost over it is the middleware's;
// "bare-5fields" the handler behind the five fields as constants, the
// floor under the cases with headers.
func BenchmarkMiddleware(b *testing.B) {
	reqs := make([]*http.Request, 1024)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/api/items", nil)
		reqs[i].RemoteAddr = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).String() + ":4000"
	}
	contentType := []string{"text/plain; charset=utf-8"}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = contentType
		w.WriteHeader(http.StatusOK)
	})
	serve := func(b *testing.B, h http.Handler) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, reqs[i&1023])
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: the benchmark must measure admissions", w.Code)
			}
		}
	}
	b.Run("bare", func(b *testing.B) { serve(b, handler) })
	b.Run("bare-5fields", func(b *testing.B) {
		// The handler behind the five rate-limit header fields the
		// middleware writes, as constants: what the fields alone cost
		// (the map inserts, the recorder's copy of them).
		policy, item := []string{`"global";q=1073741824;w=1074`}, []string{`"global";r=1073741823;t=1`}
		limit, remaining, reset := []string{"1073741824"}, []string{"1073741823"}, []string{"1764520001"}
		serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h[hRateLimitPolicy], h[hRateLimit] = policy, item
			h[hXLimit], h[hXRemaining], h[hXReset] = limit, remaining, reset
			handler.ServeHTTP(w, r)
		}))
	})
	for _, rc := range []struct {
		name string
		rule Rule
	}{
		{"ip", Rule{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 1 << 30, Rate: ratelimit.Per(1_000_000, time.Second)}},
		{"global", Rule{Name: "global", Algorithm: TokenBucket, Limit: 1 << 30, Rate: ratelimit.Per(1_000_000_000, time.Second)}},
	} {
		for _, headers := range []bool{true, false} {
			name := rc.name
			opts := []Option{quiet()}
			if !headers {
				name += "-noheaders"
				opts = append(opts, WithHeaders(func(http.Header, Decision) {}))
			}
			b.Run(name, func(b *testing.B) {
				c, err := New([]Rule{rc.rule}, opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				serve(b, c.Middleware(handler))
			})
		}
	}
}

// BenchmarkMiddlewareRejection serves requests that a full Global
// concurrency rule sheds (503, the default problem+json body) through a
// fresh httptest.ResponseRecorder: what saying no costs the middleware.
func BenchmarkMiddlewareRejection(b *testing.B) {
	c, err := New([]Rule{{Name: "inflight", Algorithm: Concurrency, Limit: 1}}, quiet())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	hold := make(chan struct{})
	entered := make(chan struct{})
	h := c.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(entered)
			<-hold
		}
	}))
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/hold", nil))
	<-entered
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.0.0.1:4000"
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusServiceUnavailable {
			b.Fatal(w.Code)
		}
	}
	close(hold)
}

// BenchmarkDecideKeyed1e6: Decide and Done of one per-IP token bucket
// rule over 10^6 client addresses, all seen before the timer starts and
// asked in a fixed random order; with WithPenalties, whose box holds every
// client (each struck once, none in a timeout), the penalty check's lookup
// comes first. Both lookups miss the caches: the per-key rule's entry is
// prefetched before the penalty check, so that the two misses overlap.
func BenchmarkDecideKeyed1e6(b *testing.B) {
	const n = 1_000_000
	ips := make([]netip.Addr, n)
	for i := range ips {
		ips[i] = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	}
	walk := make([]netip.Addr, n)
	for i, j := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
		walk[i] = ips[j]
	}
	for _, withPen := range []bool{false, true} {
		name := "plain"
		if withPen {
			name = "penalties"
		}
		b.Run(name, func(b *testing.B) {
			opts := []Option{quiet()}
			if withPen {
				box, err := penalty.NewBox(2*n, penalty.WithStrikes(3, time.Minute))
				if err != nil {
					b.Fatal(err)
				}
				for _, ip := range ips {
					box.Strike(string(appendIPKey(nil, ip)), 1)
				}
				opts = append(opts, WithPenalties(box, IP))
			}
			c, err := New([]Rule{{Name: "ip", Identity: IP, Algorithm: TokenBucket, Limit: 1 << 30,
				Rate: ratelimit.Per(1_000_000, time.Second), Capacity: 2 * n}}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			for _, ip := range ips {
				_, tok, err := c.Decide(ctx, Attempt{IP: ip})
				if err != nil {
					b.Fatal(err)
				}
				tok.Done(Success)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				d, tok, err := c.Decide(ctx, Attempt{IP: walk[i]})
				if err != nil || !d.Allowed {
					b.Fatalf("rejected below the limit: %+v %v", d, err)
				}
				tok.Done(Success)
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}
