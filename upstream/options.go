package upstream

import (
	"fmt"
	"math"
	"net/http"
	"time"
)

// Option configures NewTransport.
type Option interface{ apply(*config) error }

type config struct {
	burst       int64 // published burst; 0: pacer (no bursts)
	reserve     float64
	key         func(*http.Request) string
	maxWait     time.Duration // 0: none
	concurrency int64         // 0: no cap
	keys        int
	throttle    bool
	k           float64
	maxReject   float64 // cap on the rejection probability; 1: none
	random      func() float64
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithBurst makes the Transport a token bucket that allows bursts
// up to the upstream's published burst (times the reserve, rounded down, at
// least 1). Without it the Transport is a pacer: requests leave evenly
// spaced, with no bursts, for upstreams that tolerate none. The burst must
// be positive.
func WithBurst(burst int64) Option {
	return optionFunc(func(c *config) error {
		if burst <= 0 {
			return fmt.Errorf("upstream: burst must be positive, got %d", burst)
		}
		c.burst = burst
		return nil
	})
}

// WithReserve sets the share of the upstream's published limit the
// Transport uses, in (0, 1]; the default is 0.9, leaving 10% of the quota
// to others (other instances, people, clock skew). It applies to the rate,
// the burst, and to the quota an upstream reports in its headers when it
// reports the limit.
func WithReserve(share float64) Option {
	return optionFunc(func(c *config) error {
		if math.IsNaN(share) || share <= 0 || share > 1 {
			return fmt.Errorf("upstream: reserve must be in (0, 1], got %v", share)
		}
		c.reserve = share
		return nil
	})
}

// WithKey sets the function that names the upstream limit a
// request counts against; the default is the request URL's host (with
// port). The function must be safe for concurrent use and fast.
func WithKey(key func(*http.Request) string) Option {
	return optionFunc(func(c *config) error {
		if key == nil {
			return fmt.Errorf("upstream: key func is nil")
		}
		c.key = key
		return nil
	})
}

// WithMaxWait bounds how long a request may wait for its turn
// (pacing, Retry-After, concurrency cap together): a request whose turn is
// further away fails at once with ErrMaxWait. Without it only the
// request's context bounds the wait. It must be positive.
func WithMaxWait(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("upstream: max wait must be positive, got %v", d)
		}
		c.maxWait = d
		return nil
	})
}

// WithConcurrency caps the requests in flight per key (from the
// call to the upstream until the response body is closed), for upstreams
// that limit connections. Requests over the cap wait for a free place. The
// cap must be positive; by default there is none.
func WithConcurrency(n int64) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("upstream: concurrency must be positive, got %d", n)
		}
		c.concurrency = n
		return nil
	})
}

// WithKeys sets how many keys the Transport keeps state for; the
// default is 1,024. The table never grows beyond it: it recycles the state
// of keys that are idle and fully recovered, and keys that find it full of
// live state share one overflow state (one limit for all of them, which can
// only make them slower).
func WithKeys(n int) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("upstream: keys must be positive, got %d", n)
		}
		c.keys = n
		return nil
	})
}

// WithThrottle sets K of adaptive client throttling: with requests
// and accepts counted per key over the last two minutes, a request is
// rejected locally (ErrThrottled) with probability
// max(0, (requests - K·accepts)/(requests+1)). K must be at least 1; the
// default is 2 (the upstream may reject half of what is sent before the
// client starts rejecting locally). A request is counted when its outcome
// is known: a response counts as accepted unless it is a 429 or 503; a
// failed round trip (other than by the request's own context) and a local
// rejection count as requests not accepted; a request that fails its
// deadline before it is sent is not counted.
func WithThrottle(k float64) Option {
	return optionFunc(func(c *config) error {
		if math.IsNaN(k) || math.IsInf(k, 0) || k < 1 {
			return fmt.Errorf("upstream: throttle K must be a finite number at least 1, got %v", k)
		}
		c.throttle, c.k = true, k
		return nil
	})
}

// WithoutThrottle turns adaptive client throttling off.
func WithoutThrottle() Option {
	return optionFunc(func(c *config) error {
		c.throttle = false
		return nil
	})
}

// WithThrottleRandom sets the source of uniform numbers in [0, 1) that
// adaptive throttling draws from; the default is math/rand/v2's Float64. It
// must be safe for concurrent use. Tests pass a seeded source.
func WithThrottleRandom(f func() float64) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("upstream: throttle random func is nil")
		}
		c.random = f
		return nil
	})
}

// WithThrottleMax caps adaptive throttling's rejection probability
// at p, in (0, 1); by default there is no cap (the SRE formula as is). A cap
// keeps a share of requests probing the upstream: without one, a client
// whose upstream was down for a while rejects nearly everything locally,
// and since local rejections count as requests not accepted, it takes
// several windows (minutes) after the upstream recovers for the
// probability to fall. Envoy's admission control caps it at 0.8.
func WithThrottleMax(p float64) Option {
	return optionFunc(func(c *config) error {
		if math.IsNaN(p) || p <= 0 || p >= 1 {
			return fmt.Errorf("upstream: throttle max must be in (0, 1), got %v", p)
		}
		c.maxReject = p
		return nil
	})
}
