package main

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// second aggregates what completed during one second of a run.
type second struct {
	offered   int     // requests sent during the second
	served    int     // 200s received within the client's deadline
	shed      int     // 429/503 rejections
	late      int     // deadline passed before an answer
	failed    int     // anything else
	latencies []int64 // of the served requests, in µs
	limit     int     // the protection's limit at the end of the second (-1: none)
	multiple  float64 // offered load as a multiple of capacity
}

func (s *second) percentile(p float64) time.Duration {
	return percentile(s.latencies, p)
}

func percentile(lat []int64, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return time.Duration(sorted[max(0, i)]) * time.Microsecond
}

// recorder collects results by the second they completed in.
type recorder struct {
	mu      sync.Mutex
	start   time.Time
	seconds []second
}

func (r *recorder) at(t time.Time) *second {
	i := int(t.Sub(r.start) / time.Second)
	for len(r.seconds) <= i {
		r.seconds = append(r.seconds, second{limit: -1})
	}
	return &r.seconds[i]
}

func (r *recorder) offered(t time.Time, multiple float64) {
	r.mu.Lock()
	s := r.at(t)
	s.offered++
	s.multiple = multiple
	r.mu.Unlock()
}

func (r *recorder) result(t time.Time, status int, err error, latency time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.at(t)
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded):
		s.late++
	case err != nil:
		s.failed++
	case status == http.StatusOK:
		s.served++
		s.latencies = append(s.latencies, latency.Microseconds())
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		s.shed++
	default:
		s.failed++
	}
}

// generator sends an open-loop stream of requests: arrivals follow a Poisson
// process whose rate rises linearly from 1x to peak x capacity over the run,
// whatever the server answers (open loop: slow answers do not slow the
// clients down, as in real traffic).
type generator struct {
	client   *http.Client
	url      string
	capacity float64
	peak     float64
	deadline time.Duration
	rng      *rand.Rand
}

// multiple returns the offered load, as a multiple of capacity, at elapsed
// of a run lasting d.
func (g *generator) multiple(elapsed, d time.Duration) float64 {
	f := min(1, max(0, elapsed.Seconds()/d.Seconds()))
	return 1 + (g.peak-1)*f
}

// run sends requests for d and returns when every answer is in.
func (g *generator) run(ctx context.Context, d time.Duration, rec *recorder) {
	var wg sync.WaitGroup
	start := rec.start
	next := start
	for {
		now := time.Now()
		if now.Sub(start) >= d || ctx.Err() != nil {
			break
		}
		// Send every arrival that is due, then sleep until the next one.
		for !next.After(now) {
			m := g.multiple(next.Sub(start), d)
			rec.offered(next, m)
			wg.Go(func() { g.one(rec) })
			next = next.Add(time.Duration(g.rng.ExpFloat64() / (m * g.capacity) * float64(time.Second)))
		}
		time.Sleep(time.Until(next))
	}
	wg.Wait()
}

func (g *generator) one(rec *recorder) {
	ctx, cancel := context.WithTimeout(context.Background(), g.deadline)
	defer cancel()
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, nil)
	if err != nil {
		rec.result(t0, 0, err, 0)
		return
	}
	resp, err := g.client.Do(req)
	if err != nil {
		rec.result(time.Now(), 0, err, 0)
		return
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t1 := time.Now()
	if err == nil && t1.Sub(t0) > g.deadline {
		err = context.DeadlineExceeded
	}
	rec.result(t1, resp.StatusCode, err, t1.Sub(t0))
}
