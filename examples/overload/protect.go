package main

import (
	"net/http"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/clock"
)

// protection puts sluice's adaptive concurrency limit in front of a handler:
// work beyond the limit is shed at once with 503 and Retry-After instead of
// joining a queue it cannot leave in time.
type protection struct {
	limiter *adaptive.Limiter
}

func newProtection() (*protection, error) {
	alg, err := adaptive.NewDefault()
	if err != nil {
		return nil, err
	}
	l, err := adaptive.NewLimiter(alg)
	if err != nil {
		return nil, err
	}
	return &protection{limiter: l}, nil
}

func (p *protection) limit() int { return p.limiter.Limit() }

func (p *protection) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := p.limiter.TryAcquireAt(clock.Now(), adaptive.Request{})
		if err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "overloaded, retry shortly", http.StatusServiceUnavailable)
			return
		}
		defer tok.Done(adaptive.Success)
		next.ServeHTTP(w, r)
	})
}
