package upstream

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// RetryTransport is an http.RoundTripper that retries failed requests
// without multiplying load during an outage. Every retry draws from a retry
// budget: each first attempt deposits a share of a token (default 0.1) and
// each retry takes a whole one, so retries stay within that share of the
// requests (10%) plus a small saved balance; optionally a floor rate allows
// a few retries at low traffic. Retries wait a jittered exponential backoff,
// or exactly the Retry-After the upstream sent.
//
// By default it retries 429 responses, and for idempotent requests (GET,
// HEAD, OPTIONS, TRACE, PUT, DELETE, or any request with an Idempotency-Key
// header) also 502, 503, 504 and failed round trips; never the Transport's
// local rejections (ErrThrottled, ErrDeadline,
// ErrMaxWait), and never a request whose body cannot be replayed
// (a body without GetBody). A retry that cannot start before the request's
// context deadline is not made, nor one after a Retry-After longer than
// WithRetryAfterMax (default one minute): the last response or error is
// returned.
//
// Put it in front of a Transport (the Transport paces and learns, the
// RetryTransport decides whether to try again). It starts no goroutine and
// blocks on timers, so it runs under testing/synctest. It is safe for
// concurrent use. The zero value is not usable; call NewRetryTransport.
type RetryTransport struct {
	next  http.RoundTripper
	cfg   retryConfig
	floor *ratelimit.TokenBucket // nil: no floor

	// balance is the budget in thousandths of a retry.
	balance atomic.Int64

	requests, attempts, retries, denied atomic.Int64
}

// RetryOption configures NewRetryTransport.
type RetryOption interface{ applyRetry(*retryConfig) error }

type retryConfig struct {
	attempts   int
	ratio      float64
	maxBalance int64
	floor      ratelimit.Rate
	base, cap  time.Duration
	afterMax   time.Duration
	random     func() float64
	policy     func(*http.Request, *http.Response, error) bool
}

type retryOptionFunc func(*retryConfig) error

func (f retryOptionFunc) applyRetry(c *retryConfig) error { return f(c) }

// WithAttempts sets the most attempts per request, the first included;
// the default is 3. It must be at least 1 (1: never retry).
func WithAttempts(n int) RetryOption {
	return retryOptionFunc(func(c *retryConfig) error {
		if n < 1 {
			return fmt.Errorf("upstream: retry attempts must be at least 1, got %d", n)
		}
		c.attempts = n
		return nil
	})
}

// WithBudget sets the retry budget: each request deposits ratio of a
// retry (in (0, 1]; default 0.1), and at most maxBalance retries can be
// saved up (at least 1; default 10). Over any stretch of traffic the
// retries are at most ratio times the requests plus maxBalance (plus the
// floor's, if set).
func WithBudget(ratio float64, maxBalance int64) RetryOption {
	return retryOptionFunc(func(c *retryConfig) error {
		if math.IsNaN(ratio) || ratio <= 0 || ratio > 1 {
			return fmt.Errorf("upstream: retry budget ratio must be in (0, 1], got %v", ratio)
		}
		if maxBalance < 1 || maxBalance > math.MaxInt64/1000 {
			return fmt.Errorf("upstream: retry budget balance must be in 1..%d, got %d", int64(math.MaxInt64/1000), maxBalance)
		}
		c.ratio, c.maxBalance = ratio, maxBalance
		return nil
	})
}

// WithFloor allows retries at rate (a token bucket of one second's
// worth, at least 1) when the budget is empty, so that a client with little
// traffic can still retry. By default there is no floor.
func WithFloor(rate ratelimit.Rate) RetryOption {
	return retryOptionFunc(func(c *retryConfig) error {
		if rate.Count <= 0 || rate.Per <= 0 {
			return fmt.Errorf("upstream: retry floor must have a positive count and period, got %v", rate)
		}
		c.floor = rate
		return nil
	})
}

// WithBackoff sets the backoff: before retry n (1, 2, ...) the
// RetryTransport waits a uniformly random time in [d/2, d) with
// d = min(base·2^(n-1), max). Defaults: base 100ms, max 5s. A Retry-After
// from the upstream replaces the backoff.
func WithBackoff(base, max time.Duration) RetryOption {
	return retryOptionFunc(func(c *retryConfig) error {
		if base <= 0 || max < base {
			return fmt.Errorf("upstream: retry backoff needs 0 < base <= max, got base %v, max %v", base, max)
		}
		c.base, c.cap = base, max
		return nil
	})
}

// WithRetryAfterMax sets the longest Retry-After the RetryTransport waits
// out; a response asking for a longer wait is returned to the caller
// instead of retried. The default is one minute; d must be positive.
func WithRetryAfterMax(d time.Duration) RetryOption {
	return retryOptionFunc(func(c *retryConfig) error {
		if d <= 0 {
			return fmt.Errorf("upstream: retry-after max must be positive, got %v", d)
		}
		c.afterMax = d
		return nil
	})
}

// WithBackoffRandom sets the source of uniform numbers in [0, 1) for the
// backoff jitter; the default is math/rand/v2's Float64. It must be safe for
// concurrent use.
func WithBackoffRandom(f func() float64) RetryOption {
	return retryOptionFunc(func(c *retryConfig) error {
		if f == nil {
			return errors.New("upstream: backoff random func is nil")
		}
		c.random = f
		return nil
	})
}

