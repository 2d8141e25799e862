package bench

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// retryableLimiterServer stands in for a sluice-protected server until the
// shed middleware is merged (swap the handler for the middleware then): a
// ratelimit.TokenBucket per client (the X-Client-Id header here; the
// client's address in production, but every client is on loopback)
// in front of a handler, answering 429 with Retry-After in delta-seconds
// rounded up when the client is over its limit. It records the statuses
// each request (by its X-Request-Id) received.
type retryableLimiterServer struct {
	rate  ratelimit.Rate
	burst int64

	mu       sync.Mutex
	buckets  map[string]*ratelimit.TokenBucket
	statuses map[string][]int
}

func newRetryableLimiterServer(rate ratelimit.Rate, burst int64) *retryableLimiterServer {
	return &retryableLimiterServer{rate: rate, burst: burst,
		buckets: map[string]*ratelimit.TokenBucket{}, statuses: map[string][]int{}}
}

func (s *retryableLimiterServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	client := r.Header.Get("X-Client-Id")
	b := s.buckets[client]
	if b == nil {
		var err error
		if b, err = ratelimit.NewTokenBucket(s.rate, s.burst); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		s.buckets[client] = b
	}
	d := b.AllowN(clock.Now(), 1)
	status := http.StatusOK
	if !d.Allowed() {
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(d.RetryAfter.Seconds())), 10))
	}
	id := r.Header.Get("X-Request-Id")
	s.statuses[id] = append(s.statuses[id], status)
	w.WriteHeader(status)
}

// TestRetryableHTTPHonoursRetryAfter points hashicorp/go-retryablehttp, a
// popular client that honours Retry-After, at a rate-limited loopback
// server: three clients send eight requests each as fast as they can, each
// into its own limit of 10/s with a burst of 4. Some requests get a 429;
// not one gets a second 429 on its retry, because the client waits exactly
// the Retry-After (the exact wait rounded up to whole seconds) and nothing
// else spends its tokens meanwhile. (With one bucket shared by greedy
// clients a Retry-After reserves nothing, and a retry can meet a second
// 429: the other clients may spend the token first.) Bounded: about 1 s of
// real time, 20 s at most.
func TestRetryableHTTPHonoursRetryAfter(t *testing.T) {
	srv := newRetryableLimiterServer(ratelimit.Per(10, time.Second), 4)
	ts := httptest.NewServer(srv)
	defer ts.Close()

	client := retryablehttp.NewClient()
	client.HTTPClient = ts.Client()
	client.Logger = nil
	client.RetryMax = 3
	client.RetryWaitMin = 10 * time.Millisecond
	client.RetryWaitMax = 5 * time.Second

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for c := range 3 {
		wg.Go(func() {
			for i := range 8 {
				req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
				if err != nil {
					errs <- err
					return
				}
				req.Header.Set("X-Client-Id", strconv.Itoa(c))
				req.Header.Set("X-Request-Id", strconv.Itoa(c)+"-"+strconv.Itoa(i))
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("request %d-%d ended with %d", c, i, resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	first429 := 0
	for id, st := range srv.statuses {
		n429 := 0
		for _, s := range st {
			if s == http.StatusTooManyRequests {
				n429++
			}
		}
		if n429 > 1 {
			t.Errorf("request %s got %d 429s: %v", id, n429, st)
		}
		first429 += n429
	}
	if len(srv.statuses) != 24 {
		t.Fatalf("%d requests reached the server, want 24", len(srv.statuses))
	}
	if first429 == 0 {
		t.Fatal("no request was limited: the check proved nothing")
	}
	t.Logf("24 requests, %d got one 429 and succeeded on their retry", first429)
}
