// Package peers builds the rate-limit middlewares that the benchmarks
// compare sluice with (httprate, go-limiter's httplimit, throttled) and
// sluice's own rule, all enforcing one rule: a limit per client IP so high
// that no benchmark request reaches it, so that each measures its admit
// path. BenchmarkMiddleware (in-process) and cmd/overload's admission cells
// (end to end) both build their contenders here, so the two compare the
// same configurations.
//
// Each constructor returns a new, independent middleware, safe for
// concurrent use as its library makes it; errors are the library's.
package peers

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/go-chi/httprate"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
)

// The rule every middleware enforces: per client IP, PerIPRate a second
// with a burst of PerIPBurst.
const (
	PerIPRate  = 1_000_000
	PerIPBurst = 1 << 30
)

// SluiceIPRule is sluice's per-IP rule, its table holding up to keys
// clients.
func SluiceIPRule(keys int) shed.Rule {
	return shed.Rule{Name: "ip", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: PerIPBurst,
		Rate: ratelimit.Per(PerIPRate, time.Second), Capacity: keys}
}

// Middleware is a peer's middleware and what releases what it started.
type Middleware struct {
	Wrap  func(http.Handler) http.Handler
	Close func() error
}

func nothing() error { return nil }

// HTTPRate is go-chi/httprate keyed by the connection's address, as
// sluice's IP identity with no trusted proxy (httprate.KeyByIP would read
// forwarding headers).
func HTTPRate() Middleware {
	byIP := func(r *http.Request) (string, error) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return "", err
		}
		return httprate.CanonicalizeIP(host), nil
	}
	return Middleware{Wrap: httprate.LimitBy(PerIPBurst, time.Second, byIP), Close: nothing}
}

// GoLimiter is sethvargo/go-limiter's httplimit over its memorystore, with
// a one-hour interval: go-limiter refills interval/tokens per tick, which
// rounds to nothing for a count this large, so a shorter interval would
// start rejecting once a tick passes.
func GoLimiter() (Middleware, error) {
	st, err := memorystore.New(&memorystore.Config{Tokens: PerIPBurst, Interval: time.Hour})
	if err != nil {
		return Middleware{}, err
	}
	mw, err := httplimit.NewMiddleware(st, httplimit.IPKeyFunc())
	if err != nil {
		_ = st.Close(context.Background())
		return Middleware{}, err
	}
	return Middleware{Wrap: mw.Handle, Close: func() error { return st.Close(context.Background()) }}, nil
}

// Throttled is throttled/throttled's GCRA over its memstore, varied by the
// remote address.
func Throttled() (Middleware, error) {
	st, err := memstore.NewCtx(0)
	if err != nil {
		return Middleware{}, err
	}
	rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerSec(PerIPRate), MaxBurst: PerIPBurst})
	if err != nil {
		return Middleware{}, err
	}
	h := &throttled.HTTPRateLimiterCtx{RateLimiter: rl, VaryBy: &throttled.VaryBy{RemoteAddr: true}}
	return Middleware{Wrap: h.RateLimit, Close: nothing}, nil
}
