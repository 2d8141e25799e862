package shed

import (
	"fmt"
	"math"
	"net/http"
	"time"
)

// TransportOption configures NewTransport.
type TransportOption interface{ applyTransport(*transportConfig) error }

type transportConfig struct {
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

type transportOptionFunc func(*transportConfig) error

func (f transportOptionFunc) applyTransport(c *transportConfig) error { return f(c) }

// WithTransportBurst makes the Transport a token bucket that allows bursts
// up to the upstream's published burst (times the reserve, rounded down, at
// least 1). Without it the Transport is a pacer: requests leave evenly
// spaced, with no bursts, for upstreams that tolerate none. The burst must
// be positive.
func WithTransportBurst(burst int64) TransportOption {
	return transportOptionFunc(func(c *transportConfig) error {
		if burst <= 0 {
			return fmt.Errorf("shed: transport burst must be positive, got %d", burst)
		}
		c.burst = burst
		return nil
	})
}

// WithTransportReserve sets the share of the upstream's published limit the
// Transport uses, in (0, 1]; the default is 0.9, leaving 10% of the quota
// to others (other instances, people, clock skew). It applies to the rate,
// the burst, and to the quota an upstream reports in its headers when it
// reports the limit.
func WithTransportReserve(share float64) TransportOption {
	return transportOptionFunc(func(c *transportConfig) error {
		if math.IsNaN(share) || share <= 0 || share > 1 {
			return fmt.Errorf("shed: transport reserve must be in (0, 1], got %v", share)
		}
		c.reserve = share
		return nil
	})
}

// WithTransportKey sets the function that names the upstream limit a
// request counts against; the default is the request URL's host (with
// port). The function must be safe for concurrent use and fast.
func WithTransportKey(key func(*http.Request) string) TransportOption {
	return transportOptionFunc(func(c *transportConfig) error {
		if key == nil {
			return fmt.Errorf("shed: transport key func is nil")
		}
		c.key = key
		return nil
	})
}

// WithTransportMaxWait bounds how long a request may wait for its turn
// (pacing, Retry-After, concurrency cap together): a request whose turn is
// further away fails at once with ErrTransportMaxWait. Without it only the
// request's context bounds the wait. It must be positive.
func WithTransportMaxWait(d time.Duration) TransportOption {
	return transportOptionFunc(func(c *transportConfig) error {
		if d <= 0 {
			return fmt.Errorf("shed: transport max wait must be positive, got %v", d)
		}
		c.maxWait = d
		return nil
	})
}

// WithTransportConcurrency caps the requests in flight per key (from the
// call to the upstream until the response body is closed), for upstreams
// that limit connections. Requests over the cap wait for a free place. The
// cap must be positive; by default there is none.
func WithTransportConcurrency(n int64) TransportOption {
	return transportOptionFunc(func(c *transportConfig) error {
		if n <= 0 {
			return fmt.Errorf("shed: transport concurrency must be positive, got %d", n)
		}
		c.concurrency = n
		return nil
	})
}

// WithTransportKeys sets how many keys the Transport keeps state for; the
// default is 1,024. The table never grows beyond it: it recycles the state
// of keys that are idle and fully recovered, and keys that find it full of
// live state share one overflow state (one limit for all of them, which can
// only make them slower).
func WithTransportKeys(n int) TransportOption {
	return transportOptionFunc(func(c *transportConfig) error {
		if n <= 0 {
			return fmt.Errorf("shed: transport keys must be positive, got %d", n)
		}
		c.keys = n
		return nil
	})
}

// WithTransportThrottle sets K of adaptive client throttling: with requests
// and accepts counted per key over the last two minutes, a request is
// rejected locally (ErrTransportThrottled) with probability
// max(0, (requests - K·accepts)/(requests+1)). K must be at least 1; the
// default is 2 (the upstream may reject half of what is sent before the
// client starts rejecting locally). A request is counted when its outcome
// is known: a response counts as accepted unless it is a 429 or 503; a
// failed round trip (other than by the request's own context) and a local
// rejection count as requests not accepted; a request that fails its
// deadline before it is sent is not counted.
func WithTransportThrottle(k float64) TransportOption {
	return transportOptionFunc(func(c *transportConfig) error {
		if math.IsNaN(k) || math.IsInf(k, 0) || k < 1 {
			return fmt.Errorf("shed: transport throttle K must be a finite number at least 1, got %v", k)
		}
		c.throttle, c.k = true, k
		return nil
	})
}

// WithoutTransportThrottle turns adaptive client throttling off.
func WithoutTransportThrottle() TransportOption {
	return transportOptionFunc(func(c *transportConfig) error {
		c.throttle = false
		return nil
	})
}

// WithTransportRandom sets the source of uniform numbers in [0, 1) that
// adaptive throttling draws from; the default is math/rand/v2's Float64. It
// must be safe for concurrent use. Tests pass a seeded source.
func WithTransportRandom(f func() float64) TransportOption {
	return transportOptionFunc(func(c *transportConfig) error {
		if f == nil {
			return fmt.Errorf("shed: transport random func is nil")
		}
		c.random = f
		return nil
	})
}

// WithTransportThrottleMax caps adaptive throttling's rejection probability
// at p, in (0, 1); by default there is no cap (the SRE formula as is). A cap
// keeps a share of requests probing the upstream: without one, a client
// whose upstream was down for a while rejects nearly everything locally,
// and since local rejections count as requests not accepted, it takes
// several windows (minutes) after the upstream recovers for the
// probability to fall. Envoy's admission control caps it at 0.8.
func WithTransportThrottleMax(p float64) TransportOption {
	return transportOptionFunc(func(c *transportConfig) error {
		if math.IsNaN(p) || p <= 0 || p >= 1 {
			return fmt.Errorf("shed: transport throttle max must be in (0, 1), got %v", p)
		}
		c.maxReject = p
		return nil
	})
}
