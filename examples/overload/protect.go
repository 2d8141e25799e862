package main

import (
	"net/http"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/shed"
)

// protection is sluice in front of the endpoint: one Global rule with an
// adaptive concurrency limit. Work beyond the limit is shed at once with 503,
// Retry-After and problem+json, instead of joining a queue it cannot leave
// in time; the limit follows the latency that the middleware reports.
type protection struct {
	limiter *adaptive.Limiter
	sluice  *shed.Controller
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
	c, err := shed.New([]shed.Rule{
		{Name: "inference", Algorithm: shed.Adaptive, Limiter: l},
	})
	if err != nil {
		return nil, err
	}
	return &protection{limiter: l, sluice: c}, nil
}

func (p *protection) limit() int { return p.limiter.Limit() }

func (p *protection) wrap(next http.Handler) http.Handler { return p.sluice.Middleware(next) }

func (p *protection) close() error { return p.sluice.Close() }
