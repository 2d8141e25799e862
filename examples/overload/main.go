// Command overload shows what admission control does for an endpoint with a
// fixed capacity. It serves a simulated inference endpoint (a pool of
// accelerators with a fixed service time) on loopback, drives it with an
// open-loop load that rises from 1x to 10x its capacity, first unprotected
// and then protected by sluice, and prints a live table per second and a
// side-by-side summary.
//
// Unprotected, requests queue for the accelerators, waits exceed the
// clients' deadline and the server keeps working on requests nobody waits
// for: goodput collapses and p99 explodes. Protected, sluice's adaptive limit
// finds the endpoint's concurrency and sheds the excess at once with 503 and
// Retry-After: p99 stays flat and goodput stays near capacity.
//
//	go run ./examples/overload
//	go run ./examples/overload -duration 8s -svg overload.svg
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"time"
)

type config struct {
	duration     time.Duration
	peak         float64
	accelerators int
	service      time.Duration
	deadline     time.Duration
	seed         uint64
	svg          string
	modes        string
}

func main() {
	var c config
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "run time of each mode")
	flag.Float64Var(&c.peak, "peak", 10, "offered load at the end of a run, as a multiple of capacity (rises linearly from 1)")
	flag.IntVar(&c.accelerators, "accelerators", 8, "size of the accelerator pool")
	flag.DurationVar(&c.service, "service", 80*time.Millisecond, "service time of one inference")
	flag.DurationVar(&c.deadline, "deadline", time.Second, "client deadline; answers after it do not count as goodput")
	flag.Uint64Var(&c.seed, "seed", 1, "seed of the arrival process")
	flag.StringVar(&c.svg, "svg", "", "write a plot of both runs to this SVG file")
	flag.StringVar(&c.modes, "modes", "both", "which runs: both, unprotected or protected")
	flag.Parse()
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "overload:", err)
		os.Exit(1)
	}
}

func run(c config, out io.Writer) error {
	if c.duration <= 0 || c.peak < 1 || c.accelerators <= 0 || c.service <= 0 || c.deadline <= 0 {
		return errors.New("duration, service and deadline must be positive, accelerators at least 1, peak at least 1")
	}
	var modes []string
	switch c.modes {
	case "both":
		modes = []string{"unprotected", "protected"}
	case "unprotected", "protected":
		modes = []string{c.modes}
	default:
		return fmt.Errorf("unknown -modes %q", c.modes)
	}
	capacity := float64(c.accelerators) / c.service.Seconds()
	fmt.Fprintf(out, "endpoint capacity: %d accelerators x %v = %.0f req/s; client deadline %v; load 1x -> %.0fx over %v\n",
		c.accelerators, c.service, capacity, c.deadline, c.peak, c.duration)
	var results []modeResult
	for _, mode := range modes {
		r, err := runMode(c, mode, out)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	printSummary(out, results, capacity)
	if c.svg != "" {
		if err := writeSVG(c.svg, results, capacity); err != nil {
			return err
		}
		fmt.Fprintf(out, "plot written to %s\n", c.svg)
	}
	return nil
}

// modeResult is one run's record.
type modeResult struct {
	mode    string
	seconds []second
	// drained are the seconds after the load stopped: answers still
	// arriving, counted in the totals, not plotted.
	drained  []second
	duration time.Duration
}

func runMode(c config, mode string, out io.Writer) (modeResult, error) {
	acc := newAccelerators(c.accelerators, c.service)
	var handler http.Handler = acc
	limit := func() int { return -1 }
	if mode == "protected" {
		p, err := newProtection()
		if err != nil {
			return modeResult{}, err
		}
		defer p.close()
		handler = p.wrap(acc)
		limit = p.limit
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return modeResult{}, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		close(acc.stop)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()

	transport := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 30 * time.Second}
	defer transport.CloseIdleConnections()
	capacity := acc.capacity()
	gen := &generator{
		client:   &http.Client{Transport: transport},
		url:      "http://" + ln.Addr().String() + "/infer",
		capacity: capacity,
		peak:     c.peak,
		deadline: c.deadline,
		rng:      rand.New(rand.NewPCG(c.seed, 0x5eed)),
	}
	rec := &recorder{start: time.Now()}

	fmt.Fprintf(out, "\n== %s\n", mode)
	if mode == "protected" {
		fmt.Fprintln(out, "(the protection is the rule in protect.go: one shed.Adaptive rule around the handler)")
	}
	fmt.Fprintln(out, "per second: load as a multiple of capacity; requests offered, served within the deadline,")
	fmt.Fprintln(out, "shed (503 + Retry-After), late (past the client's deadline); p50/p99 of the served; the limit in force")
	fmt.Fprintf(out, "%5s %7s %7s %7s %6s %6s %9s %9s %6s\n",
		"t", "load", "offered", "served", "shed", "late", "p50", "p99", "limit")
	done := make(chan struct{})
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		row := 0
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			rec.mu.Lock()
			s := rec.at(rec.start.Add(time.Duration(row) * time.Second))
			s.limit = limit()
			printRow(out, row, s)
			rec.mu.Unlock()
			row++
		}
	}()
	gen.run(context.Background(), c.duration, rec)
	close(done)
	<-printed
	rec.mu.Lock()
	defer rec.mu.Unlock()
	seconds := rec.seconds
	if full := int(c.duration / time.Second); len(seconds) > full {
		seconds = seconds[:full] // the drain after the load: a partial second, plotted it would mislead
	}
	return modeResult{mode: mode, seconds: seconds, drained: rec.seconds[len(seconds):], duration: c.duration}, nil
}

func printRow(out io.Writer, i int, s *second) {
	lim := "-"
	if s.limit >= 0 {
		lim = fmt.Sprint(s.limit)
	}
	fmt.Fprintf(out, "%4ds %6.1fx %7d %7d %7d %6d %9s %9s %6s\n", i+1, s.multiple, s.offered, s.served, s.shed,
		s.late, ms(s.percentile(0.50)), ms(s.percentile(0.99)), lim)
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// totals sums a run. Answers that arrive after the load stops (the drain)
// count too: they are the price of what was accepted.
func totals(r modeResult) (offered, served, shed, late int, lat []int64) {
	for _, s := range append(append([]second(nil), r.seconds...), r.drained...) {
		offered += s.offered
		served += s.served
		shed += s.shed
		late += s.late + s.failed
		lat = append(lat, s.latencies...)
	}
	return
}

func printSummary(out io.Writer, results []modeResult, capacity float64) {
	fmt.Fprintf(out, "\n== summary (capacity %.0f req/s)\n%-12s %8s %9s %9s %9s %7s %7s\n",
		capacity, "mode", "offered", "goodput", "p50", "p99", "shed", "late")
	for _, r := range results {
		offered, served, shed, late, lat := totals(r)
		fmt.Fprintf(out, "%-12s %8d %7.1f/s %9s %9s %6.1f%% %6.1f%%\n", r.mode, offered,
			float64(served)/r.duration.Seconds(), ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)),
			100*frac(shed, offered), 100*frac(late, offered))
	}
	fmt.Fprintln(out)
	for _, r := range results {
		offered, served, shed, _, lat := totals(r)
		fmt.Fprintf(out, "mode=%s goodput=%.1f p99_ms=%.1f shed=%.3f\n", r.mode,
			float64(served)/r.duration.Seconds(), float64(percentile(lat, 0.99))/float64(time.Millisecond), frac(shed, offered))
	}
}

func frac(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
