package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// loadConfig is what the load role sends.
type loadConfig struct {
	url      string
	rate     float64       // Poisson arrivals per second (open loop); or
	closed   int           // this many clients, each sending its next request when the last ends
	duration time.Duration // how long requests are sent
	from     time.Duration // the measured window is [from, duration] of completions
	deadline time.Duration // each request's client deadline
	proto    string
	seed     uint64
	// fresh makes every request open a new connection and close it after
	// its answer: the dial storm of HTTP/1.1 clients under overload.
	fresh bool
	// client is the HTTP/1.1 client of keep-alive cells: "raw" (rawClient,
	// the default) or "go" (net/http's Transport). h2c and fresh cells use
	// the Transport.
	client string
	// thenRate, when positive, is the arrival rate from thenAt on (rate
	// before): a surge that ends.
	thenRate float64
	thenAt   time.Duration
	// bucket, when positive, splits the whole cell into buckets of this
	// length (loadResult.Buckets).
	bucket time.Duration
	// stall, when positive, is a pause of the generator from stallAt on:
	// it sends nothing for stall, then every arrival that fell due
	// meanwhile at once, as clients that were held up (a stalled client
	// host, a network hiccup) send what they owe.
	stall, stallAt time.Duration
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// maxOutstanding bounds the requests in flight in the load generator: an
// arrival beyond it is counted as skipped, not sent.
const maxOutstanding = 60_000

// loadResult is what the load role reports. Counts other than Sent,
// Skipped and Dials are of completions within the measured window.
type loadResult struct {
	Sent     int64   `json:"sent"`
	Skipped  int64   `json:"skipped"`
	Dials    int64   `json:"dials"`
	WindowS  float64 `json:"window_s"`
	Good     int64   `json:"good"`     // 2xx within the deadline
	Shed     int64   `json:"shed"`     // 503 and 429
	Timeouts int64   `json:"timeouts"` // the deadline passed first
	Errors   int64   `json:"errors"`   // transport errors and other statuses
	P50US    int64   `json:"p50_us"`   // of the good answers
	P99US    int64   `json:"p99_us"`
	MaxLagUS int64   `json:"max_lag_us"` // how late the generator sent an arrival at worst
	CPUUS    int64   `json:"cpu_us"`     // the generator's CPU time (user and system) over the cell
	// Buckets split the whole cell (not only the measured window) into
	// loadConfig.bucket-long slices, when asked for.
	Buckets []bucket `json:"buckets,omitempty"`
}

// bucket is one slice of a cell: the arrivals due in it (sent or skipped),
// the connections dialled for them, and the answers that completed in it
// as the window counts them, with the good ones' latencies.
type bucket struct {
	Due      int64   `json:"due"`
	Good     int64   `json:"good"`
	LatsUS   []int64 `json:"lats_us,omitempty"`
	Shed     int64   `json:"shed,omitempty"`
	Timeouts int64   `json:"timeouts,omitempty"`
	Errors   int64   `json:"errors,omitempty"`
	Dials    int64   `json:"dials,omitempty"`
	// dialsBy is the generator's dial count as the bucket's latest
	// arrival went out (see window.due).
	dialsBy int64
}

// window collects the completions of one phase.
type window struct {
	start    time.Time
	from, to time.Duration
	deadline time.Duration
	mu       sync.Mutex
	res      loadResult
	good     []int64 // latencies of good answers, µs
	// bucket, when positive, is the length of the buckets of the whole
	// cell, kept in buckets (len: the cell over bucket, rounded up).
	bucket  time.Duration
	buckets []bucket
}

// bucketOf returns the bucket of at from the cell's start, or nil.
func (w *window) bucketOf(at time.Duration) *bucket {
	if w.bucket <= 0 || at < 0 {
		return nil
	}
	if i := int(at / w.bucket); i < len(w.buckets) {
		return &w.buckets[i]
	}
	return nil
}

// due counts an arrival scheduled at at, sent when the generator had
// dialled dials connections (under w.mu).
func (w *window) due(at time.Duration, dials int64) {
	if b := w.bucketOf(at); b != nil {
		b.Due++
		b.dialsBy = max(b.dialsBy, dials)
	}
}

// closeBuckets gives each bucket its dials once the cell ended: those
// made between the latest arrival of the bucket before it that had one
// and its own latest arrival (the dials an arrival causes follow it by
// a connect, so a few count in the next bucket). dials is the count at
// the end, for the last bucket with arrivals.
func (w *window) closeBuckets(dials int64) {
	var prev int64
	last := -1
	for i := range w.buckets {
		if w.buckets[i].Due > 0 {
			last = i
		}
	}
	for i := range w.buckets {
		b := &w.buckets[i]
		if b.Due == 0 {
			continue
		}
		by := b.dialsBy
		if i == last {
			by = max(by, dials)
		}
		b.Dials, prev = by-prev, by
	}
}

// outcome is how one request ended, as the window counts it.
type outcome int

const (
	outGood outcome = iota
	outShed
	outTimedOut
	outFailed
)

// outcomeOf classifies a request that ended with status or err after lat.
func (w *window) outcomeOf(lat time.Duration, status int, err error) outcome {
	switch {
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
		return outTimedOut
	case err != nil:
		return outFailed
	case status >= 200 && status < 300 && lat > w.deadline:
		return outTimedOut // answered, but too late to be of use
	case status >= 200 && status < 300:
		return outGood
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		return outShed
	}
	return outFailed
}

func (w *window) record(done time.Time, lat time.Duration, status int, err error) {
	at := done.Sub(w.start)
	o := w.outcomeOf(lat, status, err)
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.bucketOf(at); b != nil {
		switch o {
		case outGood:
			b.Good++
			b.LatsUS = append(b.LatsUS, lat.Microseconds())
		case outShed:
			b.Shed++
		case outTimedOut:
			b.Timeouts++
		case outFailed:
			b.Errors++
		}
	}
	if at < w.from || at > w.to {
		return
	}
	switch o {
	case outGood:
		w.res.Good++
		w.good = append(w.good, lat.Microseconds())
	case outShed:
		w.res.Shed++
	case outTimedOut:
		w.res.Timeouts++
	case outFailed:
		w.res.Errors++
	}
}

// newClient returns a client of proto whose dials are counted: keep-alive,
// or with fresh a new connection per request.
func newClient(proto string, fresh bool, dials *atomic.Int64) (*http.Client, *http.Transport, error) {
	protos, err := protocols(proto)
	if err != nil {
		return nil, nil, err
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		Protocols:           protos,
		MaxIdleConns:        0, // no limit
		MaxIdleConnsPerHost: maxOutstanding,
		IdleConnTimeout:     30 * time.Second,
		DisableKeepAlives:   fresh,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
	}
	return &http.Client{Transport: tr}, tr, nil
}

// drive runs the load role: it prints "start" as the first request goes
// out, sends requests for cfg.duration and returns what came back. Every
// request still out at the end is cancelled.
func drive(cfg loadConfig, out io.Writer) (loadResult, error) {
	if cfg.duration <= 0 || cfg.deadline <= 0 || cfg.from < 0 || cfg.from >= cfg.duration {
		return loadResult{}, fmt.Errorf("overload: bad load window (duration %v, from %v, deadline %v)", cfg.duration, cfg.from, cfg.deadline)
	}
	if (cfg.rate > 0) == (cfg.closed > 0) {
		return loadResult{}, fmt.Errorf("overload: want exactly one of a rate (%v) and a closed-loop concurrency (%d)", cfg.rate, cfg.closed)
	}
	if cfg.thenRate < 0 || cfg.thenAt < 0 || (cfg.thenRate > 0 && (cfg.rate <= 0 || cfg.thenAt >= cfg.duration)) || cfg.bucket < 0 {
		return loadResult{}, fmt.Errorf("overload: bad rate schedule (then %v from %v) or bucket %v", cfg.thenRate, cfg.thenAt, cfg.bucket)
	}
	if cfg.stall < 0 || cfg.stallAt < 0 || (cfg.stall > 0 && (cfg.rate <= 0 || cfg.stallAt+cfg.stall >= cfg.duration)) {
		return loadResult{}, fmt.Errorf("overload: bad stall (%v from %v): want an open-loop cell that goes on after it", cfg.stall, cfg.stallAt)
	}
	var dials atomic.Int64
	client, tr, err := newClient(cfg.proto, cfg.fresh, &dials)
	if err != nil {
		return loadResult{}, err
	}
	defer tr.CloseIdleConnections()
	var raw *rawClient
	switch {
	case cfg.client != "raw" && cfg.client != "go" && cfg.client != "":
		return loadResult{}, fmt.Errorf("overload: unknown client %q (raw or go)", cfg.client)
	case cfg.client != "go" && cfg.proto == "1" && !cfg.fresh:
		if raw, err = newRawClient(cfg.url, &dials); err != nil {
			return loadResult{}, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		sent, skipped, outstanding atomic.Int64
		wg                         sync.WaitGroup
	)
	w := &window{from: cfg.from, to: cfg.duration, deadline: cfg.deadline, bucket: cfg.bucket}
	if cfg.bucket > 0 {
		w.buckets = make([]bucket, (cfg.duration+cfg.bucket-1)/cfg.bucket)
	}
	if cfg.rate > 0 {
		w.good = make([]int64, 0, min(1<<20, int(cfg.rate*cfg.duration.Seconds())+16))
	}
	// one sends a request that arrived at at: its deadline and its latency
	// count from the arrival, not from when the generator got to it, so that
	// a late generator cannot hide a slow server.
	one := func(at time.Time) {
		if raw != nil {
			status, err := raw.do(at.Add(cfg.deadline))
			t1 := time.Now()
			w.record(t1, t1.Sub(at), status, err)
			return
		}
		rctx, rcancel := context.WithDeadline(ctx, at.Add(cfg.deadline))
		defer rcancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, cfg.url, nil)
		if err != nil {
			w.record(time.Now(), 0, 0, err)
			return
		}
		resp, err := client.Do(req)
		status := 0
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
		t1 := time.Now()
		w.record(t1, t1.Sub(at), status, err)
	}

	u0, s0 := cpuNow()
	fmt.Fprintln(out, "start")
	w.start = time.Now()
	end := w.start.Add(cfg.duration)
	var maxLag time.Duration
	if cfg.rate > 0 {
		rng := rand.New(rand.NewPCG(cfg.seed, 0x5eed))
		next := w.start
		// gap draws the time to the arrival after one at t.
		gap := func(t time.Time) time.Duration {
			r := cfg.rate
			if cfg.thenRate > 0 && t.Sub(w.start) >= cfg.thenAt {
				r = cfg.thenRate
			}
			return time.Duration(rng.ExpFloat64() / r * float64(time.Second))
		}
		// stallEnd is when the stall ends, once it began: an arrival due
		// before it is late only by what comes after it.
		var stallEnd time.Time
		for {
			now := time.Now()
			if !now.Before(end) {
				break
			}
			if cfg.stall > 0 && stallEnd.IsZero() && now.Sub(w.start) >= cfg.stallAt {
				stallEnd = w.start.Add(cfg.stallAt + cfg.stall)
				time.Sleep(time.Until(stallEnd))
				continue
			}
			// Send every arrival that is due; a late one goes out at once.
			for ; !next.After(now) && next.Before(end); next = next.Add(gap(next)) {
				maxLag = max(maxLag, now.Sub(later(next, stallEnd)))
				if w.bucket > 0 {
					w.mu.Lock()
					w.due(next.Sub(w.start), dials.Load())
					w.mu.Unlock()
				}
				if outstanding.Load() >= maxOutstanding {
					skipped.Add(1)
					continue
				}
				sent.Add(1)
				outstanding.Add(1)
				at := next
				wg.Go(func() {
					defer outstanding.Add(-1)
					one(at)
				})
			}
			time.Sleep(min(time.Until(next), time.Until(end)))
		}
	} else {
		for range cfg.closed {
			wg.Go(func() {
				for time.Now().Before(end) && ctx.Err() == nil {
					sent.Add(1)
					one(time.Now())
				}
			})
		}
		time.Sleep(time.Until(end))
	}
	cancel()
	if raw != nil {
		raw.close()
	}
	wg.Wait()

	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.res
	r.Sent, r.Skipped, r.Dials = sent.Load(), skipped.Load(), dials.Load()
	r.WindowS = (cfg.duration - cfg.from).Seconds()
	r.P50US, r.P99US = quantile(w.good, 0.50), quantile(w.good, 0.99)
	r.MaxLagUS = maxLag.Microseconds()
	u1, s1 := cpuNow()
	r.CPUUS = u1 - u0 + s1 - s0
	w.closeBuckets(dials.Load())
	r.Buckets = w.buckets
	return r, nil
}
