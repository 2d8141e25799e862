// Command client shows sluice on the calling side. It starts a fake
// third-party API on loopback that publishes a limit (20 requests per
// second, bursts of 5, per API key), enforces it with 429 and Retry-After,
// and reports its quota in X-RateLimit-* headers. Then it calls the API
// twice with the same eager clients: once with a plain http.Client, once
// through upstream.Transport (pacing to 90% of the published limit) behind a
// upstream.RetryTransport (retries within a 10% budget), and prints what each
// did: calls, waits, and the 429s received (zero through the Transport).
//
//	go run ./examples/client
//	go run ./examples/client -addr 127.0.0.1:8089 -requests 100
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/upstream"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:0", "loopback address for the fake API (port 0: any free port)")
	limit := flag.Int64("limit", 20, "the API's published limit, requests per second")
	burst := flag.Int64("burst", 5, "the API's published burst")
	requests := flag.Int("requests", 60, "requests per run")
	clients := flag.Int("clients", 8, "concurrent callers")
	flag.Parse()
	if *limit <= 0 || *burst <= 0 || *requests <= 0 || *clients <= 0 {
		return errors.New("limit, burst, requests and clients must be positive")
	}

	api := newFakeAPI(ratelimit.Per(*limit, time.Second), *burst)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	url := "http://" + ln.Addr().String() + "/v1/things"
	fmt.Printf("fake API on %s: %d requests/s, bursts of %d, per API key\n\n", ln.Addr(), *limit, *burst)

	base := &http.Transport{}
	defer base.CloseIdleConnections()

	// Run 1: a plain client, as fast as it can.
	plain := drive(&http.Client{Transport: base}, url, "key-plain", *requests, *clients)
	fmt.Printf("plain http.Client:  %d calls in %v: %d ok, %d answered 429\n",
		plain.calls, plain.took.Round(time.Millisecond), plain.ok, plain.got429)

	// Run 2: the same callers through the Transport.
	// A pacer (no bursts) at 90% of the limit keeps the API's bucket near
	// full, so the quota it reports never runs out.
	paced, err := upstream.NewTransport(base, ratelimit.Per(*limit, time.Second),
		upstream.WithMaxWait(30*time.Second))
	if err != nil {
		return err
	}
	retrying, err := upstream.NewRetryTransport(paced)
	if err != nil {
		return err
	}
	good := drive(&http.Client{Transport: retrying}, url, "key-paced", *requests, *clients)
	s, r := paced.Stats(), retrying.Stats()
	fmt.Printf("through Transport:  %d calls in %v: %d ok, %d answered 429\n",
		good.calls, good.took.Round(time.Millisecond), good.ok, good.got429)
	fmt.Printf("  sent %d, waited for a turn %d times (%v in all, %v on average), 429s received %d, retries %d\n",
		s.Sent, s.Delayed, s.Waited.Round(time.Millisecond), avg(s.Waited, s.Delayed), s.Got429, r.Retries)
	fmt.Printf("  the API saw %d requests from key-paced, %d rejected\n", api.seen("key-paced"), api.rejected("key-paced"))
	return nil
}

func avg(d time.Duration, n int64) time.Duration {
	if n == 0 {
		return 0
	}
	return (d / time.Duration(n)).Round(time.Millisecond)
}

type result struct {
	calls, ok, got429 int64
	took              time.Duration
}

// drive sends n requests with the API key from clients goroutines and
// counts the answers.
func drive(c *http.Client, url, key string, n, clients int) result {
	var next, ok, got429 atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				req, err := http.NewRequest(http.MethodGet, url, nil)
				if err != nil {
					continue
				}
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := c.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					got429.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return result{calls: int64(n), ok: ok.Load(), got429: got429.Load(), took: time.Since(start)}
}

// fakeAPI is a third-party API with a published limit per API key, enforced
// with a token bucket; it reports the quota in X-RateLimit-* headers and
// answers 429 with Retry-After (seconds, rounded up) over the limit.
type fakeAPI struct {
	rate  ratelimit.Rate
	burst int64

	mu      sync.Mutex
	buckets map[string]*ratelimit.TokenBucket
	counts  map[string][2]int64 // seen, rejected
}

func newFakeAPI(rate ratelimit.Rate, burst int64) *fakeAPI {
	return &fakeAPI{rate: rate, burst: burst, buckets: map[string]*ratelimit.TokenBucket{}, counts: map[string][2]int64{}}
}

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Authorization")
	if len(key) > 7 {
		key = key[7:] // after "Bearer "
	}
	a.mu.Lock()
	b := a.buckets[key]
	if b == nil {
		b, _ = ratelimit.NewTokenBucket(a.rate, a.burst) // validated by the flags
		a.buckets[key] = b
	}
	d := b.Allow()
	c := a.counts[key]
	c[0]++
	if !d.Allowed() {
		c[1]++
	}
	a.counts[key] = c
	a.mu.Unlock()
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(int64(math.Ceil(d.ResetAfter.Seconds())), 10))
	if !d.Allowed() {
		h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(d.RetryAfter.Seconds())), 10))
		http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
		return
	}
	fmt.Fprintln(w, `{"things":[]}`)
}

func (a *fakeAPI) seen(key string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[key][0]
}

func (a *fakeAPI) rejected(key string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[key][1]
}
