package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/shed"
)

// call is what one request got back.
type call struct {
	key        string
	status     int
	retryAfter string
	took       time.Duration
}

// result is what the self-test saw.
type result struct {
	burst    []call        // the rejections while the accelerators were held
	admitted int           // and the requests admitted then
	load     map[int]int   // status → count under the load
	limit    []int64       // the adaptive limit during the load, every tenth of it
	p50, p99 time.Duration // latency of the load's 200s
}

// selfTest runs two scenes, each on a fresh server on 127.0.0.1:0, prints
// and returns what it saw. In the first, the accelerators are held busy
// (so that the answers do not depend on the machine's speed) while key a
// sends 6 requests at once, then keys b, c and d 4 each, then key e 4: a
// gets 4 in and 2 refused by its per-key limit (429); b, c and d fill the
// adaptive limit's initial 16; e is shed (503). In the second, 4 clients
// warm the endpoint up for loadFor/4 (the limiter learns the unloaded
// latency), then 24 clients send requests back to back for loadFor: the
// adaptive limit comes down to what 4 accelerators serve without a long
// queue, and the excess is shed at once.
func selfTest(out io.Writer, loadFor time.Duration) (result, error) {
	res := result{load: map[int]int{}}
	fmt.Fprintf(out, "%d accelerators, %v an inference; %d at once per key; adaptive limit starts at 16\n",
		accelerators, serviceTime, perKey)
	if err := burst(out, &res); err != nil {
		return res, err
	}
	err := load(out, &res, loadFor)
	return res, err
}

// server is the endpoint served on 127.0.0.1:0, with its Controller.
type server struct {
	*demo.Loopback
	sluice *shed.Controller
	url    string // of the endpoint
}

func start(infer func(context.Context) error) (*server, error) {
	h, sluice, err := newHandler(infer)
	if err != nil {
		return nil, err
	}
	l, err := demo.Serve(h)
	if err != nil {
		return nil, err
	}
	return &server{Loopback: l, sluice: sluice, url: l.URL + "/infer"}, nil
}

func (s *server) get(key string) call {
	begin := time.Now()
	r, err := s.Get("/infer", "X-API-Key", key)
	if err != nil {
		return call{key: key, retryAfter: err.Error()}
	}
	return call{key: key, status: r.Status, retryAfter: r.Header.Get("Retry-After"), took: time.Since(begin)}
}

func burst(out io.Writer, res *result) error {
	m := newModel()
	gate := make(chan struct{})
	letGo := sync.OnceFunc(func() { close(gate) })
	s, err := start(func(ctx context.Context) error {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		return m.infer(ctx)
	})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(out, "GET %s: bursts while the accelerators are held busy\n", s.url)

	answers := make(chan call, 32)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer letGo() // on an early return too
	inflight, answered := int64(0), 0
	for _, b := range []struct {
		key         string
		n, in, shed int
	}{{"a", 6, 4, 2}, {"b", 4, 4, 0}, {"c", 4, 4, 0}, {"d", 4, 4, 0}, {"e", 4, 0, 4}} {
		for range b.n {
			wg.Go(func() { answers <- s.get(b.key) })
		}
		inflight, answered = inflight+int64(b.in), answered+b.shed
		// Wait until the requests that get in are in and the others are
		// answered.
		if !demo.Await(func() bool { return s.sluice.Stats().Inflight == inflight && len(answers) == answered }) {
			return fmt.Errorf("mlinference: never reached %d inflight and %d answered", inflight, answered)
		}
	}
	for range answered {
		c := <-answers
		res.burst = append(res.burst, c)
		fmt.Fprintf(out, "  key %s: %d Retry-After: %s\n", c.key, c.status, c.retryAfter)
	}
	res.admitted = int(inflight)
	fmt.Fprintf(out, "  %d admitted (a 4, b 4, c 4, d 4) and held; the accelerators are let go\n", inflight)
	letGo()
	for range inflight {
		if c := <-answers; c.status != http.StatusOK {
			return fmt.Errorf("mlinference: a held request got %d %s", c.status, c.retryAfter)
		}
	}
	return nil
}

func load(out io.Writer, res *result, loadFor time.Duration) error {
	s, err := start(newModel().infer)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(out, "GET %s: 4 clients warm up for %v, then 24 clients back to back (20 ms pause after a 503) for %v\n", s.url, loadFor/4, loadFor)
	s.drive(4, loadFor/4, func(call) {})

	var (
		mu   sync.Mutex
		ok   []time.Duration
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		s.drive(24, loadFor, func(c call) {
			mu.Lock()
			defer mu.Unlock()
			res.load[c.status]++
			if c.status == http.StatusOK {
				ok = append(ok, c.took)
			}
		})
	}()
	tick := time.NewTicker(loadFor / 10)
	for range 10 {
		<-tick.C
		res.limit = append(res.limit, s.sluice.Stats().Rules[0].Limit)
	}
	tick.Stop()
	<-done
	slices.Sort(ok)
	if len(ok) > 0 {
		res.p50, res.p99 = ok[len(ok)/2], ok[len(ok)*99/100]
	}
	fmt.Fprintf(out, "  adaptive limit every %v: %v\n", loadFor/10, res.limit)
	fmt.Fprintf(out, "  %d × 200 (p50 %v, p99 %v), %d × 503 shed at once",
		res.load[http.StatusOK], res.p50.Round(time.Millisecond), res.p99.Round(time.Millisecond), res.load[http.StatusServiceUnavailable])
	if n := res.load[0]; n > 0 {
		fmt.Fprintf(out, ", %d failed", n)
	}
	fmt.Fprintln(out)
	return nil
}

// backoff is how long a load client pauses after a rejection.
const backoff = 20 * time.Millisecond

// drive runs clients that each send requests back to back (pausing for
// backoff after a rejection), for d, and hands every answer to record.
func (s *server) drive(clients int, d time.Duration, record func(call)) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				c := s.get(fmt.Sprintf("client-%d", i))
				record(c)
				if c.status != http.StatusOK {
					// A polite client backs off; a short pause keeps the
					// pressure on without spinning.
					time.Sleep(backoff)
				}
			}
		})
	}
	wg.Wait()
}
