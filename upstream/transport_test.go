package upstream

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// drive runs clients goroutines that call url through rt in a loop
// until d of virtual time has passed; each request's context ends then.
// It returns how many calls got each status, and how many failed with each
// error (by message prefix).
func drive(t *testing.T, rt http.RoundTripper, clients int, d time.Duration, urls ...string) (statuses map[int]int, errs int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	statuses = map[int]int{}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, urls[(c+i)%len(urls)], nil)
				resp, err := rt.RoundTrip(req)
				mu.Lock()
				if err != nil {
					errs++
				} else {
					statuses[resp.StatusCode]++
				}
				mu.Unlock()
				if err != nil {
					// The turn falls after the end (or the context ended):
					// this client is done.
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	return statuses, errs
}

// TestTransportNeverGets429FromKnownLimit drives 60 s of virtual time of
// eager clients against upstreams that enforce exactly the limit the
// Transport is given: not one 429 reaches the Transport, and it uses the
// reserved share of the limit (90%), not much less.
func TestTransportNeverGets429FromKnownLimit(t *testing.T) {
	for _, tc := range []struct {
		name           string
		upstreamBurst  int64
		style          headerStyle
		opts           []Option
		minOKPerSecond float64
	}{
		{"bucket", 10, xRateLimit, []Option{WithBurst(10)}, 8.9},
		{"bucket-ietf", 10, ietfHeaders, []Option{WithBurst(10)}, 8.9},
		// An upstream with no burst reports "0 left, more in 1 s" (whole
		// seconds) after every request, which would rightly slow the
		// Transport to 1/s: this one sends no quota headers.
		{"pacer", 1, noHeaders, nil, 8.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newLimitedUpstream(ratelimit.Per(10, time.Second), tc.upstreamBurst, tc.style)
				tr, err := NewTransport(inMemory{up}, ratelimit.Per(10, time.Second), tc.opts...)
				if err != nil {
					t.Fatal(err)
				}
				statuses, _ := drive(t, tr, 20, 60*time.Second, "http://a.example/", "http://b.example/")
				ok, r429 := up.counts()
				if r429 != 0 || statuses[http.StatusTooManyRequests] != 0 {
					t.Fatalf("upstream answered %d 429s (Transport saw %d)", r429, statuses[http.StatusTooManyRequests])
				}
				// Two hosts, each at 90% of 10/s, for 60 s.
				if perSecond := float64(ok) / 2 / 60; perSecond < tc.minOKPerSecond || perSecond > 9.2 {
					t.Fatalf("each host got %.2f requests/s, want about 9 (90%% of 10/s)", perSecond)
				}
				if s := tr.Stats(); s.Got429 != 0 || s.Sent != int64(ok) {
					t.Fatalf("stats %+v, upstream saw %d", s, ok)
				}
			})
		})
	}
}

// scriptedUpstream answers 200, except that its first request at
// or after at is answered with status and the Retry-After retryAfter
// returns for the time of that request. It records every request.
type scriptedUpstream struct {
	at         int64
	status     int
	retryAfter func(now int64) string

	mu      sync.Mutex
	fired   int64 // time of the scripted answer; 0: not yet
	times   []int64
	answers []int
}

func (u *scriptedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := clock.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	u.times = append(u.times, now)
	if u.fired == 0 && now >= u.at {
		u.fired = now
		w.Header().Set("Retry-After", u.retryAfter(now))
		w.WriteHeader(u.status)
		u.answers = append(u.answers, u.status)
		return
	}
	u.answers = append(u.answers, http.StatusOK)
}

// TestTransportRetryAfterBlocks sends a 429 or 503 with Retry-After (3
// seconds, or an HTTP-date) in the middle of steady traffic from several
// clients: no request reaches the upstream until the time given, the
// waiting callers go at that very instant, and the first one succeeds.
func TestTransportRetryAfterBlocks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		date   bool
		burst  int64 // 0: pacer
	}{
		{"429-seconds-pacer", http.StatusTooManyRequests, false, 0},
		{"429-seconds-bucket", http.StatusTooManyRequests, false, 20},
		{"503-date-pacer", http.StatusServiceUnavailable, true, 0},
		{"429-date-bucket", http.StatusTooManyRequests, true, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := clock.Now()
				var blockEnd int64
				up := &scriptedUpstream{at: start + int64(10*time.Second) + 7, status: tc.status}
				up.retryAfter = func(now int64) string {
					if !tc.date {
						blockEnd = now + int64(3*time.Second)
						return "3"
					}
					// HTTP-dates have whole seconds: name the first whole
					// second at least 3 s away.
					wall := time.Now().Add(3 * time.Second)
					date := wall.Truncate(time.Second)
					if date.Before(wall) {
						date = date.Add(time.Second)
					}
					blockEnd = now + int64(date.Sub(time.Now()))
					return date.UTC().Format(http.TimeFormat)
				}
				opts := []Option{WithoutThrottle()}
				if tc.burst > 0 {
					opts = append(opts, WithBurst(tc.burst))
				}
				tr, err := NewTransport(inMemory{up}, ratelimit.Per(20, time.Second), opts...)
				if err != nil {
					t.Fatal(err)
				}
				drive(t, tr, 5, 20*time.Second, "http://api.example/")
				up.mu.Lock()
				defer up.mu.Unlock()
				if up.fired == 0 {
					t.Fatal("the scripted answer never fired")
				}
				after := -1
				for i, at := range up.times {
					if at > up.fired && at < blockEnd {
						t.Fatalf("request at %v reached the upstream during the block (%v..%v)",
							time.Duration(at-start), time.Duration(up.fired-start), time.Duration(blockEnd-start))
					}
					if at >= blockEnd && after < 0 {
						after = i
					}
				}
				if after < 0 {
					t.Fatal("no request after the block")
				}
				if up.times[after] != blockEnd {
					t.Fatalf("first request after the block at %v, want exactly %v",
						time.Duration(up.times[after]-start), time.Duration(blockEnd-start))
				}
				if up.answers[after] != http.StatusOK {
					t.Fatalf("first request after the block got %d", up.answers[after])
				}
				if blockEnd-up.fired < int64(3*time.Second) {
					t.Fatalf("block of %v, want at least 3s", time.Duration(blockEnd-up.fired))
				}
				// Around the block, the traffic never exceeded the local
				// limit (90% of 20/s, burst 90% of 20 or none).
				conforms(t, up.times, ratelimit.Per(18, time.Second), max(1, tc.burst*9/10))
			})
		})
	}
}

