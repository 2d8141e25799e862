package upstream

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// retryOutage is an in-memory upstream that answers 503 (without
// Retry-After) until recoverAt, then 200. It counts its calls.
type retryOutage struct {
	recoverAt int64
	calls     atomic.Int64
}

func (u *retryOutage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.calls.Add(1)
	if clock.Now() < u.recoverAt {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// retrySeeded returns a seeded uniform source safe for concurrent use.
func retrySeeded(seed uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed+1))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

// retryOpenLoop sends perSecond requests per second for d through rt, each
// in its own goroutine (an open loop: arrivals do not wait for answers),
// and returns how many it sent and how many ended in a 200.
func retryOpenLoop(rt http.RoundTripper, perSecond int, d time.Duration) (sent, ok int64) {
	var wg sync.WaitGroup
	var okCount atomic.Int64
	gap := time.Second / time.Duration(perSecond)
	for end := clock.Now() + int64(d); clock.Now() < end; time.Sleep(gap) {
		sent++
		wg.Go(func() {
			if code, err := get(rt, "http://api.example/"); err == nil && code == http.StatusOK {
				okCount.Add(1)
			}
		})
	}
	wg.Wait()
	return sent, okCount.Load()
}

// TestRetryStormBudget: an upstream fails every call for its first 10 s,
// while requests arrive at 20/s for 20 s. With the retry budget (10% of
// requests) the upstream gets at most 1.1 times the calls it would get
// with no retries at all; with an unlimited budget the same retry policy
// multiplies its load (the control). After recovery every request
// succeeds.
func TestRetryStormBudget(t *testing.T) {
	run := func(t *testing.T, opts ...RetryOption) (requests, calls, ok int64) {
		synctest.Test(t, func(t *testing.T) {
			up := &retryOutage{recoverAt: clock.Now() + int64(10*time.Second)}
			rt, err := NewRetryTransport(inMemory{up}, append([]RetryOption{
				WithAttempts(5), WithBackoff(100*time.Millisecond, time.Second),
				WithBackoffRandom(retrySeeded(1)),
			}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			requests, ok = retryOpenLoop(rt, 20, 20*time.Second)
			calls = up.calls.Load()
			t.Logf("requests %d, upstream calls %d (%.3fx), ok %d, stats %+v",
				requests, calls, float64(calls)/float64(requests), ok, rt.Stats())
		})
		return requests, calls, ok
	}
	t.Run("budget", func(t *testing.T) {
		requests, calls, ok := run(t)
		if float64(calls) > 1.1*float64(requests) {
			t.Fatalf("%d upstream calls for %d requests: more than 1.1x", calls, requests)
		}
		if ok < requests/2-1 {
			t.Fatalf("only %d of %d requests succeeded; the second half came after recovery", ok, requests)
		}
	})
	t.Run("control-unlimited", func(t *testing.T) {
		requests, calls, _ := run(t, WithBudget(1, 1_000_000), WithFloor(ratelimit.Per(1_000_000, time.Second)))
		if float64(calls) < 2*float64(requests) {
			t.Fatalf("control: %d calls for %d requests; retries without a budget should multiply load", calls, requests)
		}
	})
}

// TestRetryRecoversWithinOneBackoff: a single patient request (a retry
// floor of 10/s lets it retry though it is alone) against an upstream down
// for 10 s succeeds within one backoff period (the 2 s cap) of recovery, and
// the backoff kept the calls few.
func TestRetryRecoversWithinOneBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := clock.Now()
		up := &retryOutage{recoverAt: start + int64(10*time.Second)}
		rt, err := NewRetryTransport(inMemory{up}, WithAttempts(100),
			WithBackoff(100*time.Millisecond, 2*time.Second), WithFloor(ratelimit.Per(10, time.Second)),
			WithBackoffRandom(retrySeeded(3)))
		if err != nil {
			t.Fatal(err)
		}
		code, err := get(rt, "http://api.example/")
		if err != nil || code != http.StatusOK {
			t.Fatalf("%d, %v", code, err)
		}
		took := time.Duration(clock.Now() - up.recoverAt)
		if took < 0 || took >= 2*time.Second {
			t.Fatalf("success %v after recovery, want within one backoff period (2s)", took)
		}
		// 100 ms, 200, 400, 800, 1.6 s, then at most 2 s: about 10 calls
		// in 10 s, not the 100 attempts allowed.
		if calls := up.calls.Load(); calls > 15 {
			t.Fatalf("%d calls during a 10 s outage", calls)
		}
	})
}

