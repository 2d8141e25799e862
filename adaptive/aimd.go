package adaptive

import "time"

// AIMD is additive-increase, multiplicative-decrease: the limit grows by one
// per window while the service is used to at least half the limit and no
// request was dropped, and is multiplied by the backoff ratio on a drop or
// when the window latency exceeds the timeout.
//
// The rules are Netflix concurrency-limits' AIMD, applied once per window
// rather than once per sample: defaults initial 20, limits [20, 200],
// backoff 0.9, timeout 5s. The zero value is not usable; call NewAIMD. Not
// safe for concurrent use (see Algorithm).
type AIMD struct {
	limit   float64
	min     int
	max     int
	backoff float64
	timeout time.Duration
}

var _ Algorithm = (*AIMD)(nil)

// NewAIMD returns an AIMD algorithm. It accepts WithInitialLimit,
// WithLimits, WithBackoff and WithTimeout, and returns an error for any
// other option or an invalid value.
func NewAIMD(opts ...Option) (*AIMD, error) {
	c, err := build("AIMD", config{initial: 20, min: 20, max: 200, backoff: 0.9, timeout: 5 * time.Second},
		optInitial|optLimits|optBackoff|optTimeout, opts)
	if err != nil {
		return nil, err
	}
	return &AIMD{limit: float64(c.initial), min: c.min, max: c.max, backoff: c.backoff, timeout: c.timeout}, nil
}

// Limit returns the current limit.
func (a *AIMD) Limit() int { return int(a.limit) }

// Update applies one window: L *= backoff on a drop or a latency above the
// timeout; L += 1 when MaxInflight*2 >= L; otherwise L is held.
func (a *AIMD) Update(w Window) int {
	switch {
	case w.Drops > 0 || (w.Count > 0 && w.RTT > a.timeout):
		a.limit = max(float64(a.min), float64(int(a.limit*a.backoff)))
	case w.Count > 0 && w.MaxInflight*2 >= int(a.limit):
		a.limit = min(float64(a.max), a.limit+1)
	}
	return int(a.limit)
}