// TestTransportResyncFromHeaders configures the Transport ten times too
// fast (50/s, burst 50) for an upstream that enforces 5/s with a burst of 5
// and reports its quota in its headers. The quota the upstream reports
// corrects the local view: with one client or four concurrent ones (whose
// first requests leave before any answer is back; the upstream takes 20 ms
// to answer) not a single 429 comes back in 60 s, and at least 3 of the 5
// requests per second get through. Without the headers the same
// misconfigured Transport does get 429s.
func TestTransportResyncFromHeaders(t *testing.T) {
	for _, tc := range []struct {
		name    string
		style   headerStyle
		clients int
	}{
		{"x-ratelimit-1", xRateLimit, 1},
		{"x-ratelimit-4", xRateLimit, 4},
		{"ietf-1", ietfHeaders, 1},
		{"ietf-4", ietfHeaders, 4},
		{"no-headers-4", noHeaders, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newLimitedUpstream(ratelimit.Per(5, time.Second), 5, tc.style)
				up.latency = 20 * time.Millisecond
				tr, err := NewTransport(inMemory{up}, ratelimit.Per(50, time.Second),
					WithBurst(50), WithoutThrottle())
				if err != nil {
					t.Fatal(err)
				}
				drive(t, tr, tc.clients, 60*time.Second, "http://api.example/")
				ok, r429 := up.counts()
				t.Logf("ok %d (%.2f/s), 429 %d, stats %+v", ok, float64(ok)/60, r429, tr.Stats())
				if tc.style == noHeaders {
					if r429 == 0 {
						t.Fatal("control: a misconfigured Transport without headers got no 429")
					}
					return
				}
				if r429 != 0 {
					t.Fatalf("%d 429s", r429)
				}
				if float64(ok)/60 < 3 {
					t.Fatalf("only %.2f requests/s got through: the resync is too strict", float64(ok)/60)
				}
			})
		})
	}
}

// conforms fails t unless the request times (in order) fit a token
// bucket of rate and burst: the Transport never sends above its limit,
// whatever blocks and waits happened.
func conforms(t *testing.T, times []int64, rate ratelimit.Rate, burst int64) {
	t.Helper()
	// One nanosecond per token of slack for the rounding of rates to whole
	// nanoseconds per token.
	b, err := ratelimit.NewTokenBucket(rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	for i, at := range times {
		if d := b.AllowN(at+int64(i), 1); !d.Allowed() {
			t.Fatalf("request %d at %v exceeds %v with a burst of %d (%d requests in all)",
				i, time.Duration(at-times[0]), rate, burst, len(times))
		}
	}
}

// TestQuotaReportCountsRequestsSentBeforeItStillInFlight: two requests
// leave at once, A then B, and the upstream (5 left of 5) counts B first:
// B's answer says 4 left, A's 3. A's answer is read first, then B's: B is
// the later request, its report replaces A's, and it cannot know of A,
// still in flight when B left. What the Transport then lets go before the
// reset is at most what the upstream holds (3) less the reserved share
// (1): 2, never 3.
func TestQuotaReportCountsRequestsSentBeforeItStillInFlight(t *testing.T) {
	tr, err := NewTransport(inMemory{}, ratelimit.Per(50, time.Second), WithBurst(50))
	if err != nil {
		t.Fatal(err)
	}
	var k keyState
	report := func(remaining int) *http.Response {
		h := http.Header{}
		h.Set("X-RateLimit-Limit", "5")
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Reset", "1")
		return &http.Response{StatusCode: http.StatusOK, Header: h}
	}
	const now = int64(1) << 40
	k.mu.Lock()
	a, b := k.chargeLocked(now), k.chargeLocked(now)
	k.mu.Unlock()
	tr.learn(&k, a, report(3), nil)
	tr.learn(&k, b, report(4), nil)
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range k.quotas {
		if q := k.quotas[i]; q.active && q.left > 2 {
			t.Fatalf("after reports of 3 (A) and 4 (B, counted first): %d may go, the upstream holds 3 less the reserve of 1", q.left)
		}
	}
}
