package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// counting is an in-memory upstream that answers 200 after latency
// of virtual time and counts the requests and the peak in flight.
type counting struct {
	latency time.Duration
	calls   atomic.Int64
	mu      sync.Mutex
	in, pk  int
}

func (u *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.calls.Add(1)
	u.mu.Lock()
	u.in++
	u.pk = max(u.pk, u.in)
	u.mu.Unlock()
	if u.latency > 0 {
		time.Sleep(u.latency) // virtual time
	}
	u.mu.Lock()
	u.in--
	u.mu.Unlock()
}

// TestTransportDeadlineFailsAtOnce: a request whose turn falls after its
// deadline (or beyond the max wait) fails at once, with the errors.Is-able
// sentinel, without sending anything and without the clock moving; a
// request that can wait gets its turn at the exact instant.
func TestTransportDeadlineFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"bucket", []Option{WithBurst(1)}},
		{"pacer", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := &counting{}
				// 1 per 900 ms at 90%: one request per second.
				tr, err := NewTransport(inMemory{up}, ratelimit.Per(1, 900*time.Millisecond),
					append(tc.opts, WithMaxWait(2*time.Second))...)
				if err != nil {
					t.Fatal(err)
				}
				call := func(timeout time.Duration) error {
					ctx, cancel := context.WithTimeout(context.Background(), timeout)
					defer cancel()
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/", nil)
					resp, err := tr.RoundTrip(req)
					if err == nil {
						resp.Body.Close()
					}
					return err
				}
				start := clock.Now()
				if err := call(time.Hour); err != nil {
					t.Fatal(err)
				}
				// The next turn is 1 s away: a 500 ms deadline fails now.
				err = call(500 * time.Millisecond)
				if !errors.Is(err, ErrDeadline) {
					t.Fatalf("err = %v, want ErrDeadline", err)
				}
				if now := clock.Now(); now != start {
					t.Fatalf("failing took %v of virtual time, want none", time.Duration(now-start))
				}
				// Three requests queue for turns at 1 s, 2 s, 3 s; the one at
				// 3 s is beyond the max wait of 2 s.
				var wg sync.WaitGroup
				errs := make([]error, 3)
				at := make([]time.Duration, 3)
				for i := range 3 {
					wg.Go(func() {
						errs[i] = call(time.Hour)
						at[i] = time.Duration(clock.Now() - start)
					})
					synctest.Wait() // queue in order
				}
				wg.Wait()
				if errs[0] != nil || errs[1] != nil || at[0] != time.Second || at[1] != 2*time.Second {
					t.Fatalf("first two: %v at %v, %v at %v; want nil at 1s, nil at 2s", errs[0], at[0], errs[1], at[1])
				}
				if !errors.Is(errs[2], ErrMaxWait) || at[2] != 0 {
					t.Fatalf("third: %v after %v, want ErrMaxWait at once", errs[2], at[2])
				}
				if got := up.calls.Load(); got != 3 {
					t.Fatalf("upstream got %d calls, want 3", got)
				}
				if s := tr.Stats(); s.FailedFast != 2 || s.Sent != 3 {
					t.Fatalf("stats %+v", s)
				}
			})
		})
	}
}

// TestTransportCancelGivesTurnBack: a request cancelled while waiting
// returns the context's error and its turn goes to the next request.
func TestTransportCancelGivesTurnBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &counting{}
		tr, err := NewTransport(inMemory{up}, ratelimit.Per(1, 900*time.Millisecond), WithBurst(1))
		if err != nil {
			t.Fatal(err)
		}
		start := clock.Now()
		if _, err := get(tr, "http://api.example/"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/", nil)
			_, err := tr.RoundTrip(req)
			done <- err
		}()
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if _, err := get(tr, "http://api.example/"); err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(clock.Now() - start); got != time.Second {
			t.Fatalf("next request went at %v, want 1s (the cancelled turn given back)", got)
		}
		if got := up.calls.Load(); got != 2 {
			t.Fatalf("upstream got %d calls, want 2", got)
		}
	})
}

// TestTransportConcurrencyCap: with a cap of 3 in flight per key and an
// upstream that takes 100 ms, ten eager clients never have more than 3
// requests at the upstream, do reach 3, and every place is given back.
func TestTransportConcurrencyCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &counting{latency: 100 * time.Millisecond}
		tr, err := NewTransport(inMemory{up}, ratelimit.Per(1000, time.Second),
			WithBurst(1000), WithConcurrency(3))
		if err != nil {
			t.Fatal(err)
		}
		statuses, _ := drive(t, tr, 10, 10*time.Second, "http://api.example/")
		if up.pk != 3 {
			t.Fatalf("peak in flight %d, want 3", up.pk)
		}
		// 3 at a time, 100 ms each, for 10 s.
		if statuses[http.StatusOK] < 290 {
			t.Fatalf("%d requests served, want about 300", statuses[http.StatusOK])
		}
		ref, _ := tr.keys.Get("api.example", clock.Now())
		defer ref.Release()
		if in := ref.Value().sem.Inflight(); in != 0 {
			t.Fatalf("%d places still held after every body was closed", in)
		}
	})
}

// TestTransportConcurrencyCapMaxWait: a request that cannot get a place
// within the max wait fails with ErrMaxWait.
func TestTransportConcurrencyCapMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") })
		tr, err := NewTransport(inMemory{h}, ratelimit.Per(1000, time.Second),
			WithBurst(1000), WithConcurrency(1), WithMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/", nil)
		resp, err := tr.RoundTrip(req) // holds the only place until its body is closed
		if err != nil {
			t.Fatal(err)
		}
		go func() { <-release; resp.Body.Close() }()
		start := clock.Now()
		if _, err := get(tr, "http://api.example/"); !errors.Is(err, ErrMaxWait) {
			t.Fatalf("err = %v, want ErrMaxWait", err)
		}
		if got := time.Duration(clock.Now() - start); got != time.Second {
			t.Fatalf("gave up after %v, want the max wait of 1s", got)
		}
		close(release)
		synctest.Wait()
		if _, err := get(tr, "http://api.example/"); err != nil {
			t.Fatalf("after the place was given back: %v", err)
		}
	})
}

// TestTransportKeysBounded: with room for 4 keys, a flood of 100 hosts
// keeps at most 4 entries, and does not reset a key that is blocked by a
// Retry-After: a request to it still fails at once on its deadline.
func TestTransportKeysBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host == "blocked.example" {
				w.Header().Set("Retry-After", "600")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		tr, err := NewTransport(inMemory{h}, ratelimit.Per(100, time.Second),
			WithBurst(10), WithKeys(4), WithoutThrottle())
		if err != nil {
			t.Fatal(err)
		}
		if code, err := get(tr, "http://blocked.example/"); err != nil || code != http.StatusTooManyRequests {
			t.Fatalf("%d, %v", code, err)
		}
		for i := range 100 {
			if _, err := get(tr, "http://host"+string(rune('a'+i%26))+string(rune('a'+i/26))+".example/"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // each host's state recovers before the next
		}
		if s := tr.keys.Stats(); s.Entries > 4 || s.Evictions == 0 {
			t.Fatalf("table stats %+v: want at most 4 entries and some evictions", s)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://blocked.example/", nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, ErrDeadline) {
			t.Fatalf("blocked key after the flood: err = %v, want ErrDeadline", err)
		}
	})
}