// WithRetryPolicy replaces the default decision of which outcomes to retry.
// The func gets the request and either its response or its error; it must
// be safe for concurrent use. The budget, the attempts, the body and the
// deadline still apply.
func WithRetryPolicy(retry func(req *http.Request, resp *http.Response, err error) bool) RetryOption {
	return retryOptionFunc(func(c *retryConfig) error {
		if retry == nil {
			return errors.New("upstream: retry policy func is nil")
		}
		c.policy = retry
		return nil
	})
}

// NewRetryTransport returns a RetryTransport over next. It returns an error
// when next is nil or an option is invalid.
func NewRetryTransport(next http.RoundTripper, opts ...RetryOption) (*RetryTransport, error) {
	if next == nil {
		return nil, errors.New("upstream: retry transport needs a next RoundTripper")
	}
	cfg := retryConfig{
		attempts:   3,
		ratio:      0.1,
		maxBalance: 10,
		base:       100 * time.Millisecond,
		cap:        5 * time.Second,
		afterMax:   time.Minute,
		random:     rand.Float64,
		policy:     DefaultRetryPolicy,
	}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("upstream: nil RetryOption")
		}
		if err := o.applyRetry(&cfg); err != nil {
			return nil, err
		}
	}
	r := &RetryTransport{next: next, cfg: cfg}
	if cfg.floor.Count > 0 {
		burst := max(1, int64(float64(cfg.floor.Count)*float64(time.Second)/float64(cfg.floor.Per)))
		b, err := ratelimit.NewTokenBucket(cfg.floor, burst)
		if err != nil {
			return nil, fmt.Errorf("upstream: retry floor: %w", err)
		}
		r.floor = b
	}
	return r, nil
}

// DefaultRetryPolicy is the RetryTransport's default decision: retry a 429;
// for idempotent requests also a 502, 503, 504 or a failed round trip;
// never a local rejection of a Transport or a cancelled request.
func DefaultRetryPolicy(req *http.Request, resp *http.Response, err error) bool {
	if err != nil {
		if errors.Is(err, ErrThrottled) || errors.Is(err, ErrDeadline) ||
			errors.Is(err, ErrMaxWait) || req.Context().Err() != nil {
			return false
		}
		return retryIdempotent(req)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retryIdempotent(req)
	}
	return false
}

func retryIdempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
}

// RetryStats is a snapshot of a RetryTransport's counters.
type RetryStats struct {
	// Requests counts calls to RoundTrip; Attempts the calls to next
	// (first attempts and retries).
	Requests, Attempts int64
	// Retries counts the retries made; Denied the retries the budget
	// refused.
	Retries, Denied int64
}

// Stats returns the counters. It is safe for concurrent use.
func (r *RetryTransport) Stats() RetryStats {
	return RetryStats{
		Requests: r.requests.Load(),
		Attempts: r.attempts.Load(),
		Retries:  r.retries.Load(),
		Denied:   r.denied.Load(),
	}
}

// deposit adds a first attempt's share to the budget, up to its cap.
func (r *RetryTransport) deposit() {
	add, top := int64(math.Round(r.cfg.ratio*1000)), r.cfg.maxBalance*1000
	for {
		b := r.balance.Load()
		if b >= top || r.balance.CompareAndSwap(b, min(top, b+add)) {
			return
		}
	}
}

// withdraw takes one retry from the budget (or the floor).
func (r *RetryTransport) withdraw() bool {
	for {
		b := r.balance.Load()
		if b < 1000 {
			break
		}
		if r.balance.CompareAndSwap(b, b-1000) {
			return true
		}
	}
	return r.floor != nil && r.floor.AllowN(clock.Now(), 1).Allowed()
}

// backoff returns the wait before retry n (1, 2, ...).
func (r *RetryTransport) backoff(n int) time.Duration {
	d := r.cfg.cap
	if n-1 < 62 {
		if e := r.cfg.base << (n - 1); e > 0 && e>>(n-1) == r.cfg.base && e < d {
			d = e
		}
	}
	return d/2 + time.Duration(r.cfg.random()*float64(d/2))
}

// RoundTrip sends req, and retries it while the policy, the attempts, the
// budget and the request's deadline allow. It blocks during backoffs; a
// context ending during one returns the context's error. The response it
// returns is the last attempt's; earlier responses' bodies are drained (up
// to 64 KiB) and closed.
func (r *RetryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.requests.Add(1)
	r.deposit()
	ctx := req.Context()
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	attempt := req
	for n := 1; ; n++ {
		r.attempts.Add(1)
		resp, err := r.next.RoundTrip(attempt)
		if n >= r.cfg.attempts || !replayable || !r.cfg.policy(req, resp, err) {
			return resp, err
		}
		wait := r.backoff(n)
		if err == nil {
			if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				if d > r.cfg.afterMax {
					return resp, nil // longer than the caller wants to wait
				}
				wait = d // honoured exactly: never earlier, never jittered
			}
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			return resp, err // the retry could not finish in time
		}
		if !r.withdraw() {
			r.denied.Add(1)
			return resp, err
		}
		next := req.Clone(ctx)
		if req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
			body, gerr := req.GetBody()
			if gerr != nil {
				return resp, err
			}
			next.Body = body
		}
		if resp != nil {
			_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
			resp.Body.Close()
		}
		if serr := sleep(ctx, int64(wait)); serr != nil {
			return nil, serr
		}
		r.retries.Add(1)
		attempt = next
	}
}
