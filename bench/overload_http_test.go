package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/zeromicro/go-zero/core/load"
)

// cpuWork burns a fixed amount of CPU: the handler of
// BenchmarkOverloadHTTP, whose capacity is bounded by the machine's cores.
func cpuWork(rounds int) [32]byte {
	var sum [32]byte
	for range rounds {
		sum = sha256.Sum256(sum[:])
	}
	return sum
}

// overloadGuard wraps a handler with one implementation's admission control.
type overloadGuard struct {
	name string
	wrap func(b *testing.B, next http.Handler) http.Handler
}

func shedWith503(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
}

func overloadGuards() []overloadGuard {
	return []overloadGuard{
		{"none", func(_ *testing.B, next http.Handler) http.Handler { return next }},
		{"sluice", func(b *testing.B, next http.Handler) http.Handler {
			return adaptiveGuard(defaultLimiter(b, nil), next)
		}},
		// sluice-runtime adds the Go runtime signals (scheduler latency, GC,
		// heap): a CPU-bound server starves its goroutines before its handler
		// latency says so, since requests queue for the CPU in front of it.
		{"sluice-runtime", func(b *testing.B, next http.Handler) http.Handler {
			l := defaultLimiter(b, []adaptive.Option{adaptive.WithRuntimeThresholds(5*time.Millisecond, 0.25, 0.9)},
				adaptive.WithRuntimeSignals())
			return adaptiveGuard(l, next)
		}},
		{"gozero", func(_ *testing.B, next http.Handler) http.Handler {
			load.DisableLog()
			s := load.NewAdaptiveShedder()
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				p, err := s.Allow()
				if err != nil {
					shedWith503(w)
					return
				}
				defer p.Pass()
				next.ServeHTTP(w, r)
			})
		}},
		{"aegisbbr", func(_ *testing.B, next http.Handler) http.Handler {
			l := bbr.NewLimiter()
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				done, err := l.Allow()
				if err != nil {
					shedWith503(w)
					return
				}
				defer done(ratelimit.DoneInfo{})
				next.ServeHTTP(w, r)
			})
		}},
		{"failsafe", func(_ *testing.B, next http.Handler) http.Handler {
			l := adaptivelimiter.NewBuilder[any]().Build()
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				p, ok := l.TryAcquirePermit()
				if !ok {
					shedWith503(w)
					return
				}
				defer p.Record()
				next.ServeHTTP(w, r)
			})
		}},
	}
}

// overloadDuration is how long each implementation is driven;
// SLUICE_BENCH_OVERLOAD (a Go duration) overrides the default of 5 s.
func overloadDuration(b *testing.B) time.Duration {
	if s := os.Getenv("SLUICE_BENCH_OVERLOAD"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			b.Fatalf("SLUICE_BENCH_OVERLOAD=%q is not a positive duration", s)
		}
		return d
	}
	return 5 * time.Second
}

// BenchmarkOverloadHTTP is the real-time comparison of adaptive shedders: a
// CPU-bound handler served on loopback, driven open-loop (Poisson arrivals)
// at 5x its calibrated capacity with a 1 s client deadline, protected in turn
// by nothing, sluice's adaptive limit, go-zero's shedder, aegis BBR and
// failsafe-go's adaptive limiter. It reports goodput (answers within the
// deadline per second) and the p99 latency of those answers. Each
// sub-benchmark runs one load phase whatever b.N is; run it with
// -benchtime 1x. The load generator shares the machine's cores with the
// server, as a sidecar would; compare implementations within one run only.
func BenchmarkOverloadHTTP(b *testing.B) {
	const rounds = 100_000 // sha256 rounds per request: about 10 ms of CPU here
	d := overloadDuration(b)
	// Calibrate: CPU time of one request, so capacity = cores / cost.
	var costs []time.Duration
	for range 51 {
		t0 := time.Now()
		cpuWork(rounds)
		costs = append(costs, time.Since(t0))
	}
	slices.Sort(costs)
	capacity := float64(runtime.GOMAXPROCS(0)) / costs[len(costs)/2].Seconds()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sum := cpuWork(rounds)
		_, _ = w.Write(sum[:4])
	})
	for _, g := range overloadGuards() {
		b.Run(g.name, func(b *testing.B) {
			goodput, p99, shed := driveOverload(b, g.wrap(b, handler), 5*capacity, d, time.Second)
			b.ReportMetric(goodput, "goodput/s")
			b.ReportMetric(goodput/capacity, "goodput/capacity")
			b.ReportMetric(float64(p99)/float64(time.Millisecond), "p99-ms")
			b.ReportMetric(shed, "shed-frac")
		})
	}
}

// driveOverload serves h on loopback, sends Poisson arrivals at rate per
// second for d, and returns goodput, the p99 latency of good answers and the
// fraction shed.
func driveOverload(b *testing.B, h http.Handler, rate float64, d, deadline time.Duration) (goodput float64, p99 time.Duration, shedFrac float64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := fmt.Sprintf("http://%s/", ln.Addr())

	var (
		mu      sync.Mutex
		good    []time.Duration
		sent    int
		shedded atomic.Int64
		wg      sync.WaitGroup
		rng     = rand.New(rand.NewPCG(1, 2))
		start   = time.Now()
		next    = start
	)
	b.ResetTimer()
	for time.Since(start) < d {
		for now := time.Now(); !next.After(now); next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second))) {
			sent++
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := client.Do(req)
				if err != nil {
					return
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat := time.Since(t0)
				switch {
				case resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests:
					shedded.Add(1)
				case err == nil && resp.StatusCode == http.StatusOK && lat <= deadline:
					mu.Lock()
					good = append(good, lat)
					mu.Unlock()
				}
			})
		}
		time.Sleep(time.Until(next))
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(good)
	if len(good) > 0 {
		p99 = good[min(len(good)-1, len(good)*99/100)]
	}
	return float64(len(good)) / d.Seconds(), p99, float64(shedded.Load()) / float64(max(1, sent))
}

// adaptiveGuard serves next under l: an attempt l does not admit is shed
// with a 503, an admitted one reports success when next returns.
func adaptiveGuard(l *adaptive.Limiter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := l.TryAcquireAt(clock.Now(), adaptive.Request{})
		if err != nil {
			shedWith503(w)
			return
		}
		defer tok.Done(adaptive.Success)
		next.ServeHTTP(w, r)
	})
}
