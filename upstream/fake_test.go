package upstream

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// inMemory is an http.RoundTripper that serves requests by calling
// a handler directly, with no socket: what a synctest bubble needs (real
// loopback sockets do not work inside one).
type inMemory struct{ h http.Handler }

func (u inMemory) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	u.h.ServeHTTP(rec, req)
	if req.Body != nil {
		req.Body.Close()
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// headerStyle is how a test upstream reports its quota.
type headerStyle int

const (
	noHeaders headerStyle = iota
	xRateLimit
	ietfHeaders
)

// limitedUpstream is a test upstream that enforces a token bucket
// (ratelimit.TokenBucket) per host, answers 429 with Retry-After (rounded
// up) when over it, optionally reports its quota, and records what reached
// it. latency is virtual time spent in the handler after the decision.
type limitedUpstream struct {
	rate    ratelimit.Rate
	burst   int64
	style   headerStyle
	latency time.Duration

	mu       sync.Mutex
	buckets  map[string]*ratelimit.TokenBucket
	ok, r429 int
	times    []int64 // clock.Now of every request that reached it
	inflight int
	peak     int
}

func newLimitedUpstream(rate ratelimit.Rate, burst int64, style headerStyle) *limitedUpstream {
	return &limitedUpstream{rate: rate, burst: burst, style: style, buckets: map[string]*ratelimit.TokenBucket{}}
}

func (u *limitedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := clock.Now()
	u.mu.Lock()
	b := u.buckets[r.Host]
	if b == nil {
		var err error
		if b, err = ratelimit.NewTokenBucket(u.rate, u.burst); err != nil {
			u.mu.Unlock()
			panic(err)
		}
		u.buckets[r.Host] = b
	}
	d := b.AllowN(now, 1)
	u.times = append(u.times, now)
	if d.Allowed() {
		u.ok++
	} else {
		u.r429++
	}
	u.inflight++
	u.peak = max(u.peak, u.inflight)
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.inflight--
		u.mu.Unlock()
	}()
	reset := int64(math.Ceil(d.ResetAfter.Seconds()))
	switch u.style {
	case xRateLimit:
		w.Header().Set("X-RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
		w.Header().Set("X-RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	case ietfHeaders:
		w.Header().Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, d.Limit, int64(math.Ceil(u.rate.Per.Seconds()))))
		w.Header().Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, d.Remaining, reset))
	}
	if u.latency > 0 {
		time.Sleep(u.latency) // virtual: only tests inside a synctest bubble give a latency
	}
	if !d.Allowed() {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(d.RetryAfter.Seconds())), 10))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	io.WriteString(w, "ok")
}

func (u *limitedUpstream) counts() (ok, r429 int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ok, u.r429
}

// get sends one GET through rt and returns the status, or the error.
func get(rt http.RoundTripper, url string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
