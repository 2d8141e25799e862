package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// scriptStep is one scripted answer of the property test's
// upstream.
type scriptStep struct {
	status     int
	retryAfter int   // seconds; -1: none
	remaining  int64 // -1: no quota headers
	reset      int64
}

// TestTransportProperty drives random clients (random counts, deadlines)
// against an upstream that answers from a random script of 200s with and
// without quota headers, 429s and 503s with and without Retry-After, in
// pacer or token-bucket mode, and checks in virtual time that whatever
// happens: (1) what reaches the upstream never exceeds the local limit;
// (2) nothing reaches it while a Retry-After it sent is running; (3) every
// call ends, with a response or one of the documented errors.
func TestTransportProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		perSecond := rapid.Int64Range(1, 20).Draw(rt, "perSecond")
		burst := rapid.Int64Range(0, 6).Draw(rt, "burst") // 0: pacer
		maxWait := rapid.IntRange(0, 5).Draw(rt, "maxWaitSeconds")
		script := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) scriptStep {
			s := scriptStep{status: http.StatusOK, retryAfter: -1, remaining: -1}
			switch rapid.IntRange(0, 4).Draw(t, "kind") {
			case 1:
				s.remaining = rapid.Int64Range(0, 5).Draw(t, "remaining")
				s.reset = rapid.Int64Range(0, 3).Draw(t, "reset")
			case 2:
				s.status = http.StatusTooManyRequests
				s.retryAfter = rapid.IntRange(0, 3).Draw(t, "retryAfter")
			case 3:
				s.status = http.StatusServiceUnavailable
				s.retryAfter = rapid.IntRange(-1, 3).Draw(t, "retryAfter")
			case 4:
				s.status = http.StatusTooManyRequests
			}
			return s
		}), 1, 12).Draw(rt, "script")
		clients := rapid.IntRange(1, 5).Draw(rt, "clients")
		perClient := rapid.IntRange(1, 6).Draw(rt, "perClient")
		deadlines := rapid.SliceOfN(rapid.IntRange(0, 4000), clients*perClient, clients*perClient).Draw(rt, "deadlineMillis") // 0: none

		var failure string
		synctest.Test(t, func(*testing.T) {
			failure = propertyRun(perSecond, burst, maxWait, script, clients, perClient, deadlines)
		})
		if failure != "" {
			rt.Fatal(failure)
		}
	})
}

func propertyRun(perSecond, burst int64, maxWait int, script []scriptStep, clients, perClient int, deadlines []int) string {
	var mu sync.Mutex
	var arrivals []int64
	type block struct{ from, until int64 }
	var blocks []block
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := clock.Now()
		mu.Lock()
		s := script[len(arrivals)%len(script)]
		arrivals = append(arrivals, now)
		if s.retryAfter >= 0 && s.status != http.StatusOK {
			blocks = append(blocks, block{now, now + int64(s.retryAfter)*int64(time.Second)})
		}
		mu.Unlock()
		if s.remaining >= 0 {
			w.Header().Set("X-RateLimit-Remaining", strconv.FormatInt(s.remaining, 10))
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(s.reset, 10))
		}
		if s.retryAfter >= 0 {
			w.Header().Set("Retry-After", strconv.Itoa(s.retryAfter))
		}
		w.WriteHeader(s.status)
	})
	opts := []Option{WithoutThrottle()}
	if burst > 0 {
		opts = append(opts, WithBurst(burst))
	}
	if maxWait > 0 {
		opts = append(opts, WithMaxWait(time.Duration(maxWait)*time.Second))
	}
	tr, err := NewTransport(inMemory{h}, ratelimit.Per(perSecond, time.Second), opts...)
	if err != nil {
		return err.Error()
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients*perClient)
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if d := deadlines[c*perClient+i]; d > 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(d)*time.Millisecond)
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/", nil)
				resp, err := tr.RoundTrip(req)
				cancel()
				if err == nil {
					resp.Body.Close()
					continue
				}
				if !errors.Is(err, ErrDeadline) && !errors.Is(err, ErrMaxWait) && !errors.Is(err, context.DeadlineExceeded) {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return fmt.Sprintf("unexpected error: %v", err)
	}
	// (1) The local limit: the reserved rate, and the reserved burst (1 for
	// a pacer); i ns of slack for rates rounded to whole nanoseconds.
	localBurst := max(1, burst*9/10)
	b, err := ratelimit.NewTokenBucket(ratelimit.Per(perSecond*9, 10*time.Second), localBurst)
	if err != nil {
		return err.Error()
	}
	for i, at := range arrivals {
		if !b.AllowN(at+int64(i), 1).Allowed() {
			return fmt.Sprintf("arrival %d at %v exceeds %d/s*0.9 with burst %d: %v", i, time.Duration(at-arrivals[0]), perSecond, localBurst, arrivals)
		}
	}
	// (2) Nothing strictly inside a block the upstream asked for.
	for _, bl := range blocks {
		for _, at := range arrivals {
			if at > bl.from && at < bl.until {
				return fmt.Sprintf("arrival at %v inside the block %v..%v", time.Duration(at-arrivals[0]),
					time.Duration(bl.from-arrivals[0]), time.Duration(bl.until-arrivals[0]))
			}
		}
	}
	return ""
}