// TestRetryHonoursRetryAfter: a 429 with Retry-After: 2 is retried exactly
// 2 s later (no jitter, no backoff), and not at all when the request's
// deadline comes first.
func TestRetryHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var times []int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			times = append(times, clock.Now())
			if len(times) == 1 || len(times) == 3 {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		rt, err := NewRetryTransport(inMemory{h}, WithBudget(1, 10), WithFloor(ratelimit.Per(10, time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		if code, err := get(rt, "http://api.example/"); err != nil || code != http.StatusOK {
			t.Fatalf("%d, %v", code, err)
		}
		if len(times) != 2 || times[1]-times[0] != int64(2*time.Second) {
			t.Fatalf("attempts at %v; want two, 2s apart", times)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || len(times) != 3 {
			t.Fatalf("with a 1 s deadline: %v, %v, %d attempts; want the 429 back after one attempt", resp, err, len(times))
		}
		resp.Body.Close()
		// A Retry-After beyond WithRetryAfterMax is returned, not waited.
		short, err := NewRetryTransport(inMemory{h}, WithRetryAfterMax(time.Second),
			WithBudget(1, 10), WithFloor(ratelimit.Per(10, time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		times = times[:0]
		start := clock.Now()
		if code, err := get(short, "http://api.example/"); err != nil || code != http.StatusTooManyRequests ||
			len(times) != 1 || clock.Now() != start {
			t.Fatalf("Retry-After 2s over a 1s max: %d, %v, %d attempts, %v; want the 429 at once",
				code, err, len(times), time.Duration(clock.Now()-start))
		}
	})
}

// TestRetryBody: a POST is retried only when it is idempotent (an
// Idempotency-Key) and its body can be replayed, and each attempt gets the
// whole body.
func TestRetryBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bodies []string
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			bodies = append(bodies, string(b))
			if len(bodies)%2 == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		rt, err := NewRetryTransport(inMemory{h}, WithBudget(1, 10), WithFloor(ratelimit.Per(10, time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		post := func(key string, replayable bool) int {
			req, _ := http.NewRequest(http.MethodPost, "http://api.example/", strings.NewReader("payload"))
			if !replayable {
				req.GetBody = nil
				req.Body = io.NopCloser(bytes.NewReader([]byte("payload")))
			}
			if key != "" {
				req.Header.Set("Idempotency-Key", key)
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if code := post("k1", true); code != http.StatusOK || len(bodies) != 2 || bodies[1] != "payload" {
			t.Fatalf("idempotent POST: %d, bodies %q", code, bodies)
		}
		if code := post("", true); code != http.StatusServiceUnavailable || len(bodies) != 3 {
			t.Fatalf("plain POST: %d after %d calls; want its 503, not retried", code, len(bodies)-2)
		}
		bodies = bodies[:0]
		if code := post("k2", false); code != http.StatusServiceUnavailable || len(bodies) != 1 {
			t.Fatalf("POST without GetBody: %d after %d calls; want its 503, not retried", code, len(bodies))
		}
	})
}

// TestRetryBudgetArithmetic: ten requests fund one retry at the default 10%,
// and the saved balance stops at its cap.
func TestRetryBudgetArithmetic(t *testing.T) {
	rt, err := NewRetryTransport(http.DefaultTransport, WithBudget(0.1, 3))
	if err != nil {
		t.Fatal(err)
	}
	for range 9 {
		rt.deposit()
	}
	if rt.withdraw() {
		t.Fatal("nine requests funded a retry")
	}
	rt.deposit()
	if !rt.withdraw() || rt.withdraw() {
		t.Fatal("ten requests did not fund exactly one retry")
	}
	for range 1000 {
		rt.deposit()
	}
	n := 0
	for rt.withdraw() {
		n++
	}
	if n != 3 {
		t.Fatalf("a capped balance of 3 funded %d retries", n)
	}
	for _, bad := range []RetryOption{WithAttempts(0), WithBudget(0, 1), WithBudget(1.5, 1),
		WithBudget(0.1, 0), WithBackoff(0, time.Second), WithBackoff(time.Second, time.Millisecond),
		WithFloor(ratelimit.Rate{}), WithBackoffRandom(nil), WithRetryPolicy(nil), WithRetryAfterMax(0)} {
		if _, err := NewRetryTransport(http.DefaultTransport, bad); err == nil {
			t.Fatal("an invalid option was accepted")
		}
	}
}

// TestRetryStormThroughTransport composes the two: a RetryTransport in
// front of a Transport (adaptive throttling capped at 0.8, a max wait of
// 5 s) during the same 10 s outage. The Transport's own defences (the
// default block after a 503 without Retry-After, local rejection) cut the
// load far below one call per request; the throttling keeps rejecting for
// a while after recovery (its window is two minutes), and two minutes after
// recovery every request succeeds.
func TestRetryStormThroughTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &retryOutage{recoverAt: clock.Now() + int64(10*time.Second)}
		tr, err := NewTransport(inMemory{up}, ratelimit.Per(100, time.Second), WithBurst(10),
			WithMaxWait(5*time.Second), WithThrottleMax(0.8), WithThrottleRandom(retrySeeded(5)))
		if err != nil {
			t.Fatal(err)
		}
		rt, err := NewRetryTransport(tr, WithAttempts(5), WithBackoffRandom(retrySeeded(6)))
		if err != nil {
			t.Fatal(err)
		}
		requests, ok := retryOpenLoop(rt, 20, 130*time.Second)
		calls := up.calls.Load()
		t.Logf("requests %d, upstream calls %d (%.3fx), ok %d, transport %+v, retry %+v",
			requests, calls, float64(calls)/float64(requests), ok, tr.Stats(), rt.Stats())
		if float64(calls) > 1.1*float64(requests) {
			t.Fatalf("%d upstream calls for %d requests", calls, requests)
		}
		// Two minutes after recovery the throttling window holds only
		// successes: every request gets through.
		if requests, ok := retryOpenLoop(rt, 20, 10*time.Second); ok != requests {
			t.Fatalf("2 min after recovery: %d of %d requests succeeded", ok, requests)
		}
	})
}
