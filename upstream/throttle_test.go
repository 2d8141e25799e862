package upstream

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// throttleFlaky is an upstream RoundTripper that fails every call while
// down, and while up accepts one call in every accept (counting its calls).
type throttleFlaky struct {
	mu     sync.Mutex
	calls  int
	accept int  // 1: accept all
	down   bool // fail every call
}

var errThrottleTestDown = errors.New("upstream down")

func (u *throttleFlaky) RoundTrip(req *http.Request) (*http.Response, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls++
	if u.down || u.calls%u.accept != 0 {
		return nil, errThrottleTestDown
	}
	rec := httptest.NewRecorder()
	rec.WriteHeader(http.StatusOK)
	return rec.Result(), nil
}

// TestThrottleFollowsFormula replays 10 minutes of traffic (a request every
// 500 ms of virtual time) against an upstream that accepts one call in
// four, then is down, then healthy, and checks every single local decision
// against an independent replica of the SRE formula over a two-minute
// window, drawing from a copy of the same seeded source.
func TestThrottleFollowsFormula(t *testing.T) {
	for _, tc := range []struct{ k, max float64 }{{2, 1}, {1.5, 1}, {2, 0.8}} {
		k := tc.k
		synctest.Test(t, func(t *testing.T) {
			var rmu sync.Mutex
			src := rand.New(rand.NewPCG(7, 11))
			replicaSrc := rand.New(rand.NewPCG(7, 11))
			up := &throttleFlaky{accept: 4}
			opts := []Option{WithBurst(1000),
				WithThrottle(k), WithThrottleRandom(func() float64 {
					rmu.Lock()
					defer rmu.Unlock()
					return src.Float64()
				})}
			if tc.max < 1 {
				opts = append(opts, WithThrottleMax(tc.max))
			}
			tr, err := NewTransport(up, ratelimit.Per(1000, time.Second), opts...)
			if err != nil {
				t.Fatal(err)
			}
			type event struct {
				at       int64
				accepted bool
			}
			var events []event
			start := clock.Now()
			slot := func(at int64) int64 { return at / int64(10*time.Second) }
			rejected, downRejected, lastRejection := 0, 0, 0
			for i := range 1200 {
				now := clock.Now()
				switch i {
				case 400:
					up.mu.Lock()
					up.down = true
					up.mu.Unlock()
				case 600:
					up.mu.Lock()
					up.down, up.accept = false, 1
					up.mu.Unlock()
				}
				// Replica: counts of the window of 12 slots of 10 s ending
				// in now's slot.
				var r, a int64
				for _, e := range events {
					if slot(e.at) > slot(now)-12 {
						r++
						if e.accepted {
							a++
						}
					}
				}
				p := min(tc.max, max(0, (float64(r)-k*float64(a))/float64(r+1)))
				wantReject := p > 0 && replicaSrc.Float64() < p

				upCalls := up.calls
				_, err := get(tr, "http://api.example/")
				gotReject := errors.Is(err, ErrThrottled)
				if gotReject != wantReject {
					t.Fatalf("K=%v request %d at %v: rejected %v, want %v (p=%.3f, %d requests, %d accepted)",
						k, i, time.Duration(now-start), gotReject, wantReject, p, r, a)
				}
				if gotReject {
					rejected++
					if i >= 400 && i < 600 {
						downRejected++
					}
					lastRejection = i
					if up.calls != upCalls {
						t.Fatal("a locally rejected request reached the upstream")
					}
					events = append(events, event{now, false})
				} else {
					events = append(events, event{now, err == nil})
				}
				time.Sleep(500 * time.Millisecond)
			}
			// Sanity: the scenario did exercise the formula: while the
			// upstream was down, most requests were rejected locally.
			if downRejected < 100 {
				t.Fatalf("K=%v: %d of 200 requests rejected locally while the upstream was down", k, downRejected)
			}
			// With the cap, probing requests get through after recovery
			// and the rejections stop within the window; without it they
			// go on for minutes (the formula's known slow recovery).
			t.Logf("K=%v max=%v: %d rejected, %d while down, last rejection %v after recovery",
				k, tc.max, rejected, downRejected, time.Duration(lastRejection-600)*500*time.Millisecond)
			if tc.max < 1 && lastRejection-600 > 300 {
				t.Fatalf("K=%v max=%v: still rejecting %v after recovery", k, tc.max, time.Duration(lastRejection-600)*500*time.Millisecond)
			}
			if s := tr.Stats(); s.Throttled != int64(rejected) {
				t.Fatalf("stats %+v, want %d throttled", s, rejected)
			}
		})
	}
}

// TestThrottleWindow checks the ring's bookkeeping directly: counts expire
// after 12 slots, and an empty window is reported as such.
func TestThrottleWindow(t *testing.T) {
	var w throttleWindow
	const s = throttleSlot
	if !w.empty(5 * s) {
		t.Fatal("zero window not empty")
	}
	w.request(0)
	w.accept(0)
	w.request(s)
	if r, a := w.totals(11 * s); r != 2 || a != 1 {
		t.Fatalf("totals = %d, %d; want 2, 1", r, a)
	}
	if r, a := w.totals(12 * s); r != 1 || a != 0 {
		t.Fatalf("after slot 0 expired: totals = %d, %d; want 1, 0", r, a)
	}
	if !w.empty(13 * s) {
		t.Fatal("window not empty after every slot expired")
	}
	if p := throttleProbability(100, 0, 2); p < 0.99 || p >= 1 {
		t.Fatalf("p(100, 0) = %v", p)
	}
	if p := throttleProbability(100, 50, 2); p != 0 {
		t.Fatalf("p(100, 50) = %v, want 0", p)
	}
}
