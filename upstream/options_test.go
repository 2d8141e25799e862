package upstream

import (
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestInvalidInputErrorsNamePackage: every invalid argument and option of
// NewTransport and NewRetryTransport is an error, and its message starts
// with the package name.
func TestInvalidInputErrorsNamePackage(t *testing.T) {
	rate := ratelimit.Per(10, time.Second)
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.HasPrefix(err.Error(), "upstream: ") {
			t.Errorf("%s: got %v, want an upstream: error", what, err)
		}
	}
	_, err := NewTransport(nil, rate)
	check("nil next", err)
	_, err = NewTransport(http.DefaultTransport, ratelimit.Rate{})
	check("zero rate", err)
	_, err = NewTransport(http.DefaultTransport, rate, nil)
	check("nil option", err)
	for i, o := range []Option{WithBurst(0), WithReserve(0), WithReserve(1.5), WithReserve(math.NaN()),
		WithKey(nil), WithMaxWait(0), WithConcurrency(0), WithKeys(0), WithThrottle(0.5),
		WithThrottle(math.NaN()), WithThrottleRandom(nil), WithThrottleMax(0), WithThrottleMax(1)} {
		_, err := NewTransport(http.DefaultTransport, rate, o)
		check("transport option "+string(rune('a'+i)), err)
	}
	_, err = NewRetryTransport(nil)
	check("retry: nil next", err)
	_, err = NewRetryTransport(http.DefaultTransport, nil)
	check("retry: nil option", err)
	for i, o := range []RetryOption{WithAttempts(0), WithBudget(0, 1), WithBudget(1.5, 1),
		WithBudget(0.1, 0), WithBackoff(0, time.Second), WithBackoff(time.Second, time.Millisecond),
		WithFloor(ratelimit.Rate{}), WithBackoffRandom(nil), WithRetryPolicy(nil), WithRetryAfterMax(0)} {
		_, err := NewRetryTransport(http.DefaultTransport, o)
		check("retry option "+string(rune('a'+i)), err)
	}
}
